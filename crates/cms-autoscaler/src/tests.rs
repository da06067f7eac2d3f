//! The backend against a real store, with the tenant's Kubernetes API
//! mocked: who may see what, and each scaling call's limits and effects.

use std::sync::Arc;

use cms_model::{Kind, NodeGroup};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_tenancy::{KubeNode, MockKubeClient, Secrets, SecretsOptions, Tenancy};
use serde_json::{Value, json};

use crate::error::AutoscalerError;
use crate::groups::{Backend, NodeName, State};
use crate::identity::Identity;

struct Fixture {
    backend: Backend,
    store: Arc<dyn Store>,
    acme: Identity,
    _dir: tempfile::TempDir,
}

fn group(name: &str, role: &str, count: u32, autoscaling: Value, removed: Value) -> Value {
    json!({"name": name, "role": role, "count": count, "providerClass": "metal:bare",
        "providerConfig": {"hosts": (1..=6).map(|i| json!({"address": format!("10.0.{}.{i}", count)})).collect::<Vec<_>>()},
        "autoscaling": autoscaling, "removedMachines": removed})
}

/// Tenant `acme`: control planes `cp` (1), workers `w` (`count`, within
/// 1..=4, `removed` left out) and `plain` workers without limits; its
/// machines `(id, group, ready, provider id)`; its Nodes as `kube` lists them.
async fn fixture(
    count: u32,
    removed: Value,
    machines: &[(&str, &str, bool)],
    nodes: Vec<KubeNode>,
) -> Fixture {
    let mut kube = MockKubeClient::new();
    kube.expect_nodes().returning(move |_| Ok(nodes.clone()));
    fixture_with(count, removed, machines, kube).await
}

/// [`fixture`] with the tenant's Kubernetes API as `kube` answers.
async fn fixture_with(
    count: u32,
    removed: Value,
    machines: &[(&str, &str, bool)],
    kube: MockKubeClient,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    let store: Arc<dyn Store> = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
    let groups = json!([
        group("cp", "controlplane", 1, Value::Null, json!([])),
        group("w", "worker", count, json!({"minCount": 1, "maxCount": 4}), removed),
        group("plain", "worker", 1, Value::Null, json!([])),
    ]);
    let spec = json!({"kubernetesVersion": "1.32.0", "nodeGroups": groups});
    let tenant = store.create(Key::tenant("acme"), Draft { spec, ..Draft::default() }).await.unwrap();
    let tenant: cms_model::Tenant = tenant.parse().unwrap();
    for (index, (id, group, ready)) in machines.iter().enumerate() {
        let spec = json!({"managementAddress": format!("10.1.0.{index}:50000"), "nodeGroup": group,
            "providerId": format!("metal://10.1.0.{index}")});
        let status = json!({"stage": if *ready { "ready" } else { "provisioning" }, "ready": ready});
        let draft = Draft { spec, status: Some(status), ..Draft::default() };
        store.create(Key::child(Kind::Machine, "acme", *id), draft).await.unwrap();
    }
    let sealer = cms_talos::Sealer::new(cms_talos::SealingKey::generate("test").unwrap());
    let secrets = Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() }).unwrap();
    let backend = Backend::new(Tenancy::new(store.clone(), secrets), Arc::new(kube));
    let acme = Identity {
        tenant: "acme".into(),
        created_ms: tenant.metadata.created_at.unwrap().timestamp_millis(),
    };
    Fixture { backend, store, acme, _dir: dir }
}

fn stored(fixture: &Fixture, name: &str) -> NodeGroup {
    fixture.store.get(&Key::child(Kind::NodeGroup, "acme", name)).unwrap().parse().unwrap()
}

fn named(name: &str) -> NodeName {
    NodeName { name: name.into(), ..NodeName::default() }
}

fn kube_node(name: &str, ip: &str) -> KubeNode {
    KubeNode { name: name.into(), addresses: vec![ip.into()], ready: true, ..KubeNode::default() }
}

#[tokio::test]
async fn a_certificate_speaks_only_for_the_tenant_it_was_issued_to() {
    let fixture = fixture(2, json!([]), &[], vec![]).await;
    assert_eq!(fixture.backend.groups(&fixture.acme).unwrap().len(), 1);
    let earlier = Identity { created_ms: fixture.acme.created_ms - 1, ..fixture.acme.clone() };
    let stranger = Identity { tenant: "nobody".into(), created_ms: 0 };
    for identity in [earlier, stranger] {
        let err = fixture.backend.groups(&identity).unwrap_err();
        assert!(matches!(err, AutoscalerError::Unauthenticated(_)), "{identity:?}: {err:?}");
    }
}

#[tokio::test]
async fn only_worker_groups_with_limits_are_offered() {
    let fixture = fixture(2, json!([]), &[], vec![]).await;
    let names: Vec<String> =
        fixture.backend.groups(&fixture.acme).unwrap().into_iter().map(|g| g.metadata.name).collect();
    assert_eq!(names, ["w"]);
    for id in ["plain", "cp", "nope"] {
        let err = fixture.backend.group(&fixture.acme, id).unwrap_err();
        assert_eq!(err.to_string(), format!("no autoscaled node group {id:?}"));
    }
}

#[tokio::test]
async fn growth_stays_within_max_and_uses_the_ids_of_machines_gone_again() {
    // w-0 was removed by name and still leaves; w-1 was removed and has gone.
    let machines = [("w-0", "w", true), ("w-2", "w", true), ("w-3", "w", true)];
    let fixture = fixture(2, json!(["w-0", "w-1"]), &machines, vec![]).await;
    assert_eq!(stored(&fixture, "w").spec.machine_ids(), ["w-2", "w-3"]);
    fixture.backend.increase(&fixture.acme, "w", 1).await.unwrap();
    let group = stored(&fixture, "w");
    assert_eq!(group.spec.count, 3);
    assert_eq!(group.spec.removed_machines, ["w-0"], "the gone machine's id is free again");
    assert_eq!(group.spec.machine_ids(), ["w-1", "w-2", "w-3"]);
    let err = fixture.backend.increase(&fixture.acme, "w", 2).await.unwrap_err();
    assert_eq!(err.to_string(), "node group \"w\" cannot grow to 5: its maxCount is 4");
    assert_eq!(stored(&fixture, "w").spec.count, 3, "a refusal changes nothing");
    for delta in [0, -1] {
        assert!(matches!(
            fixture.backend.increase(&fixture.acme, "w", delta).await,
            Err(AutoscalerError::Invalid(_))
        ));
    }
}

#[tokio::test]
async fn deletes_take_the_named_machines_and_keep_the_minimum() {
    let machines = [("cp-0", "cp", true), ("w-0", "w", true), ("w-1", "w", true), ("w-2", "w", true)];
    // The Node of w-1 is found by its address; w-2 by its provider id.
    let fixture = fixture(3, json!([]), &machines, vec![kube_node("talos-x", "10.1.0.2")]).await;
    fixture.backend.delete_nodes(&fixture.acme, "w", &[named("talos-x")]).await.unwrap();
    let group = stored(&fixture, "w");
    assert_eq!((group.spec.count, group.spec.removed_machines.clone()), (2, vec!["w-1".to_string()]));
    assert_eq!(group.spec.machine_ids(), ["w-0", "w-2"], "the named one leaves, not the newest");
    let by_id = NodeName { provider_id: "metal://10.1.0.3".into(), ..NodeName::default() };
    fixture.backend.delete_nodes(&fixture.acme, "w", &[by_id]).await.unwrap();
    assert_eq!(stored(&fixture, "w").spec.machine_ids(), ["w-0"]);
    let err = fixture.backend.delete_nodes(&fixture.acme, "w", &[named("w-0")]).await.unwrap_err();
    assert_eq!(err.to_string(), "node group \"w\" cannot shrink to 0: its minCount is 1");
    for other in ["cp-0", "unknown"] {
        let err = fixture.backend.delete_nodes(&fixture.acme, "w", &[named(other)]).await.unwrap_err();
        assert_eq!(err.to_string(), format!("node {other:?} does not belong to node group \"w\""));
    }
    let err = fixture.backend.delete_nodes(&fixture.acme, "w", &[named("w-1")]).await.unwrap_err();
    assert!(err.to_string().contains("already being removed"), "{err}");
}

#[tokio::test]
async fn a_decrease_drops_only_machines_that_have_not_joined() {
    // w-1 is being made and has no Node; w-0 and w-2 run.
    let machines = [("w-0", "w", true), ("w-1", "w", false), ("w-2", "w", true)];
    let fixture = fixture(3, json!([]), &machines, vec![]).await;
    fixture.backend.decrease_target(&fixture.acme, "w", -1).await.unwrap();
    let group = stored(&fixture, "w");
    assert_eq!(group.spec.count, 2);
    assert_eq!(group.spec.machine_ids(), ["w-0", "w-2"], "the one that has not joined goes, not the newest");
    let err = fixture.backend.decrease_target(&fixture.acme, "w", -1).await.unwrap_err();
    assert!(err.to_string().contains("only 0 of node group \"w\"'s machines have not joined"), "{err}");
    assert!(matches!(
        fixture.backend.decrease_target(&fixture.acme, "w", 1).await,
        Err(AutoscalerError::Invalid(_))
    ));
}

#[tokio::test]
async fn a_machine_whose_node_registered_is_never_dropped_unnamed() {
    // w-1 is not ready, but its Node has registered: it exists.
    let machines = [("w-0", "w", true), ("w-1", "w", false)];
    let fixture = fixture(2, json!([]), &machines, vec![kube_node("talos-w-1", "10.1.0.1")]).await;
    let err = fixture.backend.decrease_target(&fixture.acme, "w", -1).await.unwrap_err();
    assert!(err.to_string().contains("attempt to delete existing nodes"), "{err}");
    assert_eq!(stored(&fixture, "w").spec.count, 2);
}

#[tokio::test]
async fn an_instance_not_made_yet_is_deleted_by_the_id_it_was_given() {
    let machines = [("w-0", "w", true), ("w-1", "w", true)];
    let fixture = fixture(3, json!([]), &machines, vec![]).await;
    let placeholder = NodeName { provider_id: "cms://acme/w-2".into(), ..NodeName::default() };
    fixture.backend.delete_nodes(&fixture.acme, "w", &[placeholder]).await.unwrap();
    let group = stored(&fixture, "w");
    assert_eq!((group.spec.count, group.spec.machine_ids()), (2, vec!["w-0".to_string(), "w-1".to_string()]));
    let other = NodeName { provider_id: "cms://other/w-0".into(), ..NodeName::default() };
    let err = fixture.backend.delete_nodes(&fixture.acme, "w", &[other]).await.unwrap_err();
    assert!(matches!(err, AutoscalerError::NotFound(_)), "another tenant's id is no instance: {err:?}");
}

#[tokio::test]
async fn a_stale_certificate_learns_nothing_from_a_delete() {
    let machines = [("w-0", "w", true)];
    let mut kube = MockKubeClient::new();
    kube.expect_nodes().never();
    let fixture = fixture_with(2, json!([]), &machines, kube).await;
    let earlier = Identity { created_ms: fixture.acme.created_ms - 1, ..fixture.acme.clone() };
    for name in ["talos-w-0", "nope"] {
        let err = fixture.backend.delete_nodes(&earlier, "w", &[named(name)]).await.unwrap_err();
        assert!(matches!(err, AutoscalerError::Unauthenticated(_)), "{name}: {err:?}");
    }
}

#[tokio::test]
async fn ids_still_leaving_stay_removed_and_ids_of_gone_machines_are_freed_by_any_write() {
    // w-2 was removed by name and still leaves; w-1 was removed and has gone.
    let machines = [("w-0", "w", true), ("w-2", "w", true), ("w-3", "w", true)];
    let fixture = fixture(2, json!(["w-1", "w-2"]), &machines, vec![]).await;
    assert_eq!(stored(&fixture, "w").spec.machine_ids(), ["w-0", "w-3"]);
    let w3 = NodeName { provider_id: "metal://10.1.0.2".into(), ..NodeName::default() };
    fixture.backend.delete_nodes(&fixture.acme, "w", &[w3]).await.unwrap();
    let group = stored(&fixture, "w");
    assert_eq!(group.spec.removed_machines, ["w-2", "w-3"], "w-1 is free again; w-2 and w-3 stay removed");
    assert_eq!(group.spec.machine_ids(), ["w-0"]);
}

#[tokio::test]
async fn instances_say_what_each_machine_does() {
    // w-0 runs (its Node has a provider id of its own), w-1 is being made,
    // w-2 has no machine yet, w-3 was removed and leaves.
    let machines = [("w-0", "w", true), ("w-1", "w", false), ("w-3", "w", true)];
    let mut node = kube_node("talos-w-0", "10.1.0.0");
    node.provider_id = Some("oci://instance-0".into());
    let fixture = fixture(3, json!(["w-3"]), &machines, vec![node]).await;
    let instances = fixture.backend.instances(&fixture.acme, "w").await.unwrap();
    let seen: Vec<(&str, State)> = instances.iter().map(|i| (i.id.as_str(), i.state)).collect();
    assert_eq!(
        seen,
        [
            ("oci://instance-0", State::Running),
            ("metal://10.1.0.1", State::Creating),
            ("cms://acme/w-2", State::Creating),
            ("metal://10.1.0.2", State::Deleting),
        ]
    );
}

#[tokio::test]
async fn a_refresh_gives_the_groups_nodes_their_provider_ids() {
    let machines = [("cp-0", "cp", true), ("w-0", "w", true), ("w-1", "w", true)];
    let mut carried = kube_node("talos-w-1", "10.1.0.2");
    carried.provider_id = Some("metal://10.1.0.2".into());
    let nodes = vec![kube_node("talos-cp-0", "10.1.0.0"), kube_node("talos-w-0", "10.1.0.1"), carried];
    let mut kube = MockKubeClient::new();
    let listed = nodes.clone();
    kube.expect_nodes().returning(move |_| Ok(listed.clone()));
    // Only the worker without one gets one; the control plane is no
    // autoscaled group's, and w-1's Node has its own.
    kube.expect_set_provider_id()
        .withf(|tenant, node, id| (tenant, node, id) == ("acme", "talos-w-0", "metal://10.1.0.1"))
        .times(1)
        .returning(|_, _, _| Ok(()));
    let fixture = fixture_with(2, json!([]), &machines, kube).await;
    fixture.backend.refresh(&fixture.acme).await.unwrap();
}
