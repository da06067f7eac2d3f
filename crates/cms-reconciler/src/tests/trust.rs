//! A configured host is never sent its config the insecure way: when the
//! tenant's way finds a node the tenant's OS CA did not sign, nothing is
//! applied, the config stays due, and the machine's `status.message` says
//! why until a pass finds the node again. A new address is a new host.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cms_store::{Draft, Key};
use cms_tenancy::{Bootstrapped, MockNodeClient, NodeError};
use serde_json::json;

use super::{create, fixture_with, machines, renderer, spec};
use crate::reconcile;

#[tokio::test]
async fn a_configured_host_that_fails_the_tenants_ca_gets_nothing_and_its_status_says_why() {
    let impostor = Arc::new(AtomicBool::new(false));
    let applied = Arc::new(Mutex::new(Vec::new()));
    let mut nodes = MockNodeClient::new();
    let (record, on) = (applied.clone(), impostor.clone());
    nodes.expect_apply_config().returning(move |node, _, configured| {
        if on.load(Ordering::SeqCst) {
            assert!(configured, "a configured host is asked the tenant's way only");
            return Err(NodeError::Untrusted { endpoint: node.management_address.clone() });
        }
        record.lock().unwrap().push((node.machine.clone(), configured));
        Ok(())
    });
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().times(1).returning(|_| Ok(Bootstrapped::Now));
    let extra = Arc::new(Mutex::new(String::new()));
    let f = fixture_with(Arc::new(nodes), renderer(extra.clone())).await;
    create(f.store.as_ref(), "acme", 1).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(applied.lock().unwrap().len(), 2, "both hosts took their first config");
    assert!(machines(f.store.as_ref(), "acme").iter().all(|m| m.status.message.is_none()));

    impostor.store(true, Ordering::SeqCst);
    *extra.lock().unwrap() = "cluster:\n  allowSchedulingOnControlPlanes: true\n".into();
    reconcile("acme", &f.ctx).await.unwrap();
    let machines_now = machines(f.store.as_ref(), "acme");
    for machine in &machines_now {
        let message = machine.status.message.as_deref().unwrap_or_default();
        assert!(message.starts_with("applying the machine config: the node's certificate at "), "{message}");
        assert!(message.ends_with("is not signed by the tenant's OS CA"), "{message}");
        assert!(machine.metadata.annotations.contains_key(crate::CONFIG_HASH_ANNOTATION), "still configured");
    }
    let before: Vec<_> = machines_now.iter().map(|m| m.metadata.annotations.clone()).collect();

    // The host is back: the changed config goes the tenant's way, the message clears.
    impostor.store(false, Ordering::SeqCst);
    reconcile("acme", &f.ctx).await.unwrap();
    let applied = applied.lock().unwrap();
    assert_eq!(applied.len(), 4);
    assert!(applied[2..].iter().all(|(_, configured)| *configured));
    let after = machines(f.store.as_ref(), "acme");
    assert!(after.iter().all(|m| m.status.message.is_none()), "{after:?}");
    assert!(after.iter().zip(&before).all(|(m, old)| m.metadata.annotations != *old), "new hashes");
}

#[tokio::test]
async fn a_machine_given_a_new_address_is_a_new_host_asked_in_maintenance_mode() {
    let applied = Arc::new(Mutex::new(Vec::new()));
    let mut nodes = MockNodeClient::new();
    let record = applied.clone();
    nodes.expect_apply_config().returning(move |node, _, configured| {
        record.lock().unwrap().push((node.management_address.clone(), configured));
        Ok(())
    });
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().times(1).returning(|_| Ok(Bootstrapped::Now));
    let f = fixture_with(Arc::new(nodes), renderer(Arc::default())).await;
    create(f.store.as_ref(), "acme", 1).await;
    reconcile("acme", &f.ctx).await.unwrap();

    let current = f.store.get(&Key::tenant("acme")).unwrap();
    let annotations = current.parse::<cms_model::Tenant>().unwrap().metadata.annotations;
    let mut spec = spec(1);
    spec["nodeGroups"][1]["providerConfig"]["hosts"] = json!([{"address": "10.0.9.1"}]);
    f.store
        .update(
            Key::tenant("acme"),
            Draft { spec, annotations, ..Draft::default() },
            current.resource_version,
        )
        .await
        .unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    let applied = applied.lock().unwrap();
    assert_eq!(applied.last(), Some(&("10.0.9.1:50000".to_string(), false)), "{applied:?}");
    let worker =
        machines(f.store.as_ref(), "acme").into_iter().find(|m| m.metadata.name == "workers-0").unwrap();
    assert!(worker.metadata.annotations.contains_key(crate::CONFIG_HASH_ANNOTATION), "configured anew");
}
