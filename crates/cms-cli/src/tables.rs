//! The columns of each kind's table, built from the shared cms-model types.

use chrono::{DateTime, Utc};
use cms_model::{
    ApiToken, Backup, ConfigPatch, Grant, Machine, NodeGroup, Projected, Tenant, User, UserRole,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Something shown as one table row.
pub(crate) trait Row: Serialize + DeserializeOwned {
    /// The kind in `kind/name` output.
    const KIND: &'static str;
    /// The column titles.
    const HEADERS: &'static [&'static str];
    /// The name in `kind/name` output.
    fn name(&self) -> String;
    /// The cells, in the order of [`Row::HEADERS`].
    fn cells(&self, now: DateTime<Utc>) -> Vec<String>;
}

impl Row for Tenant {
    const KIND: &'static str = "tenant";
    const HEADERS: &'static [&'static str] =
        &["NAME", "PHASE", "READY", "KUBERNETES", "TALOS", "GROUPS", "AGE"];
    fn name(&self) -> String {
        self.metadata.name.clone()
    }
    fn cells(&self, now: DateTime<Utc>) -> Vec<String> {
        let mut phase = word(&self.status.phase);
        if self.metadata.deletion_timestamp.is_some() {
            phase = "deleting".to_string();
        }
        vec![
            self.metadata.name.clone(),
            phase,
            yes_no(self.status.ready),
            self.spec.kubernetes_version.clone(),
            self.spec.talos_version.clone().unwrap_or_else(|| "-".into()),
            self.spec.node_groups.as_ref().map_or(0, Vec::len).to_string(),
            age(self.metadata.created_at, now),
        ]
    }
}

impl Row for NodeGroup {
    const KIND: &'static str = "nodegroup";
    const HEADERS: &'static [&'static str] =
        &["NAME", "ROLE", "COUNT", "AUTOSCALING", "READY", "PROVIDER", "AGE"];
    fn name(&self) -> String {
        self.metadata.name.clone()
    }
    fn cells(&self, now: DateTime<Utc>) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            self.spec.role.as_str().to_string(),
            self.spec.count.to_string(),
            self.spec
                .autoscaling
                .map_or_else(String::new, |range| format!("{}-{}", range.min_count, range.max_count)),
            format!("{}/{}", self.status.ready_replicas, self.status.replicas),
            self.spec.provider_class.clone(),
            age(self.metadata.created_at, now),
        ]
    }
}

impl Row for ConfigPatch {
    const KIND: &'static str = "configpatch";
    const HEADERS: &'static [&'static str] = &["NAME", "FORMAT", "TARGET", "ENABLED", "PATCHES", "AGE"];
    fn name(&self) -> String {
        self.metadata.name.clone()
    }
    fn cells(&self, now: DateTime<Utc>) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            word(&self.spec.format),
            word(&self.spec.target),
            yes_no(self.spec.enabled),
            self.spec.patches.len().to_string(),
            age(self.metadata.created_at, now),
        ]
    }
}

impl Row for Machine {
    const KIND: &'static str = "machine";
    const HEADERS: &'static [&'static str] = &["NAME", "GROUP", "ROLE", "STAGE", "READY", "ADDRESS", "AGE"];
    fn name(&self) -> String {
        self.metadata.name.clone()
    }
    fn cells(&self, now: DateTime<Utc>) -> Vec<String> {
        let dash = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
        vec![
            self.metadata.name.clone(),
            dash(&self.spec.node_group),
            self.status.role.map_or_else(|| "-".into(), |role| role.as_str().to_string()),
            if self.status.stage.is_empty() { "-".into() } else { self.status.stage.clone() },
            yes_no(self.status.ready),
            dash(&self.spec.management_address),
            age(self.metadata.created_at, now),
        ]
    }
}

impl Row for Projected {
    const KIND: &'static str = "projected";
    const HEADERS: &'static [&'static str] = &["TENANT", "KIND", "TYPE", "NAME"];
    fn name(&self) -> String {
        format!("{}/{}", self.tf_type, self.name)
    }
    fn cells(&self, _now: DateTime<Utc>) -> Vec<String> {
        vec![self.tenant.clone(), self.kind.clone(), self.tf_type.clone(), self.name.clone()]
    }
}

impl Row for User {
    const KIND: &'static str = "user";
    const HEADERS: &'static [&'static str] = &["NAME", "ROLE", "AGE"];
    fn name(&self) -> String {
        self.metadata.name.clone()
    }
    fn cells(&self, now: DateTime<Utc>) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            UserRole::global_name(self.spec.role).to_string(),
            age(self.metadata.created_at, now),
        ]
    }
}

impl Row for Grant {
    const KIND: &'static str = "grant";
    const HEADERS: &'static [&'static str] = &["NAME", "ROLE", "SUBJECTS", "TENANTS", "AGE"];
    fn name(&self) -> String {
        self.metadata.name.clone()
    }
    fn cells(&self, now: DateTime<Utc>) -> Vec<String> {
        let subjects: Vec<String> = self
            .spec
            .subjects
            .iter()
            .map(|subject| format!("{}:{}", subject.kind.as_str(), subject.name))
            .collect();
        let tenants = &self.spec.tenants;
        let mut chosen: Vec<String> = tenants.names.clone();
        if let Some(selector) = &tenants.selector {
            chosen.push(format!("selector({selector})"));
        }
        vec![
            self.metadata.name.clone(),
            self.spec.role.as_str().to_string(),
            subjects.join(","),
            chosen.join(","),
            age(self.metadata.created_at, now),
        ]
    }
}

impl Row for ApiToken {
    const KIND: &'static str = "token";
    const HEADERS: &'static [&'static str] = &["NAME", "EXPIRES", "LAST USED", "AGE"];
    fn name(&self) -> String {
        self.metadata.name.clone()
    }
    fn cells(&self, now: DateTime<Utc>) -> Vec<String> {
        let expires = match self.status.expires_at {
            Some(at) if at <= now => "expired".to_string(),
            Some(at) => format!("in {}", span(at - now)),
            None => "-".to_string(),
        };
        let used = self
            .status
            .last_used_at
            .map_or_else(|| "never".to_string(), |at| format!("{} ago", span(now - at)));
        vec![self.metadata.name.clone(), expires, used, age(self.metadata.created_at, now)]
    }
}

impl Row for Backup {
    const KIND: &'static str = "backup";
    const HEADERS: &'static [&'static str] = &["ID", "TIME", "AGE", "SIZE", "MACHINE", "TALOS", "ETCD"];
    fn name(&self) -> String {
        self.id.clone()
    }
    fn cells(&self, now: DateTime<Utc>) -> Vec<String> {
        let dash = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
        vec![
            self.id.clone(),
            self.time.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            span(now - self.time),
            indicatif::BinaryBytes(self.size).to_string(),
            self.machine.clone(),
            dash(&self.talos_version),
            dash(&self.etcd_version),
        ]
    }
}

fn yes_no(value: bool) -> String {
    if value { "true" } else { "false" }.to_string()
}

/// A unit enum's wire name, such as `jsonpatch`.
fn word<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// The age of an object, as kubectl shows it.
pub(crate) fn age(created: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    created.map_or_else(|| "<unknown>".to_string(), |at| span(now - at))
}

/// A duration in its two largest units: `45s`, `3m12s`, `5h4m`, `12d`, `3y20d`.
pub(crate) fn span(duration: chrono::TimeDelta) -> String {
    let seconds = duration.num_seconds().max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    match seconds {
        0..120 => format!("{seconds}s"),
        120..600 => format!("{minutes}m{}s", seconds % 60),
        600..10_800 => format!("{minutes}m"),
        10_800..28_800 => format!("{hours}h{}m", minutes % 60),
        28_800..172_800 => format!("{hours}h"),
        172_800..691_200 => format!("{days}d{}h", hours % 24),
        691_200..31_536_000 => format!("{days}d"),
        _ => format!("{}y{}d", days / 365, days % 365),
    }
}
