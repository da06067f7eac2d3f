//! Graceful shutdown: SIGTERM exits 0, closes open watch streams, and lets
//! a request and a tool run in flight finish.

use std::net::SocketAddr;
use std::time::Duration;

use cms_e2e::fixtures::{TENANTS, tenant, tenant_path};
use cms_e2e::{REQUEST_TIMEOUT, STOP_TIMEOUT, Server, Watch, strip_ansi};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::provisioning::{CONVERGE, Engine, eventually, machine_ids, metal_tenant};

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

/// A tenant's creation whose head the server has taken and whose body the
/// test holds back: a request in flight until [`HeldRequest::finish`].
struct HeldRequest {
    stream: TcpStream,
    body: Vec<u8>,
}

impl HeldRequest {
    /// Sends the head with `Expect: 100-continue` and waits for the
    /// server's `100 Continue`: the request has reached its handler, which
    /// waits for the body.
    async fn start(addr: SocketAddr, token: &str, body: &Value) -> HeldRequest {
        let body = serde_json::to_vec(body).unwrap();
        let head = format!(
            "POST {TENANTS} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\
             Connection: close\r\n\r\n",
            body.len()
        );
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        while !answer.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(REQUEST_TIMEOUT, stream.read(&mut byte)).await;
            match read.expect("the server answers the head") {
                Ok(1) => answer.push(byte[0]),
                other => panic!("the connection ended before `100 Continue`: {other:?} after {answer:?}"),
            }
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 100 Continue"), "{answer}");
        HeldRequest { stream, body }
    }

    /// Sends the body and reads the whole reply; gives its status line.
    async fn finish(mut self) -> String {
        self.stream.write_all(&self.body).await.expect("the server still reads the request");
        let mut reply = Vec::new();
        tokio::time::timeout(REQUEST_TIMEOUT, self.stream.read_to_end(&mut reply))
            .await
            .expect("the server replies")
            .expect("the reply is read");
        let reply = String::from_utf8_lossy(&reply);
        reply.lines().next().unwrap_or_default().to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_request_and_a_tool_run_in_flight_finish() {
    let engine = Engine::new();
    engine.set("gate-apply", true);
    let server = engine.options().start().await;
    let api = server.api();
    api.post(TENANTS, &metal_tenant("acme", 1, 1)).await.expect(201);
    eventually("the tenant's apply to start", CONVERGE, || async {
        engine.spans().iter().any(|span| span.verb == "apply").then_some(())
    })
    .await;
    let request = HeldRequest::start(server.addr(), api.token().unwrap(), &tenant("beta")).await;

    server.send_sigterm();
    eventually("the server to take the signal", STOP_TIMEOUT, || async {
        strip_ansi(&server.output()).contains("shutting down").then_some(())
    })
    .await;
    // While the tool run is held in its grace, the server still serves.
    api.get(&tenant_path("acme")).await.expect(200);
    // Let go, the run goes on to its end; only then does the server stop
    // listening, and it drains the request still in flight.
    engine.set("gate-apply", false);
    let addr = server.addr();
    eventually("the server to stop listening", STOP_TIMEOUT, || async {
        TcpStream::connect(addr).await.is_err().then_some(())
    })
    .await;
    let applies: Vec<_> = engine.spans().into_iter().filter(|span| span.verb == "apply").collect();
    assert!(applies[0].end.is_some(), "the apply ended before the server stopped listening: {applies:?}");
    let status = request.finish().await;
    assert!(status.starts_with("HTTP/1.1 201"), "the request in flight was answered: {status}");
    let (status, stopped) = server.wait_for_exit().await;
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0: {status:?}\n{}", stopped.output());
    let applies: Vec<_> = engine.spans().into_iter().filter(|span| span.verb == "apply").collect();
    assert_eq!(applies.len(), 1, "one apply ran, to its end: {applies:?}");

    // What both wrote is there after a restart whose tool runs are all
    // held: the apply's outcome was recorded before the server exited.
    engine.set("gate", true);
    let server = stopped.restart().await;
    let api = server.api();
    api.get(&tenant_path("beta")).await.expect(200);
    let acme = api.get(&tenant_path("acme")).await.expect(200);
    assert!(acme["status"]["lastAppliedAt"].is_string(), "{acme}");
    let provisioned = acme["status"]["conditions"]
        .as_array()
        .is_some_and(|all| all.iter().any(|c| c["type"] == "Provisioned" && c["status"] == "True"));
    assert!(provisioned, "{acme}");
    assert_eq!(machine_ids(&api, "acme").await, ["cp-0", "workers-0"]);
    engine.set("gate", false);
    server.terminate().await;
}
