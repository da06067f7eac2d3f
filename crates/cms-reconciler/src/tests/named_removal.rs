//! Named scale-downs: a group's `removedMachines` leave it, in place of its
//! highest indexes.

use std::sync::{Arc, Mutex};

use cms_model::Tenant;
use cms_store::{Draft, Key};
use cms_tenancy::{Bootstrapped, MockNodeClient, NodeClient};
use serde_json::{Value, json};

use super::{fixture, hosts, machines, tenant};
use crate::reconcile;

fn spec(workers: u32, removed: &[&str]) -> Value {
    json!({"kubernetesVersion": "1.31.1", "nodeGroups": [
        {"name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(1, 0)}},
        {"name": "workers", "role": "worker", "count": workers, "providerClass": "metal:bare",
         "providerConfig": {"hosts": hosts(3, 1)}, "removedMachines": removed},
    ]})
}

#[tokio::test]
async fn the_plan_skips_removed_machines_and_keeps_each_host_on_its_index() {
    let tenant: Tenant =
        serde_json::from_value(json!({"metadata": {"name": "acme"}, "spec": spec(2, &["workers-1"])}))
            .unwrap();
    let plan = crate::desired(&tenant, None, &Default::default(), false).await.unwrap();
    let workers: Vec<_> = plan.machines.iter().filter(|m| m.group == "workers").collect();
    let ids: Vec<_> = workers.iter().map(|m| (m.id.as_str(), m.index)).collect();
    assert_eq!(ids, [("workers-0", 0), ("workers-2", 2)]);
    let addresses: Vec<_> = workers.iter().map(|m| m.host.as_ref().unwrap().address.as_str()).collect();
    assert_eq!(addresses, ["10.0.1.1", "10.0.1.3"], "workers-2 takes hosts[2]");

    // A spec whose machines pass its hosts is refused rather than planned short.
    let short = json!({"kubernetesVersion": "1.31.1", "nodeGroups": [
        {"name": "workers", "role": "worker", "count": 2, "providerClass": "metal:bare",
         "providerConfig": {"hosts": hosts(2, 1)}, "removedMachines": ["workers-0"]},
    ]});
    let tenant: Tenant =
        serde_json::from_value(json!({"metadata": {"name": "acme"}, "spec": short})).unwrap();
    let err = crate::desired(&tenant, None, &Default::default(), false).await.unwrap_err();
    assert!(err.to_string().contains("needs 3 metal hosts"), "{err}");
}

#[tokio::test]
async fn a_named_scale_down_drains_and_resets_the_named_machine_not_the_highest() {
    let resets = Arc::new(Mutex::new(Vec::new()));
    let mut nodes = MockNodeClient::new();
    nodes.expect_apply_config().returning(|_, _, _| Ok(()));
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().returning(|_| Ok(Bootstrapped::Now));
    let recorded = resets.clone();
    nodes.expect_reset().returning(move |node, graceful| {
        recorded.lock().unwrap().push((node.machine.clone(), graceful));
        Ok(())
    });
    let nodes: Arc<dyn NodeClient> = Arc::new(nodes);
    let f = fixture(nodes).await;
    f.store.create(Key::tenant("acme"), Draft { spec: spec(3, &[]), ..Draft::default() }).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(tenant(f.store.as_ref(), "acme").status.ready);

    let current = f.store.get(&Key::tenant("acme")).unwrap();
    let annotations = current.parse::<Tenant>().unwrap().metadata.annotations;
    let draft = Draft { spec: spec(2, &["workers-1"]), annotations, ..Draft::default() };
    f.store.update(Key::tenant("acme"), draft, current.resource_version).await.unwrap();
    for _ in 0..3 {
        reconcile("acme", &f.ctx).await.unwrap();
    }

    assert_eq!(*f.kube.calls.lock().unwrap(), ["cordon node-workers-1", "delete node-workers-1"]);
    assert_eq!(*resets.lock().unwrap(), [("workers-1".to_string(), true)]);
    let mut left: Vec<_> = machines(f.store.as_ref(), "acme").into_iter().map(|m| m.metadata.name).collect();
    left.sort();
    assert_eq!(left, ["cp-0", "workers-0", "workers-2"]);
    assert!(tenant(f.store.as_ref(), "acme").status.ready);
}
