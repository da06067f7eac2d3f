//! `cms apply -f FILE`: create or update every document of a YAML or JSON file.
//!
//! Each document is a resource as the API shows it, plus `kind` (`Tenant`,
//! `NodeGroup`, `ConfigPatch` or `Grant`) and, for the kinds that live in a tenant,
//! `tenant` (else `--tenant`). Documents are checked against the shared
//! cms-model types before anything is sent, then applied in order: created
//! when missing, otherwise updated with the current `resourceVersion`.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use cms_model::{ConfigPatch, Grant, NodeGroup, Tenant};
use reqwest::Method;
use serde_json::{Map, Value};

use crate::cli::{ApplyArgs, Output};
use crate::client::Client;
use crate::failure::ApiError;
use crate::kinds::ResourceKind;
use crate::output::{encode, out};

/// One document, split into its address and its resource body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Document {
    pub(crate) kind: ResourceKind,
    pub(crate) tenant: Option<String>,
    pub(crate) name: String,
    pub(crate) body: Value,
}

/// Reads the documents of a YAML stream (JSON is YAML too); an array at the
/// top level holds several documents.
pub(crate) fn parse_documents(text: &str, default_tenant: Option<&str>) -> Result<Vec<Document>> {
    let values: Vec<Value> = serde_saphyr::from_multiple(text).context("reading YAML or JSON")?;
    let values = values.into_iter().flat_map(|value| match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        other => vec![other],
    });
    values
        .enumerate()
        .map(|(index, value)| {
            document(value, default_tenant).with_context(|| format!("document {}", index + 1))
        })
        .collect()
}

fn document(value: Value, default_tenant: Option<&str>) -> Result<Document> {
    let Value::Object(mut object) = value else { return Err(anyhow!("a document must be an object")) };
    let kind_name = take_string(&mut object, "kind")?.ok_or_else(|| anyhow!("`kind` is missing"))?;
    let kind = ResourceKind::from_document_kind(&kind_name)
        .filter(|kind| {
            matches!(
                kind,
                ResourceKind::Tenants
                    | ResourceKind::Nodegroups
                    | ResourceKind::Configpatches
                    | ResourceKind::Grants
            )
        })
        .ok_or_else(|| {
            anyhow!("kind {kind_name:?} cannot be applied: use Tenant, NodeGroup, ConfigPatch or Grant")
        })?;
    let tenant = take_string(&mut object, "tenant")?.or_else(|| default_tenant.map(str::to_string));
    let body = Value::Object(object);
    let bytes = serde_json::to_vec(&body)?;
    // Checked with the server's own types, so a typo is caught before sending.
    let name = match kind {
        ResourceKind::Tenants => cms_model::parse_json::<Tenant>(&bytes)?.metadata.name,
        ResourceKind::Grants => cms_model::parse_json::<Grant>(&bytes)?.metadata.name,
        ResourceKind::Nodegroups => cms_model::parse_json::<NodeGroup>(&bytes)?.metadata.name,
        _ => cms_model::parse_json::<ConfigPatch>(&bytes)?.metadata.name,
    };
    let tenant = match (kind, tenant) {
        (ResourceKind::Tenants | ResourceKind::Grants, _) => None,
        (_, Some(tenant)) => Some(tenant),
        (_, None) => {
            return Err(anyhow!(
                "{}/{name} names no tenant: add `tenant:` or pass --tenant",
                kind.singular()
            ));
        }
    };
    Ok(Document { kind, tenant, name, body })
}

fn take_string(object: &mut Map<String, Value>, key: &str) -> Result<Option<String>> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(anyhow!("`{key}` must be a string")),
    }
}

/// Reads a file, or standard input for `-`.
pub(crate) fn read_input(path: &Path) -> Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("reading standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// `cms apply`.
pub(crate) fn apply(client: &Client, args: &ApplyArgs, format: Output) -> Result<()> {
    let text = read_input(&args.file)?;
    let documents = parse_documents(&text, args.tenant.as_deref())
        .with_context(|| format!("in {}", args.file.display()))?;
    for document in &documents {
        let id = format!("{}/{}", document.kind.singular(), document.name);
        let (verb, object) = apply_one(client, document).with_context(|| format!("applying {id}"))?;
        match format {
            Output::Json | Output::Yaml => out(&encode(&object, format)?)?,
            Output::Name => out(&format!("{id}\n"))?,
            Output::Table => out(&format!("{id} {verb}\n"))?,
        }
    }
    Ok(())
}

/// Creates the object, or updates it with the current resourceVersion.
fn apply_one(client: &Client, document: &Document) -> Result<(&'static str, Value)> {
    let tenant = document.tenant.as_deref();
    let item = document.kind.item(tenant, &document.name)?;
    let current = match client.get::<Value>(&item) {
        Ok(current) => Some(current),
        Err(err) if is_not_found(&err) => None,
        Err(err) => return Err(err),
    };
    let Some(current) = current else {
        let created = client.write(Method::POST, &document.kind.collection(tenant)?, &document.body)?;
        return Ok(("created", created));
    };
    let mut body = document.body.clone();
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let updated: Value = client.write(Method::PUT, &item, &body)?;
    let changed = updated["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"];
    Ok((if changed { "configured" } else { "unchanged" }, updated))
}

/// Whether the failure is the server's 404.
pub(crate) fn is_not_found(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.downcast_ref::<ApiError>().is_some_and(|api| api.status == 404))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "\
kind: Tenant
metadata: {name: demo}
spec: {kubernetesVersion: 1.31.1}
---
kind: ConfigPatch
tenant: demo
metadata: {name: sysctls}
spec: {format: strategic, patches: [{machine: {sysctls: {a: '1'}}}]}
---
kind: NodeGroup
metadata: {name: workers}
spec: {role: worker, count: 2, providerClass: 'metal:bare'}
";

    #[test]
    fn documents_carry_kind_and_tenant() {
        let documents = parse_documents(STREAM, Some("fallback")).unwrap();
        let ids: Vec<_> = documents.iter().map(|d| (d.kind, d.tenant.as_deref(), d.name.as_str())).collect();
        assert_eq!(
            ids,
            [
                (ResourceKind::Tenants, None, "demo"),
                (ResourceKind::Configpatches, Some("demo"), "sysctls"),
                (ResourceKind::Nodegroups, Some("fallback"), "workers"),
            ]
        );
        assert!(documents[0].body.get("kind").is_none());
    }

    #[test]
    fn json_arrays_and_bad_documents() {
        let json = r#"[{"kind":"Tenant","metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.1"}}]"#;
        assert_eq!(parse_documents(json, None).unwrap().len(), 1);
        let error = |text: &str| format!("{:#}", parse_documents(text, None).unwrap_err());
        assert!(error("metadata: {name: a}").contains("`kind` is missing"));
        assert!(error("kind: Machine\nmetadata: {name: a}").contains("cannot be applied"));
        let grant = "kind: Grant\nmetadata: {name: a-devs}\nspec: {role: edit, subjects: [{kind: Group, name: a-devs}], tenants: {selector: team=a}}";
        let documents = parse_documents(grant, Some("ignored")).unwrap();
        assert_eq!((documents[0].kind, documents[0].tenant.as_deref()), (ResourceKind::Grants, None));
        assert!(error("kind: Grant\nmetadata: {name: g}\nspec: {role: edit, subject: []}").contains("spec"));
        let typo = error("kind: Tenant\nmetadata: {name: a}\nspec: {kubernetesVersion: 1.31.1, cout: 1}");
        assert!(typo.contains("spec"), "{typo}");
        assert!(error("kind: NodeGroup\nmetadata: {name: w}\nspec: {role: worker, count: 1, providerClass: 'metal:x'}").contains("names no tenant"));
    }
}
