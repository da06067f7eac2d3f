//! Limits per identity: a viewer holds at most `CMS_WATCHES_PER_IDENTITY`
//! watch streams open, the next is refused with 429 and `Retry-After`
//! while other identities go on, a closed stream frees its slot; and a
//! burst past `CMS_REQUEST_RATE_PER_IDENTITY` gets 429 for that identity
//! only.

use std::time::{Duration, Instant};

use cms_e2e::fixtures::TENANTS;
use cms_e2e::{Api, Server, Watch};
use serde_json::json;

const WATCH: &str = "/api/v1/tenants?watch=true";

/// Creates a viewer as `admin` and logs it in.
async fn viewer(server: &Server, admin: &Api) -> Api {
    let body =
        json!({"metadata": {"name": "viewer"}, "spec": {"role": "view", "password": "viewer-password"}});
    admin.post("/api/v1/users", &body).await.expect(201);
    Api::new(server.addr()).login("viewer", "viewer-password").await
}

/// How many file descriptors the server holds.
fn open_files(server: &Server) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", server.pid())).map(|dir| dir.count()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_are_bounded_per_identity() {
    let server = Server::options()
        .env("CMS_WATCHES_PER_IDENTITY", "3")
        // A closed stream is noticed at its next write.
        .env("CMS_WATCH_HEARTBEAT", "200ms")
        .start()
        .await;
    let admin = server.api();
    let viewer = viewer(&server, &admin).await;

    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(Watch::open(&viewer, "", &[]).await);
    }
    let files = open_files(&server);
    // Far more than the bound: each is refused, and holds nothing.
    for _ in 0..50 {
        let refused = viewer.get(WATCH).await;
        let message = refused.expect_error(429, "TooManyRequests");
        assert!(message.contains("at most 3"), "the message names the bound: {message}");
        let retry: u64 = refused.header("retry-after").expect("Retry-After").parse().expect("seconds");
        assert!(retry >= 1, "{retry}");
    }
    let grown = open_files(&server).saturating_sub(files);
    assert!(grown <= 4, "refused watches hold no descriptors: {grown} more open files");

    let mut admins = Watch::open(&admin, "", &[]).await;
    admins.initial_burst(Duration::from_secs(10)).await;
    admin.get(TENANTS).await.expect(200);

    drop(streams.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    let reopened = loop {
        match Watch::try_open(&viewer, "", &[]).await {
            Ok(watch) => break watch,
            Err(failure) if failure.status == 429 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(failure) => panic!("the closed stream's slot was not freed: {failure}"),
        }
    };
    streams.push(reopened);
    viewer.get(WATCH).await.expect_error(429, "TooManyRequests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_rates_are_limited_per_identity() {
    let server = Server::options()
        .env("CMS_REQUEST_RATE_PER_IDENTITY", "2")
        .env("CMS_REQUEST_BURST_PER_IDENTITY", "5")
        .start()
        .await;
    let admin = server.api();
    let viewer = viewer(&server, &admin).await;

    let mut statuses = Vec::new();
    let mut refused = None;
    for _ in 0..12 {
        let reply = viewer.get(TENANTS).await;
        statuses.push(reply.status);
        if reply.status == 429 && refused.is_none() {
            refused = Some(reply);
        }
    }
    let passed = statuses.iter().filter(|status| **status == 200).count();
    assert!((5..=7).contains(&passed), "a burst of 5 passes, then about 2 a second: {statuses:?}");
    let refused = refused.expect("the burst past the rate is refused");
    let message = refused.expect_error(429, "TooManyRequests");
    assert!(message.contains("at most 2 per second"), "{message}");
    let retry: u64 = refused.header("retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((1..=2).contains(&retry), "{retry}");

    admin.get(TENANTS).await.expect(200);
    tokio::time::sleep(Duration::from_secs(retry)).await;
    viewer.get(TENANTS).await.expect(200);
}
