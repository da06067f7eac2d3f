{{/* The chart's name, at most 63 characters. */}}
{{- define "cms.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name, at most 63 characters. */}}
{{- define "cms.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "cms.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cms.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cms.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "cms.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret the pods read CMS_* secrets and cloud credentials from. */}}
{{- define "cms.secretName" -}}
{{- default (include "cms.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* "true" when the store is PostgreSQL (multi-replica mode), else empty. */}}
{{- define "cms.postgres" -}}
{{- $url := .Values.database.url | default "" }}
{{- if or .Values.database.existingSecret (hasPrefix "postgres://" $url) (hasPrefix "postgresql://" $url) }}true{{ end }}
{{- end }}

{{/* Refuses values that cannot work; rendered by the Deployment. */}}
{{- define "cms.validate" -}}
{{- $url := .Values.database.url | default "" }}
{{- $replicas := int .Values.replicaCount }}
{{- if and $url (not (or (hasPrefix "postgres://" $url) (hasPrefix "postgresql://" $url) (hasPrefix "sqlite:" $url))) }}
{{- fail "database.url must be a postgres:// (or postgresql://) URL, or a sqlite: URL for a single replica" }}
{{- end }}
{{- if and (gt $replicas 1) (not (include "cms.postgres" .)) }}
{{- fail (printf "replicaCount is %d, and more than one replica requires PostgreSQL: set database.url to a postgres:// URL (or database.existingSecret); SQLite serves a single replica only" $replicas) }}
{{- end }}
{{- if and (gt $replicas 1) (not (or .Values.secrets.secretsKey .Values.secrets.existingSecret)) }}
{{- fail "more than one replica requires one shared secrets key: set secrets.secretsKey (CMS_SECRETS_KEY) or secrets.existingSecret; otherwise each replica generates a key file of its own and all but the first refuse to start" }}
{{- end }}
{{- if and .Values.secrets.existingSecret $url }}
{{- fail "with secrets.existingSecret, keep the database URL in a Secret too: set database.existingSecret instead of database.url" }}
{{- end }}
{{- range $name, $value := .Values.secrets.cloudCredentials }}
{{- if not (or (hasPrefix "OCI_CLI_" $name) (hasPrefix "OS_" $name)) }}
{{- fail (printf "secrets.cloudCredentials holds OCI_CLI_* and OS_* variables only, not %s" $name) }}
{{- end }}
{{- end }}
{{- end }}
