//! Tenant operations through `cms-tenancy` alone, with no HTTP, over a real
//! store on embedded SQLite: they accept and refuse what the API does, and
//! one spec write is one watch event.

use std::time::Duration;

use cms_model::{ConfigPatch, Kind, NodeGroup, Tenant, TenantStatus, UserRole, parse_json};
use cms_store::{Key, SqlStore, StoreError, StoreOptions, WatchItem, WatchStream};
use cms_talos::{Sealer, SealingKey};
use cms_tenancy::{Secrets, SecretsOptions, Tenancy, TenancyError};
use futures_util::StreamExt;
use tempfile::TempDir;

mod installer;
mod kubernetes_versions;
mod nodes;
mod sizes;

/// A tenancy over a fresh store, and the directory that holds it.
async fn tenancy() -> (Tenancy, TempDir) {
    tenancy_with(|options| options).await
}

/// A tenancy over a fresh store opened with the options `options` makes of
/// the defaults, and the directory that holds it.
async fn tenancy_with(options: impl FnOnce(StoreOptions) -> StoreOptions) -> (Tenancy, TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    let store = SqlStore::open(&options(StoreOptions::new(url))).await.expect("the store opens");
    let sealer = Sealer::new(SealingKey::generate("test").expect("a key"));
    // Keys are made on demand: a pool's thread would compete with parallel tests.
    let secrets = Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() });
    (Tenancy::new(store, secrets.expect("secrets")), dir)
}

fn parse<T: serde::de::DeserializeOwned>(json: &str) -> T {
    parse_json(json.as_bytes()).expect("parses")
}

fn tenant(talos_version: &str, extra: &str) -> Tenant {
    parse(&format!(
        r#"{{"metadata":{{"name":"acme"}},"spec":{{"kubernetesVersion":"1.31.0","talosVersion":"{talos_version}",
            "controlPlaneEndpoint":"https://k8s.acme.example:6443"{extra}}}}}"#
    ))
}

/// The field error of a refused operation.
fn field_error(result: Result<impl std::fmt::Debug, TenancyError>) -> (String, String) {
    match result {
        Err(TenancyError::Invalid(error)) => (error.field.clone(), error.to_string()),
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[tokio::test]
async fn what_the_api_refuses_is_refused_with_the_same_field_error() {
    let (tenancy, _dir) = tenancy().await;
    // The API answers 422 with exactly this text for the same body
    // (crates/cms-service/tests/it/downloads.rs checks its start; the
    // service's tenants tests compare the two).
    let (field, message) = field_error(tenancy.create_tenant(tenant("1.7.4", "")).await);
    assert_eq!(field, "spec.talosVersion");
    assert!(message.starts_with("spec.talosVersion: \"1.7.4\" is not supported"), "{message}");
    assert!(message.contains("1.8 to 1.14"), "{message}");

    let group = r#","nodeGroups":[{"name":"w","role":"worker","count":1,"providerClass":"metal:bare","providerConfig":{"hosts":[{"address":"10.0.0.1"}]},"talosVersion":"1.6.0"}]"#;
    let (field, _) = field_error(tenancy.create_tenant(tenant("1.9.6", group)).await);
    assert_eq!(field, "spec.nodeGroups[0].talosVersion");
    let (field, _) = field_error(
        tenancy
            .create_tenant(parse(r#"{"metadata":{"name":"Bad_Name"},"spec":{"kubernetesVersion":"1.31.0"}}"#))
            .await,
    );
    assert_eq!(field, "metadata.name");
    assert!(tenancy.store().get(&Key::tenant("acme")).is_none(), "nothing refused is written");

    tenancy.create_tenant(tenant("1.9.6", "")).await.expect("a valid tenant is created");
    let empty: ConfigPatch =
        parse(r#"{"metadata":{"name":"dns"},"spec":{"format":"strategic","patches":[]}}"#);
    let (field, _) = field_error(tenancy.create_child("acme", empty).await);
    assert_eq!(field, "spec.patches");
    let group: NodeGroup = parse(
        r#"{"metadata":{"name":"w"},"spec":{"role":"worker","count":1,"providerClass":"metal:bare","providerConfig":{"hosts":[{"address":"10.0.0.1"}]},"talosVersion":"2.0.0"}}"#,
    );
    let (field, _) = field_error(tenancy.create_child("acme", group).await);
    assert_eq!(field, "spec.talosVersion");
    let (field, _) = field_error(tenancy.update_tenant(tenant("1.9.6", "")).await);
    assert_eq!(field, "metadata.resourceVersion", "a replacement names the version it read");

    match tenancy.create_tenant(tenant("1.9.6", "")).await {
        Err(TenancyError::Store(StoreError::AlreadyExists(what))) => assert_eq!(what, "tenant \"acme\""),
        other => panic!("a second create is refused: {other:?}"),
    }
    let patch: ConfigPatch = parse(
        r#"{"metadata":{"name":"dns"},"spec":{"format":"strategic","patches":[{"machine":{"network":{"hostname":"x"}}}]}}"#,
    );
    match tenancy.create_child("nobody", patch).await {
        Err(TenancyError::Store(StoreError::NotFound(_))) => {}
        other => panic!("a patch of a missing tenant is refused: {other:?}"),
    }
}

#[tokio::test]
async fn documents_are_built_from_the_sealed_bundle() {
    let (tenancy, _dir) = tenancy().await;
    tenancy.create_tenant(tenant("1.9.6", "")).await.expect("created");
    let kubeconfig =
        tenancy.kubeconfig("acme", UserRole::View, Duration::from_secs(3600)).await.expect("kubeconfig");
    assert!(kubeconfig.contains("server: https://k8s.acme.example:6443"), "{kubeconfig}");
    let talosconfig =
        tenancy.talosconfig("acme", UserRole::Admin, Duration::from_secs(3600)).await.expect("talosconfig");
    assert!(talosconfig.contains("k8s.acme.example"), "{talosconfig}");
    assert!(tenancy.secrets_yaml("acme").await.expect("the bundle").contains("secrets:"));
    match tenancy.kubeconfig("nobody", UserRole::View, Duration::from_secs(3600)).await {
        Err(TenancyError::NotFound(what)) => assert_eq!(what, "tenant \"nobody\""),
        other => panic!("a missing tenant has no kubeconfig: {other:?}"),
    }
}

/// The next tenant event of `watch`, or `None` when none comes soon.
async fn next_event(watch: &mut WatchStream) -> Option<(u64, Tenant)> {
    loop {
        match tokio::time::timeout(Duration::from_millis(300), watch.next()).await {
            Ok(Some(Ok(WatchItem::Event(event)))) => {
                return Some((event.revision, event.object.parse().expect("a tenant")));
            }
            Ok(Some(Ok(WatchItem::Synced(_)))) => continue,
            Ok(other) => panic!("the watch ended: {other:?}"),
            Err(_) => return None,
        }
    }
}

fn resolved(status: &TenantStatus) -> Option<&str> {
    let condition =
        status.conditions.iter().find(|c| c.kind == cms_model::patch_refs::CONFIG_PATCHES_RESOLVED)?;
    Some(condition.status.as_str())
}

#[tokio::test]
async fn one_spec_write_is_one_watch_event_with_its_condition_already_right() {
    let (tenancy, _dir) = tenancy().await;
    let refs = r#","configPatches":[{"name":"dns"}]"#;
    let created = tenancy.create_tenant(tenant("1.9.6", refs)).await.expect("created");
    let parsed: Tenant = created.parse().unwrap();
    assert_eq!(resolved(&parsed.status), Some("False"), "the create answers with the condition");

    let mut watch =
        tenancy.store().watch(Kind::Tenant, Some(tenancy.store().revision())).await.expect("a watch");
    let mut replacement = tenant("1.9.6", "");
    replacement.metadata.resource_version = Some(created.resource_version);
    let updated = tenancy.update_tenant(replacement).await.expect("replaced");
    let (_, seen) = next_event(&mut watch).await.expect("the replacement's event");
    assert_eq!(seen.metadata.resource_version, Some(updated.resource_version));
    assert_eq!(resolved(&seen.status), None, "no refs, no condition, in the same event");
    assert!(next_event(&mut watch).await.is_none(), "one spec write, one event");

    let mut replacement = tenant("1.9.6", refs);
    replacement.metadata.resource_version = Some(updated.resource_version);
    tenancy.update_tenant(replacement).await.expect("replaced");
    let (_, seen) = next_event(&mut watch).await.expect("the replacement's event");
    assert_eq!(resolved(&seen.status), Some("False"));
    assert!(next_event(&mut watch).await.is_none(), "one spec write, one event");

    let patch: ConfigPatch = parse(
        r#"{"metadata":{"name":"dns"},"spec":{"format":"strategic","patches":[{"machine":{"network":{"hostname":"x"}}}]}}"#,
    );
    tenancy.create_child("acme", patch).await.expect("the patch is created");
    let (_, seen) = next_event(&mut watch).await.expect("the tenant's condition changes with the patch");
    assert_eq!(resolved(&seen.status), Some("True"));
    assert!(next_event(&mut watch).await.is_none(), "one write, one tenant event");
}

#[tokio::test]
async fn a_replacement_keeps_the_service_annotations_and_cannot_change_them() {
    let (tenancy, _dir) = tenancy().await;
    let created = tenancy.create_tenant(tenant("1.9.6", "")).await.expect("created");
    // The reconciler writes its annotations through the store.
    let mut annotations = created.parse::<Tenant>().unwrap().metadata.annotations;
    annotations.insert("service.io/bootstrapped".into(), "cp-0 2026-01-01T00:00:00Z".into());
    annotations.insert("service.io/rollout-paused".into(), "1".into());
    let draft = cms_store::Draft {
        annotations,
        spec: serde_json::to_value(tenant("1.9.6", "").spec).unwrap(),
        ..Default::default()
    };
    let written = tenancy.store().update(Key::tenant("acme"), draft, created.resource_version).await.unwrap();

    let mut replacement = tenant("1.9.6", "");
    replacement.metadata.resource_version = Some(written.resource_version);
    replacement.metadata.annotations.insert("service.io/bootstrapped".into(), "cp-1 now".into());
    let (field, _) = field_error(tenancy.update_tenant(replacement.clone()).await);
    assert_eq!(field, r#"metadata.annotations["service.io/bootstrapped"]"#);

    replacement.metadata.annotations.clear();
    let replaced = tenancy.update_tenant(replacement).await.expect("replaced");
    let kept = replaced.parse::<Tenant>().unwrap().metadata.annotations;
    assert_eq!(kept.get("service.io/bootstrapped").map(String::as_str), Some("cp-0 2026-01-01T00:00:00Z"));
    assert!(!kept.contains_key("service.io/rollout-paused"), "the one a user may remove is removed");

    let mut stale = tenant("1.9.6", "");
    stale.metadata.resource_version = Some(written.resource_version);
    match tenancy.update_tenant(stale).await {
        Err(TenancyError::Store(StoreError::Conflict { .. })) => {}
        other => panic!("a stale version is a conflict: {other:?}"),
    }
    let mut forged = tenant("1.9.6", "");
    forged.metadata.name = "beta".into();
    forged.metadata.annotations.insert("service.io/applied-inputs".into(), "x".into());
    let (field, _) = field_error(tenancy.create_tenant(forged).await);
    assert_eq!(field, r#"metadata.annotations["service.io/applied-inputs"]"#);
}
