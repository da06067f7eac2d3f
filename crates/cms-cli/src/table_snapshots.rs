//! Snapshot tests of every kind's table, from the shared types, at a fixed clock.

use chrono::{DateTime, TimeDelta, Utc};
use cms_model::{ApiToken, ConfigPatch, Machine, NodeGroup, Projected, Tenant, User, parse_json};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::cli::Output;
use crate::output::render;
use crate::tables::{Row, span};
use cms_model::Backup;

fn now() -> DateTime<Utc> {
    "2026-01-10T12:00:00Z".parse().unwrap()
}

fn object<T: DeserializeOwned>(value: serde_json::Value) -> T {
    parse_json(&serde_json::to_vec(&value).unwrap()).unwrap()
}

fn table<T: Row>(items: &[T]) -> String {
    render(items, Output::Table, false, now()).unwrap()
}

#[test]
fn tenants() {
    let ready: Tenant = object(json!({
        "metadata": {"name": "production", "resourceVersion": 9, "createdAt": "2025-12-01T08:00:00Z"},
        "spec": {"kubernetesVersion": "1.31.1", "talosVersion": "1.9.0", "nodeGroups": [
            {"name": "cp", "role": "controlplane", "count": 3, "providerClass": "metal:bare"},
            {"name": "w", "role": "worker", "count": 5, "providerClass": "metal:bare"}]},
        "status": {"phase": "active", "ready": true}
    }));
    let fresh: Tenant = object(json!({
        "metadata": {"name": "demo", "createdAt": "2026-01-10T11:59:18Z"},
        "spec": {"kubernetesVersion": "1.32.0"}
    }));
    let leaving: Tenant = object(json!({
        "metadata": {"name": "old", "createdAt": "2026-01-10T06:30:00Z", "deletionTimestamp": "2026-01-10T11:00:00Z"},
        "spec": {"kubernetesVersion": "1.30.4"}, "status": {"phase": "active"}
    }));
    insta::assert_snapshot!(table(&[fresh, leaving, ready]));
}

#[test]
fn node_groups_config_patches_and_machines() {
    let group: NodeGroup = object(json!({
        "metadata": {"name": "workers", "createdAt": "2026-01-09T12:00:00Z"},
        "spec": {"role": "worker", "count": 3, "providerClass": "oci:VM.Standard.E4.Flex",
                 "autoscaling": {"minCount": 1, "maxCount": 4}},
        "status": {"replicas": 3, "readyReplicas": 2}
    }));
    let plane: NodeGroup = object(json!({
        "metadata": {"name": "cp", "createdAt": "2026-01-01T00:00:00Z"},
        "spec": {"role": "controlplane", "count": 1, "providerClass": "metal:bare"}
    }));
    insta::assert_snapshot!("node_groups", table(&[plane, group]));
    let patch: ConfigPatch = object(json!({
        "metadata": {"name": "sysctls", "createdAt": "2026-01-10T11:00:00Z"},
        "spec": {"format": "jsonpatch", "target": "worker", "patches": [{"op": "add", "path": "/a", "value": 1}]}
    }));
    insta::assert_snapshot!("config_patches", table(&[patch]));
    let machine: Machine = object(json!({
        "metadata": {"name": "demo-cp-0", "createdAt": "2026-01-10T10:00:00Z"},
        "spec": {"managementAddress": "10.0.0.5:50000", "nodeGroup": "cp", "connected": true},
        "status": {"stage": "ready", "ready": true, "role": "controlplane"}
    }));
    let pending: Machine = object(json!({"metadata": {"name": "demo-w-0"}, "spec": {}}));
    insta::assert_snapshot!("machines", table(&[machine, pending]));
}

#[test]
fn projected_users_and_tokens() {
    let projected: Projected = object(json!({
        "tenant": "demo", "kind": "Machine", "tfType": "oci_core_instance", "name": "cp-0",
        "spec": {"address": "10.0.0.5"}
    }));
    insta::assert_snapshot!("projected", table(&[projected]));
    let user: User = object(json!({
        "metadata": {"name": "alice", "createdAt": "2025-06-01T00:00:00Z"}, "spec": {"role": "edit"}
    }));
    insta::assert_snapshot!("users", table(&[user]));
    let token: ApiToken = object(json!({
        "metadata": {"name": "ci", "createdAt": "2026-01-03T12:00:00Z"}, "spec": {"expiresIn": "720h"},
        "status": {"expiresAt": "2026-02-02T12:00:00Z", "lastUsedAt": "2026-01-10T11:58:00Z"}
    }));
    insta::assert_snapshot!("tokens", table(&[token]));
}

#[test]
fn backups() {
    let old: Backup = object(json!({
        "id": "20260103t120000000z-3f9a", "tenant": "acme", "time": "2026-01-03T12:00:00.000Z",
        "size": 262_144, "sha256": "9c1e", "machine": "cp-1", "talosVersion": "1.9.0", "etcdVersion": "3.5.0"
    }));
    let fresh: Backup = object(json!({
        "id": "20260110t115930123z-07bc", "tenant": "acme", "time": "2026-01-10T11:59:30.123Z",
        "size": 1_610_612_736_u64, "sha256": "77aa", "machine": "cp-0"
    }));
    insta::assert_snapshot!("backups", table(&[old, fresh]));
    let tiny: Backup = object(json!({
        "id": "x", "tenant": "acme", "time": "2026-01-10T12:00:00Z", "size": 512, "sha256": "00", "machine": "cp-0"
    }));
    assert_eq!(render(std::slice::from_ref(&tiny), Output::Name, false, now()).unwrap(), "backup/x\n");
    let json = render(&[tiny], Output::Json, true, now()).unwrap();
    assert!(json.contains(r#""time": "2026-01-10T12:00:00Z""#), "{json}");
    assert!(!json.contains("talosVersion"), "{json}");
}

#[test]
fn names_and_spans() {
    let user: User = object(json!({"metadata": {"name": "bob"}, "spec": {"role": "view"}}));
    assert_eq!(render(&[user], Output::Name, false, now()).unwrap(), "user/bob\n");
    let spans: Vec<String> = [59, 150, 3599, 11_000, 90_000, 200_000, 2_000_000, 40_000_000]
        .into_iter()
        .map(|seconds| span(TimeDelta::seconds(seconds)))
        .collect();
    assert_eq!(spans, ["59s", "2m30s", "59m", "3h3m", "25h", "2d7h", "23d", "1y97d"]);
}
