//! Merging a downloaded kubeconfig into an existing one.
//!
//! `clusters`, `users` and `contexts` are lists of `{name, ...}`: an entry of
//! the new file replaces the entry of the same name and the others are kept in
//! their order; `current-context` becomes the new file's. Every other key of
//! the existing file, and every field of the entries, is kept as it was.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A kubeconfig, with the keys this merge does not know carried along.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct KubeConfig {
    #[serde(rename = "apiVersion", default = "api_version")]
    api_version: String,
    #[serde(default = "config_kind")]
    kind: String,
    #[serde(default, deserialize_with = "null_is_empty")]
    clusters: Vec<Named>,
    #[serde(default, deserialize_with = "null_is_empty")]
    contexts: Vec<Named>,
    #[serde(default, deserialize_with = "null_is_empty")]
    users: Vec<Named>,
    #[serde(rename = "current-context", default, skip_serializing_if = "Option::is_none")]
    current_context: Option<String>,
    #[serde(flatten)]
    rest: BTreeMap<String, Value>,
}

/// A named entry: a cluster, a user or a context.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Named {
    name: String,
    #[serde(flatten)]
    rest: BTreeMap<String, Value>,
}

fn api_version() -> String {
    "v1".into()
}

fn config_kind() -> String {
    "Config".into()
}

fn null_is_empty<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<Named>, D::Error> {
    Ok(Option::<Vec<Named>>::deserialize(deserializer)?.unwrap_or_default())
}

/// The existing kubeconfig (empty for a new file) with `incoming` merged in.
pub(crate) fn merge(existing: &str, incoming: &str) -> Result<String> {
    let mut base: KubeConfig = if existing.trim().is_empty() {
        KubeConfig { api_version: api_version(), kind: config_kind(), ..KubeConfig::default() }
    } else {
        serde_saphyr::from_str(existing).context("reading the existing kubeconfig")?
    };
    let new: KubeConfig = serde_saphyr::from_str(incoming).context("reading the downloaded kubeconfig")?;
    upsert(&mut base.clusters, new.clusters);
    upsert(&mut base.users, new.users);
    upsert(&mut base.contexts, new.contexts);
    if new.current_context.is_some() {
        base.current_context = new.current_context;
    }
    serde_saphyr::to_string(&base).context("writing the kubeconfig")
}

fn upsert(entries: &mut Vec<Named>, incoming: Vec<Named>) {
    for entry in incoming {
        match entries.iter_mut().find(|existing| existing.name == entry.name) {
            Some(existing) => *existing = entry,
            None => entries.push(entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXISTING: &str = "\
apiVersion: v1
kind: Config
preferences: {}
clusters:
- name: other
  cluster: {server: 'https://other:6443'}
- name: demo
  cluster: {server: 'https://old:6443'}
users:
- name: other-admin
  user: {token: abc}
contexts:
- name: other
  context: {cluster: other, user: other-admin}
current-context: other
";

    const INCOMING: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: 'https://new:6443', certificate-authority-data: Q0E=}
users:
- name: admin@demo
  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}
contexts:
- name: admin@demo
  context: {cluster: demo, user: admin@demo}
current-context: admin@demo
";

    #[test]
    fn entries_merge_by_name_and_the_rest_is_kept() {
        let merged = merge(EXISTING, INCOMING).unwrap();
        let config: KubeConfig = serde_saphyr::from_str(&merged).unwrap();
        let names = |entries: &[Named]| entries.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&config.clusters), ["other", "demo"]);
        assert_eq!(names(&config.users), ["other-admin", "admin@demo"]);
        assert_eq!(names(&config.contexts), ["other", "admin@demo"]);
        assert_eq!(config.current_context.as_deref(), Some("admin@demo"));
        assert_eq!(config.clusters[1].rest["cluster"]["server"], "https://new:6443");
        assert_eq!(config.users[0].rest["user"]["token"], "abc");
        assert!(config.rest.contains_key("preferences"));
        insta::assert_snapshot!(merged);
    }

    #[test]
    fn merging_into_nothing_gives_the_download() {
        let merged = merge("", INCOMING).unwrap();
        let config: KubeConfig = serde_saphyr::from_str(&merged).unwrap();
        assert_eq!(config.clusters.len(), 1);
        assert_eq!(config.api_version, "v1");
        assert_eq!(merge(&merged, INCOMING).unwrap(), merged, "merging twice changes nothing");
    }
}
