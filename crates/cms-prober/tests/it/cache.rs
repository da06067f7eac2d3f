//! The cache, single flight and the all-tenants sweep.

use std::time::Duration;

use cms_fake_node::{FakeNode, FakeNodeOptions};
use cms_prober::{NO_CREDENTIALS, NO_REACHABLE_MACHINES};

use crate::{World, fake};

#[tokio::test]
async fn results_are_cached_for_15_seconds() {
    let world = World::new().await;
    let bundle = world.tenant("demo").await;
    let node = fake(&bundle, "v1.14.0").await;
    world.machine("demo", "cp-1", "controlplane", Some(node.addr().to_string())).await;
    let prober = world.prober();
    let first = prober.tenant("demo").await.unwrap();
    assert_eq!(node.calls().len(), 1);

    world.clock.advance(Duration::from_secs(14));
    node.set_version("v1.14.1");
    let cached = prober.tenant("demo").await.unwrap();
    assert_eq!(cached, first, "served from the cache");
    assert_eq!(node.calls().len(), 1, "the fake was not asked again");

    world.clock.advance(Duration::from_secs(1));
    let fresh = prober.tenant("demo").await.unwrap();
    assert_eq!(node.calls().len(), 2);
    assert_eq!(fresh.talos_version.as_deref(), Some("1.14.1"));
    assert_ne!(fresh.probed_at, first.probed_at);
}

#[tokio::test]
async fn probe_now_skips_the_cache_and_last_reads_it() {
    let world = World::new().await;
    let bundle = world.tenant("demo").await;
    let node = fake(&bundle, "v1.14.0").await;
    world.machine("demo", "cp-1", "controlplane", Some(node.addr().to_string())).await;
    let prober = world.prober();
    assert_eq!(prober.last("demo"), None, "nothing probed yet");
    let first = prober.tenant("demo").await.unwrap();
    assert_eq!(prober.last("demo"), Some(first.clone()));

    node.set_version("v1.14.1");
    let fresh = prober.probe_now("demo").await.unwrap();
    assert_eq!(node.calls().len(), 2, "asked again within the cache lifetime");
    assert_eq!(fresh.talos_version.as_deref(), Some("1.14.1"));
    assert_eq!(prober.tenant("demo").await.unwrap(), fresh, "the new result is cached");
    assert_eq!(node.calls().len(), 2);
    assert!(prober.probe_now("gone").await.is_err(), "an unknown tenant is refused");
}

#[tokio::test]
async fn concurrent_requests_share_one_probe() {
    let world = World::new().await;
    let bundle = world.tenant("demo").await;
    let node =
        FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).latency(Duration::from_millis(500)))
            .await
            .unwrap();
    world.machine("demo", "cp-1", "controlplane", Some(node.addr().to_string())).await;
    let prober = world.prober();
    let requests = (0..100).map(|_| prober.tenant("demo"));
    let results = futures_util::future::join_all(requests).await;
    assert_eq!(node.calls().len(), 1, "100 requests, one probe");
    let first = results[0].as_ref().unwrap();
    assert!(first.reachable);
    assert!(results.iter().all(|result| result.as_ref().unwrap() == first));
}

#[tokio::test]
async fn the_sweep_covers_every_tenant_in_name_order() {
    let world = World::new().await;
    let bundle = world.tenant("b-up").await;
    let node = fake(&bundle, "v1.12.3").await;
    world.machine("b-up", "cp-1", "controlplane", Some(node.addr().to_string())).await;
    world.tenant_without_credentials("a-bare").await;
    world.tenant("c-empty").await;
    let all = world.prober().all().await;
    let names: Vec<&str> = all.iter().map(|health| health.tenant.as_str()).collect();
    assert_eq!(names, ["a-bare", "b-up", "c-empty"]);
    assert_eq!(all[0].error.as_deref(), Some(NO_CREDENTIALS));
    assert_eq!(all[1].talos_version.as_deref(), Some("1.12.3"));
    assert_eq!(all[2].error.as_deref(), Some(NO_REACHABLE_MACHINES));
}
