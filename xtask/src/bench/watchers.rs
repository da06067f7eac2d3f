//! Watch fan-out: many SSE watchers on one server, each timing the
//! arrival of every change of one tenant against the moment its PUT was
//! sent, and the server's resident memory per open watcher.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::load::{self, Target};
use super::servers::Process;
use super::workloads::{tenant_body, tenant_name};

/// How long every watcher may take to connect and sync.
const CONNECT_LIMIT: Duration = Duration::from_secs(120);
/// Between two changes of the watched tenant.
const SPACING: Duration = Duration::from_millis(200);

/// What the fan-out bench measured.
#[derive(Debug)]
pub(crate) struct Figures {
    pub(crate) watchers: usize,
    pub(crate) changes: usize,
    pub(crate) deliveries: usize,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) max: Duration,
    pub(crate) rss_before: u64,
    pub(crate) rss_after: u64,
}

impl Figures {
    pub(crate) fn markdown(&self) -> String {
        let per =
            (self.rss_after.saturating_sub(self.rss_before)) as f64 / self.watchers.max(1) as f64 / 1024.0;
        format!(
            "\n## Watch fan-out\n\n\
             {} SSE watchers of `GET /api/v1/tenants?watch=true` on one `cms-server` (release), each\n\
             timing the arrival of {} changes of one tenant (one `PUT` every {} ms) against the moment the\n\
             `PUT` was sent; the load generator and the server share the machine. Targets: p99 100 ms and\n\
             20 KiB per watcher.\n\n\
             | Figure | Value |\n|---|---|\n\
             | deliveries | {} (every watcher got every change) |\n\
             | delivery delay p50 / p99 / max | {:.1} ms / {:.1} ms / {:.1} ms |\n\
             | server RSS before / with the watchers | {:.1} MB / {:.1} MB |\n\
             | memory per watcher | {:.1} KiB |\n\n\
             The bench reads the watchers' streams with two threads on the same cores as the server's two\n\
             workers, so the delays include the client's own queueing.\n",
            self.watchers,
            self.changes,
            SPACING.as_millis(),
            self.deliveries,
            self.p50.as_secs_f64() * 1000.0,
            self.p99.as_secs_f64() * 1000.0,
            self.max.as_secs_f64() * 1000.0,
            self.rss_before as f64 / 1_000_000.0,
            self.rss_after as f64 / 1_000_000.0,
            per,
        )
    }
}

/// One watcher's arrivals: the watched tenant's `resourceVersion` and when.
type Arrivals = Arc<Mutex<Vec<(u64, Instant)>>>;

/// Opens `watchers` watches on `server` (an empty store with one tenant),
/// then changes the tenant `changes` times.
pub(crate) async fn measure(
    server: &Process,
    target: &Target,
    watchers: usize,
    changes: usize,
) -> Result<Figures> {
    let name = tenant_name(0);
    let create =
        target.with_json("POST", "/api/v1/tenants", &tenant_body(&name, serde_json::json!({}), None));
    let (status, body) = load::exchange(target.addr, &create).await?;
    ensure!(status == 201, "creating the watched tenant: {status} {}", String::from_utf8_lossy(&body));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = server.rss()?;

    let mut arrivals = Vec::new();
    let mut synced = Vec::new();
    for _ in 0..watchers {
        let seen: Arrivals = Arc::default();
        let (ready, ready_rx) = tokio::sync::oneshot::channel();
        let request = target.get("/api/v1/tenants?watch=true");
        tokio::spawn(watch(target.addr, request, seen.clone(), ready));
        arrivals.push(seen);
        synced.push(ready_rx);
    }
    let deadline = Instant::now() + CONNECT_LIMIT;
    for ready in synced {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::timeout(left, ready).await.context("watchers did not sync in time")???;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = server.rss()?;

    let mut sent = Vec::new();
    let mut version = 1;
    for index in 0..changes {
        let body = tenant_body(&name, serde_json::json!({"change": index.to_string()}), Some(version));
        let request = target.with_json("PUT", &format!("/api/v1/tenants/{name}"), &body);
        let at = Instant::now();
        let (status, reply) = load::exchange(target.addr, &request).await?;
        ensure!(status == 200, "a change failed: {status} {}", String::from_utf8_lossy(&reply));
        version += 1;
        sent.push((version, at));
        tokio::time::sleep(SPACING).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut delays = Vec::new();
    for seen in &arrivals {
        let seen = seen.lock().await;
        for (version, at) in &sent {
            match seen.iter().find(|(v, _)| v == version) {
                Some((_, arrived)) => delays.push(arrived.saturating_duration_since(*at)),
                None => bail!("a watcher missed version {version}"),
            }
        }
    }
    delays.sort_unstable();
    let quantile = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize];
    Ok(Figures {
        watchers,
        changes,
        deliveries: delays.len(),
        p50: quantile(0.5),
        p99: quantile(0.99),
        max: *delays.last().context("no deliveries")?,
        rss_before,
        rss_after,
    })
}

/// One watcher: sends the request, reports once synced (the `id:` line
/// after the initial burst), then records the arrival of each event's
/// `resourceVersion`.
async fn watch(
    addr: std::net::SocketAddr,
    request: Vec<u8>,
    seen: Arrivals,
    ready: tokio::sync::oneshot::Sender<Result<()>>,
) {
    let mut ready = Some(ready);
    let result = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(&request).await?;
        let mut buffer = vec![0u8; 16 * 1024];
        let mut pending = Vec::new();
        loop {
            let read = stream.read(&mut buffer).await?;
            if read == 0 {
                return Ok::<(), anyhow::Error>(());
            }
            let now = Instant::now();
            pending.extend_from_slice(&buffer[..read]);
            while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = pending.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&frame);
                // Live events carry `id:` too; the sync frame is an `id:` alone.
                if let Some(version) = resource_version(&text) {
                    seen.lock().await.push((version, now));
                } else if (text.starts_with("id: ") || text.contains("\nid: "))
                    && let Some(ready) = ready.take()
                {
                    let _ = ready.send(Ok(()));
                }
            }
        }
    }
    .await;
    if let (Err(err), Some(ready)) = (result, ready.take()) {
        let _ = ready.send(Err(err));
    }
}

/// The object's `"resourceVersion":N` in a `data:` frame.
fn resource_version(frame: &str) -> Option<u64> {
    let (_, rest) = frame.split_once("\"resourceVersion\":")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
