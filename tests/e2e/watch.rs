//! The tenant watch stream: the initial burst, live changes in order, resuming
//! from a revision, and the heartbeat.

use std::time::Duration;

use cms_e2e::fixtures::{TENANTS, node_group, node_groups_path, tenant, tenant_path, worker_group};
use cms_e2e::{Frame, Server, Watch};
use serde_json::json;

/// How long any one expected frame may take to arrive.
const FRAME_WAIT: Duration = Duration::from_secs(10);

/// Reads the next event and checks its type and tenant; returns the frame.
async fn expect_event(watch: &mut Watch, event_type: &str, name: &str) -> Frame {
    let frame = watch.next_event(FRAME_WAIT).await;
    assert_eq!(frame.event_type(), Some(event_type), "expected {event_type} {name}, got {frame:?}");
    assert_eq!(frame.name(), Some(name), "expected {event_type} {name}, got {frame:?}");
    assert!(frame.id.is_some(), "a live frame carries an id: {frame:?}");
    frame
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_burst_then_changes_in_order_and_resumes() {
    let server = Server::options().env("CMS_WATCH_HEARTBEAT", "1s").start().await;
    let api = server.api();
    // Created out of order: the burst is sorted by name.
    api.post(TENANTS, &tenant("tau")).await.expect(201);
    let upsilon = api.post(TENANTS, &tenant("upsilon")).await.expect(201);
    api.post(TENANTS, &tenant("phi")).await.expect(201);

    let mut watch = Watch::open(&api, "", &[]).await;
    let (burst, synced) = watch.initial_burst(FRAME_WAIT).await;
    assert_eq!(burst, ["phi", "tau", "upsilon"], "one ADDED per tenant, sorted by name");

    // Another client changes things; the watcher sees each change in order.
    api.post(TENANTS, &tenant("chi")).await.expect(201);
    let mut update = upsilon.clone();
    update["spec"]["kubernetesVersion"] = json!("1.31.2");
    api.put(&tenant_path("upsilon"), &update).await.expect(200);
    api.delete(&tenant_path("tau")).await.expect(202);
    api.post(&node_groups_path("chi"), &node_group(worker_group("workers", 1, 1))).await.expect(201);

    let added = expect_event(&mut watch, "ADDED", "chi").await;
    let modified = expect_event(&mut watch, "MODIFIED", "upsilon").await;
    assert_eq!(modified.object()["spec"]["kubernetesVersion"], "1.31.2");
    let deleting = expect_event(&mut watch, "MODIFIED", "tau").await;
    assert!(deleting.object()["metadata"]["deletionTimestamp"].is_string(), "deletion begins: {deleting:?}");
    assert_eq!(
        deleting.object()["metadata"]["finalizers"],
        json!(["service.io/machines", "service.io/secrets"])
    );
    let grown = expect_event(&mut watch, "MODIFIED", "chi").await;
    assert_eq!(
        grown.object()["spec"]["nodeGroups"][0]["name"],
        "workers",
        "a node-group change is a tenant change"
    );

    let live = [&added, &modified, &deleting, &grown];
    let ids: Vec<u64> = live.iter().map(|frame| frame.id.expect("live frames carry ids")).collect();
    assert!(ids[0] > synced, "live ids follow the snapshot's {synced}: {ids:?}");
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "ids grow in store order: {ids:?}");

    // The heartbeat is a comment, every second here.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !watch.comments.iter().any(|comment| comment == "heartbeat") {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let frame = watch.next_frame(left).await.expect("the stream stays open");
        assert!(frame.is_comment(), "no event is expected now: {frame:?}");
    }

    // Resuming from the snapshot replays the same changes, with no burst.
    let mut resumed = Watch::open(&api, &format!("&resourceVersion={synced}"), &[]).await;
    for expected in live {
        let frame = resumed.next_event(FRAME_WAIT).await;
        assert_eq!(frame.id, expected.id, "a replay keeps the ids: {frame:?}");
        assert_eq!(frame.data, expected.data, "a replay sends the same events");
    }

    // The standard Last-Event-ID header resumes too.
    let after_first = ids[0].to_string();
    let mut resumed = Watch::open(&api, "", &[("last-event-id", &after_first)]).await;
    for expected in &live[1..] {
        let frame = resumed.next_event(FRAME_WAIT).await;
        assert_eq!(frame.id, expected.id, "a replay keeps the ids: {frame:?}");
    }

    // Both old and resumed watchers see what happens next.
    api.post(TENANTS, &tenant("psi")).await.expect(201);
    expect_event(&mut watch, "ADDED", "psi").await;
    expect_event(&mut resumed, "ADDED", "psi").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_before_the_retained_log_is_410_gone() {
    let server = Server::options().env("CMS_EVENT_RETENTION", "5").start().await;
    let api = server.api();
    let mut current = api.post(TENANTS, &tenant("alpha")).await.expect(201);
    for version in 2..=20 {
        current["spec"]["kubernetesVersion"] = json!(format!("1.31.{version}"));
        current = api.put(&tenant_path("alpha"), &current).await.expect(200);
    }

    let reply = api.get(&format!("{TENANTS}?watch=true&resourceVersion=1")).await;
    let message = reply.expect_error(410, "Gone");
    assert!(!message.is_empty());

    // A fresh watch still works: the burst shows the latest state.
    let mut watch = Watch::open(&api, "", &[]).await;
    let (burst, _) = watch.initial_burst(FRAME_WAIT).await;
    assert_eq!(burst, ["alpha"]);
}

/// A watcher that stops reading is cut off once the data sent to it has
/// stayed unread for `CMS_SEND_TIMEOUT`, although nothing polls its stream
/// while its socket is full; its stream is dropped, and others go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_cut_off() {
    use tokio::io::AsyncWriteExt;

    use crate::metrics::{scrape, value};
    use crate::provisioning::eventually;
    // Zero-window probes back off from 200 ms: a few seconds at most.
    const CUT_OFF: Duration = Duration::from_secs(30);

    let server = Server::options().env("CMS_SEND_TIMEOUT", "1s").start().await;
    let api = server.api();
    let mut current = api.post(TENANTS, &tenant("stalled")).await.expect(201);
    let open = |api: cms_e2e::Api| async move { value(&scrape(&api).await, "cms_watch_streams", &[]) };

    // A watcher with a small receive window that never reads.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(server.addr()).await.unwrap();
    let token = api.token().expect("the e2e client is logged in");
    let request =
        format!("GET {TENANTS}?watch=true HTTP/1.1\r\nHost: cms\r\nAuthorization: Bearer {token}\r\n\r\n");
    stalled.write_all(request.as_bytes()).await.unwrap();
    eventually("the stalled watch to open", CUT_OFF, || async {
        (open(api.clone()).await == 1.0).then_some(())
    })
    .await;

    // A reading watcher beside it, and changes enough to shut the stalled one's window.
    let mut reader = Watch::open(&api, "", &[]).await;
    reader.initial_burst(FRAME_WAIT).await;
    for patch in 0..64 {
        current["spec"]["kubernetesVersion"] = json!(format!("1.31.{patch}"));
        current = api.put(&tenant_path("stalled"), &current).await.expect(200);
        expect_event(&mut reader, "MODIFIED", "stalled").await;
    }
    eventually("the stalled watcher to be cut off", CUT_OFF, || async {
        (open(api.clone()).await == 1.0).then_some(())
    })
    .await;

    // The reading watcher still hears every change.
    current["spec"]["kubernetesVersion"] = json!("1.32.0");
    api.put(&tenant_path("stalled"), &current).await.expect(200);
    let frame = expect_event(&mut reader, "MODIFIED", "stalled").await;
    assert_eq!(frame.object()["spec"]["kubernetesVersion"], "1.32.0");
    drop(stalled);
}
