//! `cms watch` as a reflector: its connection is cut, the server's event log
//! moves on past where it would resume (410 `Gone`), and it lists again,
//! printing every change once: no duplicate line and no missing change.
//!
//! The client talks to the server through a proxy this test cuts: every
//! connection closes, and new ones wait until the test lets them through,
//! so the client's resume comes after the writes, whatever the timing.

use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use cms_e2e::cli::{Cli, stdout_lines};
use cms_e2e::fixtures::{TENANTS, tenant, tenant_path};
use cms_e2e::{Api, Server, Watch};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const LINE_WAIT: Duration = Duration::from_secs(20);
const FRAME_WAIT: Duration = Duration::from_secs(10);

/// Whether connections pass, and which generation of them is alive.
#[derive(Debug, Clone, Copy)]
struct Gate {
    open: bool,
    generation: u64,
}

/// A TCP proxy to the server that the test can cut and open again.
struct Proxy {
    addr: SocketAddr,
    gate: watch::Sender<Gate>,
}

impl Proxy {
    async fn start(server: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a proxy port");
        let addr = listener.local_addr().expect("the proxy's address");
        let (gate, _) = watch::channel(Gate { open: true, generation: 0 });
        let gates = gate.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut gate = gates.subscribe();
                tokio::spawn(async move {
                    // A connection made while cut waits for the gate.
                    let Ok(open) = gate.wait_for(|gate| gate.open).await.map(|gate| *gate) else { return };
                    let Ok(mut upstream) = TcpStream::connect(server).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                        _ = gate.wait_for(|gate| gate.generation != open.generation) => {}
                    }
                });
            }
        });
        Proxy { addr, gate }
    }

    /// Closes every connection and holds new ones.
    fn cut(&self) {
        self.gate.send_modify(|gate| {
            gate.open = false;
            gate.generation += 1;
        });
    }

    /// Lets connections through again.
    fn open(&self) {
        self.gate.send_modify(|gate| gate.open = true);
    }
}

/// The next `n` events `cms watch -o json` prints, as `TYPE NAME VERSION`.
fn next_events(lines: &Receiver<String>, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let line = lines.recv_timeout(LINE_WAIT).expect("a line of `cms watch` in time");
            let event: Value = serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"));
            let metadata = &event["object"]["metadata"];
            format!(
                "{} {} {}",
                event["type"].as_str().unwrap_or("?"),
                metadata["name"].as_str().unwrap_or("?"),
                metadata["resourceVersion"]
            )
        })
        .collect()
}

/// `TYPE NAME VERSION` of a tenant as the API returned it.
fn shown(kind: &str, tenant: &Value) -> String {
    format!(
        "{kind} {} {}",
        tenant["metadata"]["name"].as_str().unwrap_or("?"),
        tenant["metadata"]["resourceVersion"]
    )
}

async fn relabel(api: &Api, current: &Value, label: &str) -> Value {
    let mut next = current.clone();
    next["metadata"]["labels"] = json!({"step": label});
    let name = current["metadata"]["name"].as_str().expect("a name");
    api.put(&tenant_path(name), &next).await.expect(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cms_watch_lists_again_after_410_and_shows_each_change_once() {
    let server = Server::options().env("CMS_EVENT_RETENTION", "20").start().await;
    let api = server.api();
    let mut tenants = Vec::new();
    for name in ["a", "b", "c", "d"] {
        tenants.push(api.post(TENANTS, &tenant(name)).await.expect(201));
    }
    let [a, mut b, c, d] = <[Value; 4]>::try_from(tenants).expect("four tenants");
    let proxy = Proxy::start(server.addr()).await;
    let cli = Cli::bare()
        .env("CMS_SERVER", &format!("http://{}", proxy.addr))
        .env("SERVICE_TOKEN", api.token().expect("the harness is logged in"));
    let mut child = cli.spawn(&["watch", "-o", "json"]);
    let lines = stdout_lines(&mut child);

    let opening: Vec<String> = [&a, &b, &c, &d].iter().map(|t| shown("ADDED", t)).collect();
    assert_eq!(next_events(&lines, 4), opening, "every tenant once, by name");
    let a = relabel(&api, &a, "live").await;
    assert_eq!(next_events(&lines, 1), [shown("MODIFIED", &a)]);

    // The client has seen everything up to now: this revision or before.
    let mut probe = Watch::open(&api, "", &[]).await;
    let (_, seen) = probe.initial_burst(FRAME_WAIT).await;
    drop(probe);

    // Changes the client does not see: more than the log keeps.
    proxy.cut();
    for round in 0..40 {
        b = relabel(&api, &b, &round.to_string()).await;
    }
    let c = relabel(&api, &c, "one").await;
    let e = api.post(TENANTS, &tenant("e")).await.expect(201);
    // The client's resume point is gone from the log.
    api.get(&format!("{TENANTS}?watch=true&resourceVersion={seen}")).await.expect_error(410, "Gone");
    proxy.open();

    // Listed again: only what changed, once, by name, as it is now; `a`
    // and `d` are as shown.
    let expected: Vec<String> = vec![shown("MODIFIED", &b), shown("MODIFIED", &c), shown("ADDED", &e)];
    assert_eq!(next_events(&lines, 3), expected);
    // And live again.
    let d = relabel(&api, &d, "after").await;
    assert_eq!(next_events(&lines, 1), [shown("MODIFIED", &d)]);

    child.kill().expect("the watch is stopped");
    child.wait().expect("the watch exits");
    match lines.recv_timeout(LINE_WAIT) {
        Err(RecvTimeoutError::Disconnected) => {}
        other => panic!("nothing more is printed: {other:?}"),
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("a stderr pipe"), &mut stderr).unwrap();
    assert!(stderr.contains("(410 Gone): listing again"), "{stderr}");
}
