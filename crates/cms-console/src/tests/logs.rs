//! The machine page and its logs panel: the panel for roles with
//! `ReadLogs` only, the stream's refusals (a viewer, a bad query, a tenant
//! not granted), a log streamed line by line from the node client, the
//! kernel's log, every read marked for the audit log, and a followed log
//! let go when its reader goes away, ended when its session ends and at
//! shutdown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cms_auth::Caller;
use cms_tenancy::{LogChunks, LogsRequest, MockNodeClient, NodeRef};
use futures_util::{StreamExt, stream};
use http::StatusCode;
use serde_json::json;

use super::{ADMIN, Fixture, VIEWER, next_chunk};
use crate::{Body, Recorded, Response};

const LOGS: &str = "/tenants/demo/machines/m-1/logs";

/// A log of `chunks`, then its end.
fn chunks(chunks: &[&str]) -> LogChunks {
    let chunks: Vec<_> = chunks.iter().map(|chunk| Ok(chunk.as_bytes().to_vec())).collect();
    Box::pin(stream::iter(chunks))
}

/// Sets on drop: the stream it lives in was let go.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Tenant `demo` with machine `m-1`, its console reading logs through `nodes`.
async fn fixture(nodes: MockNodeClient) -> Fixture {
    labelled(nodes, json!({})).await
}

/// As [`fixture`], `demo` labelled `labels`.
async fn labelled(nodes: MockNodeClient, labels: serde_json::Value) -> Fixture {
    let mut f = Fixture::new().await;
    f.tenant("demo", labels, "active").await;
    f.machine("demo", "m-1", true).await;
    f.console = f.console.clone().with_nodes(Arc::new(nodes));
    f
}

/// A session of an editor, from single sign-on's group `devs`.
fn editor(f: &Fixture) -> String {
    f.sso_session("ed@example.com", &["devs"])
}

/// The whole body of a streamed answer, until it ends.
async fn read_all(response: Response) -> String {
    let Body::Stream(mut stream) = response.into_body() else { panic!("the answer is not a stream") };
    let mut text = String::new();
    while let Some(chunk) = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
        .await
        .expect("a chunk within five seconds")
    {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

fn recorded(response: &Response) -> Option<String> {
    response.extensions().get::<Recorded>()?;
    response.extensions().get::<Caller>().map(|caller| caller.user.clone())
}

#[tokio::test]
async fn the_panel_shows_to_editors_and_a_note_to_viewers() {
    let f = fixture(MockNodeClient::new()).await;
    let page = f.get("/tenants/demo/machines/m-1", Some(&editor(&f))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for element in ["id=\"logs-form\"", "action=\"/tenants/demo/machines/m-1/logs\"", "id=\"logs-output\""] {
        assert!(page.body.contains(element), "{element}: {}", page.body);
    }
    assert!(page.body.contains("<option value=\"dmesg\">"), "{}", page.body);
    assert!(page.body.contains("/assets/logs."), "the page loads the panel's script");
    assert!(page.body.contains("data-lines=\"2000\""), "{}", page.body);

    let viewer = f.sign_in(VIEWER).await;
    let page = f.get("/tenants/demo/machines/m-1", Some(&viewer)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("id=\"logs-refused\""), "{}", page.body);
    assert!(!page.body.contains("logs-form") && !page.body.contains("logs-output"), "{}", page.body);

    let tenant = f.get("/tenants/demo", Some(&viewer)).await;
    assert!(
        tenant.body.contains("href=\"/tenants/demo/machines/m-1\""),
        "the machines table links the machine"
    );
    let missing = f.get("/tenants/demo/machines/m-9", Some(&viewer)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_viewer_s_read_is_refused_and_recorded() {
    let f = fixture(MockNodeClient::new()).await;
    let viewer = f.sign_in(VIEWER).await;
    let refused = f.open(LOGS, &viewer).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(recorded(&refused).as_deref(), Some(VIEWER), "the refusal is on the audit log");
    let Body::Full(body) = refused.body() else { panic!("a page") };
    assert!(String::from_utf8_lossy(body).contains("role view may not read machine logs"));

    let anonymous = f.get(LOGS, None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "no session, no redirect to the stream");
}

#[tokio::test]
async fn a_bad_query_is_400_and_the_node_is_not_asked() {
    // The mock expects no call: one would panic.
    let f = fixture(MockNodeClient::new()).await;
    let admin = f.sign_in(ADMIN).await;
    for query in ["service=Etcd", "service=a%2Fb", "service=-x", "tail=10001", "tail=many", "follow=yes"] {
        let reply = f.get(&format!("{LOGS}?{query}"), Some(&admin)).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}: {}", reply.body);
        assert!(reply.body.contains("id=\"failure\""), "{}", reply.body);
    }
    let long = "a".repeat(64);
    let reply = f.get(&format!("{LOGS}?service={long}"), Some(&admin)).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_log_streams_line_by_line_and_the_read_is_recorded() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut nodes = MockNodeClient::new();
    let seen = asked.clone();
    nodes.expect_logs().times(1).returning(move |node: &NodeRef, request: LogsRequest| {
        seen.lock().unwrap().push((node.clone(), request));
        Ok(chunks(&["first line\nsec", "ond <b>line</b>\r\n", "last"]))
    });
    let f = fixture(nodes).await;
    let response = f.open(&format!("{LOGS}?service=etcd&follow=false&tail=5"), &editor(&f)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert!(response.headers().contains_key("content-security-policy"));
    assert_eq!(recorded(&response).as_deref(), Some("ed@example.com"), "the read is on the audit log");
    let body = read_all(response).await;
    assert_eq!(
        body,
        "data: first line\n\ndata: second <b>line</b>\n\ndata: last\n\nevent: end\ndata: The log ended.\n\n"
    );
    let asked = asked.lock().unwrap();
    let (node, request) = &asked[0];
    assert_eq!((node.tenant.as_str(), node.machine.as_str()), ("demo", "m-1"));
    assert_eq!(node.management_address, "10.0.0.1:50000");
    assert_eq!(request, &LogsRequest { service: "etcd".into(), follow: false, tail_lines: Some(5) });
}

#[tokio::test]
async fn dmesg_is_the_kernel_s_log() {
    let mut nodes = MockNodeClient::new();
    nodes
        .expect_dmesg()
        .withf(|node: &NodeRef, follow: &bool| node.machine == "m-1" && *follow)
        .times(1)
        .returning(|_, _| Ok(chunks(&["[0.000] Linux version\n"])));
    let f = fixture(nodes).await;
    let admin = f.sign_in(ADMIN).await;
    let response = f.open(&format!("{LOGS}?service=dmesg"), &admin).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(read_all(response).await.starts_with("data: [0.000] Linux version\n\n"));
}

#[tokio::test]
async fn a_followed_log_is_let_go_when_its_reader_goes() {
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = dropped.clone();
    let mut nodes = MockNodeClient::new();
    nodes.expect_logs().times(1).returning(move |_, _| {
        let guard = Dropped(guard.clone());
        let first = stream::iter([Ok(b"up\n".to_vec())]);
        // A followed log that writes nothing more.
        let rest = stream::pending().map(move |chunk| {
            let _held = &guard;
            chunk
        });
        Ok(Box::pin(first.chain(rest)) as LogChunks)
    });
    let f = fixture(nodes).await;
    let mut response = f.open(LOGS, &editor(&f)).await;
    assert_eq!(next_chunk(&mut response).await, "data: up\n\n");
    assert!(!dropped.load(Ordering::SeqCst));
    drop(response);
    assert!(dropped.load(Ordering::SeqCst), "the node's stream goes with the answer");
}

#[tokio::test]
async fn a_log_the_node_breaks_off_says_so() {
    let mut nodes = MockNodeClient::new();
    nodes.expect_logs().returning(|_, _| {
        let broken = cms_tenancy::NodeError::Unsupported("Logs");
        Ok(Box::pin(stream::iter([Ok(b"half".to_vec()), Err(broken)])) as LogChunks)
    });
    let f = fixture(nodes).await;
    let body = read_all(f.open(LOGS, &editor(&f)).await).await;
    assert!(body.starts_with("data: half\n\nevent: failure\ndata: The node broke the log off: "), "{body}");
}

#[tokio::test]
async fn a_grant_s_editor_reads_its_tenants_logs_only() {
    let mut nodes = MockNodeClient::new();
    nodes.expect_logs().times(1).returning(|_, _| Ok(chunks(&["ok\n"])));
    let f = labelled(nodes, json!({"team": "a"})).await;
    f.tenant("other", json!({"team": "b"}), "active").await;
    f.machine("other", "m-1", true).await;
    let spec = json!({"role": "edit", "subjects": [{"kind": "Group", "name": "a-devs"}],
                      "tenants": {"selector": "team=a"}});
    f.auth.create_grant("a-devs-edit", serde_json::from_value(spec).unwrap()).await.expect("a grant");
    let dev = f.sso_session("dev@example.com", &["a-devs"]);
    let response = f.open(LOGS, &dev).await;
    assert_eq!(response.status(), StatusCode::OK);
    let other = f.open("/tenants/other/machines/m-1/logs", &dev).await;
    assert_eq!(other.status(), StatusCode::NOT_FOUND, "a tenant not granted is missing");
}

#[tokio::test]
async fn without_a_node_client_the_panel_says_so() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    f.machine("demo", "m-1", true).await;
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/demo/machines/m-1", Some(&admin)).await;
    assert!(page.body.contains("id=\"logs-unavailable\""), "{}", page.body);
    let reply = f.get(LOGS, Some(&admin)).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
}

/// A followed log that writes `up`, then nothing more.
fn quiet_log() -> LogChunks {
    Box::pin(stream::iter([Ok(b"up\n".to_vec())]).chain(stream::pending()))
}

/// The chunks of `response` until one holds `needle`.
async fn until(response: &mut Response, needle: &str) -> String {
    loop {
        let chunk = next_chunk(response).await;
        if chunk.contains(needle) {
            return chunk;
        }
    }
}

#[tokio::test]
async fn a_followed_log_ends_with_its_session_and_at_shutdown() {
    let options = crate::ConsoleOptions {
        heartbeat: std::time::Duration::from_millis(20),
        ..crate::ConsoleOptions::default()
    };
    let mut f = Fixture::with_options(options).await;
    f.tenant("demo", json!({}), "active").await;
    f.machine("demo", "m-1", true).await;
    let mut nodes = MockNodeClient::new();
    nodes.expect_logs().times(2).returning(|_, _| Ok(quiet_log()));
    f.console = f.console.clone().with_nodes(Arc::new(nodes));
    let role = cms_model::UserRole::Edit;
    f.auth.create_user("ed", role, &super::password("ed")).await.expect("an editor");
    let ed = f.sign_in("ed").await;
    let admin = f.sign_in(ADMIN).await;

    let mut ended = f.open(LOGS, &ed).await;
    assert_eq!(next_chunk(&mut ended).await, "data: up\n\n");
    f.auth.delete_user("ed").await.expect("the editor deleted");
    let last = until(&mut ended, "event: end").await;
    assert_eq!(last, "event: end\ndata: Your session ended: sign in again to read logs.\n\n");
    let Body::Stream(stream) = ended.body_mut() else { panic!("a stream") };
    assert!(stream.next().await.is_none(), "the stream is over");

    let mut open = f.open(LOGS, &admin).await;
    assert_eq!(next_chunk(&mut open).await, "data: up\n\n");
    f.console.shutdown.cancel();
    assert_eq!(until(&mut open, "event: end").await, "event: end\ndata: The server is shutting down.\n\n");
}
