//! Graceful shutdown: SIGTERM exits 0 and closes open watch streams.

use std::time::Duration;

use cms_e2e::fixtures::{TENANTS, tenant, tenant_path};
use cms_e2e::{Server, Watch};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero_while_a_watch_is_open() {
    let server = Server::start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("alpha")).await.expect(201);
    let mut watch = Watch::open(&api, "", &[]).await;
    let (burst, _) = watch.initial_burst(Duration::from_secs(10)).await;
    assert_eq!(burst, ["alpha"]);

    server.send_sigterm();
    watch.expect_end(Duration::from_secs(15)).await;
    let (status, stopped) = server.wait_for_exit().await;
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0 with a watch open: {status:?}\n{}", stopped.output());

    // What was written before the signal is there after a restart.
    let server = stopped.restart().await;
    server.api().get(&tenant_path("alpha")).await.expect(200);
    server.terminate().await;
}
