//! Watch fan-out: many SSE watchers on one server, each timing the
//! arrival of every change of one tenant against the moment its PUT was
//! sent, and the server's resident memory per open watcher.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::cpu;
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
    /// CPU microseconds per delivery: the server's, and the load
    /// generator's (its watchers' reads and the changes it sends).
    pub(crate) server_cpu: f64,
    pub(crate) client_cpu: f64,
}

impl Figures {
    pub(crate) fn markdown(&self) -> String {
        let per =
            (self.rss_after.saturating_sub(self.rss_before)) as f64 / self.watchers.max(1) as f64 / 1024.0;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        // The CPU of one change's deliveries, spread over every core: the
        // last watcher cannot hear the change sooner.
        let floor = (self.server_cpu + self.client_cpu) * self.watchers as f64 / cores as f64 / 1000.0;
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
             | memory per watcher | {:.1} KiB |\n\
             | CPU per delivery: server / load generator | {:.1} µs / {:.1} µs |\n\
             | CPU of one change's {} deliveries, over {} core(s) | {:.1} ms |\n\n\
             The load generator is an optimised build reading every stream on one thread. It shares\n\
             the machine's cores with the server's workers, so the delays include its own queueing,\n\
             and the last watcher hears a change no sooner than the CPU time of all its deliveries\n\
             spread over the cores (the last row). Most of the server's share is the kernel's: one\n\
             `send` per watcher, which on loopback also runs the receiving socket's TCP processing\n\
             and wakes the load generator's thread. A watcher that stops reading is cut off once\n\
             what was sent to it stays unread for `CMS_SEND_TIMEOUT` (`tests/e2e/watch.rs`).\n",
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
            self.server_cpu,
            self.client_cpu,
            self.watchers,
            cores,
            floor,
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

    let before = cpu::Sample::take(Some(server.pid()));
    let started = Instant::now();
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
    let usage = before.until(&cpu::Sample::take(Some(server.pid())));
    let wall = started.elapsed();

    let mut delays = Vec::new();
    for seen in &arrivals {
        let seen = seen.lock().map_err(|_| anyhow::anyhow!("a watcher panicked"))?;
        for (version, at) in &sent {
            match seen.iter().find(|(v, _)| v == version) {
                Some((_, arrived)) => delays.push(arrived.saturating_duration_since(*at)),
                None => bail!("a watcher missed version {version}"),
            }
        }
    }
    delays.sort_unstable();
    let (server_cpu, _, client_cpu) = usage.micros_per_op(delays.len() as f64 / wall.as_secs_f64());
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
        server_cpu,
        client_cpu,
    })
}

/// One watcher: sends the request, reports once synced (the `id:` line
/// after the initial burst), then records the arrival of each event's
/// `resourceVersion`. Each byte is scanned once, and every frame of one read
/// is stamped with that read's time.
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
        let mut pending = Vec::with_capacity(16 * 1024);
        // Bytes of `pending` already searched for a frame's end.
        let mut searched = 0;
        loop {
            if pending.capacity() - pending.len() < 4096 {
                pending.reserve(16 * 1024);
            }
            if stream.read_buf(&mut pending).await? == 0 {
                return Ok::<(), anyhow::Error>(());
            }
            let now = Instant::now();
            let mut start = 0;
            while let Some(end) = frame_end(&pending, searched.max(start)) {
                let frame = &pending[start..end];
                // Live events carry `id:` too; the sync frame is an `id:` alone.
                // A frame may follow a chunk's size line.
                if let Some(version) = resource_version(frame) {
                    seen.lock().map_err(|_| anyhow::anyhow!("a watcher panicked"))?.push((version, now));
                } else if (frame.starts_with(b"id: ") || frame.windows(5).any(|window| window == b"\nid: "))
                    && let Some(ready) = ready.take()
                {
                    let _ = ready.send(Ok(()));
                }
                start = end;
            }
            pending.drain(..start);
            // A frame's end may straddle two reads: search its last byte again.
            searched = pending.len().saturating_sub(1);
        }
    }
    .await;
    if let (Err(err), Some(ready)) = (result, ready.take()) {
        let _ = ready.send(Err(err));
    }
}

/// The end of the first frame (just past its blank line) that ends at or
/// after `from`.
fn frame_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(offset) = bytes.get(at..)?.iter().position(|&byte| byte == b'\n') {
        let newline = at + offset;
        if bytes.get(newline + 1) == Some(&b'\n') {
            return Some(newline + 2);
        }
        at = newline + 1;
    }
    None
}

/// The object's `"resourceVersion":N` in a `data:` frame.
fn resource_version(frame: &[u8]) -> Option<u64> {
    const FIELD: &[u8] = b"\"resourceVersion\":";
    let at = frame.windows(FIELD.len()).position(|window| window == FIELD)? + FIELD.len();
    let digits = frame[at..].iter().take_while(|byte| byte.is_ascii_digit()).count();
    std::str::from_utf8(&frame[at..at + digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_end_at_a_blank_line_even_across_reads() {
        let text = b"id: 4\n\nid: 5\ndata: {}\n\nid: 6\n";
        assert_eq!(frame_end(text, 0), Some(7));
        assert_eq!(frame_end(text, 7), Some(23));
        assert_eq!(frame_end(text, 23), None);
        let split = b"data: {}\n";
        assert_eq!(frame_end(split, split.len() - 1), None);
        let joined = b"data: {}\n\n";
        assert_eq!(frame_end(joined, split.len() - 1), Some(joined.len()));
    }

    #[test]
    fn versions_come_from_the_object() {
        let frame =
            b"id: 7\ndata: {\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"resourceVersion\":42}}}\n\n";
        assert_eq!(resource_version(frame), Some(42));
        assert_eq!(resource_version(b"id: 7\n\n"), None);
    }
}
