//! Watch fan-out: many SSE watchers on one server, each timing the
//! arrival of every change of one tenant against the moment its PUT was
//! sent, and the server's resident memory per open watcher; then the same
//! watchers on a bare broadcaster (`crates/cms-service/examples/broadcaster.rs`)
//! sent the very frames `cms-server` sent, as the baseline.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::load::{self, Target};
use super::servers::Process;
use super::workloads::{tenant_body, tenant_name};
use super::{ADMIN_PASSWORD, BenchOptions, cpu, login};

/// How long every watcher may take to connect and sync.
const CONNECT_LIMIT: Duration = Duration::from_secs(120);
/// Between two changes of the watched tenant.
const SPACING: Duration = Duration::from_millis(200);

/// What the fan-out bench measured: the same watchers on `cms-server` and
/// on the broadcaster baseline.
#[derive(Debug)]
pub(crate) struct Figures {
    pub(crate) watchers: usize,
    pub(crate) changes: usize,
    /// The bytes of one change's SSE frame, the same from both servers.
    pub(crate) frame_bytes: usize,
    pub(crate) cms: Run,
    pub(crate) baseline: Run,
}

/// What one server's run measured.
#[derive(Debug, Clone)]
pub(crate) struct Run {
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

impl Run {
    /// Deliveries per second of the server's CPU.
    pub(crate) fn per_cpu_second(&self) -> f64 {
        1e6 / self.server_cpu.max(f64::EPSILON)
    }

    /// The rise of the server's resident memory per watcher, in KiB.
    pub(crate) fn kib_per_watcher(&self, watchers: usize) -> f64 {
        self.rss_after.saturating_sub(self.rss_before) as f64 / watchers.max(1) as f64 / 1024.0
    }
}

impl Figures {
    /// `cms-server`'s deliveries per server CPU-second over the baseline's.
    pub(crate) fn ratio(&self) -> f64 {
        self.cms.per_cpu_second() / self.baseline.per_cpu_second().max(f64::EPSILON)
    }

    pub(crate) fn markdown(&self) -> String {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
        // The CPU of one change's deliveries, spread over every core: the
        // last watcher cannot hear the change sooner.
        let floor =
            |run: &Run| (run.server_cpu + run.client_cpu) * self.watchers as f64 / cores as f64 / 1000.0;
        let row = |figure: &str, value: &dyn Fn(&Run) -> String| {
            format!("| {figure} | {} | {} |\n", value(&self.cms), value(&self.baseline))
        };
        let mut text = format!(
            "\n## Watch fan-out\n\n\
             {} SSE watchers on one server (release), each timing the arrival of {} changes (one\n\
             every {} ms) against the moment the change was sent; the load generator and the server\n\
             share the machine. First `cms-server`, watched with `GET /api/v1/tenants?watch=true` and\n\
             changed by a `PUT` of one tenant; then, alone on the machine, the baseline: a bare\n\
             actix-web server with the same worker count that forwards one `tokio::sync::broadcast`\n\
             channel to every watcher (`crates/cms-service/examples/broadcaster.rs`, no\n\
             authentication, no store), sent the very frames `cms-server` sent ({} bytes each), read\n\
             by the same watchers. Targets: p99 100 ms, 20 KiB per watcher, and 0.8× the baseline's\n\
             deliveries per server CPU-second.\n\n\
             | Figure | `cms-server` | broadcaster |\n|---|---|---|\n",
            self.watchers,
            self.changes,
            SPACING.as_millis(),
            self.frame_bytes,
        );
        text += &row("deliveries (every watcher got every change)", &|run| run.deliveries.to_string());
        text += &row("deliveries per server CPU-second", &|run| format!("{:.0}", run.per_cpu_second()));
        text += &row("delivery delay p50 / p99 / max", &|run| {
            format!("{:.1} ms / {:.1} ms / {:.1} ms", ms(run.p50), ms(run.p99), ms(run.max))
        });
        text += &row("server RSS before / with the watchers", &|run| {
            format!(
                "{:.1} MB / {:.1} MB",
                run.rss_before as f64 / 1_000_000.0,
                run.rss_after as f64 / 1_000_000.0
            )
        });
        text += &row("memory per watcher", &|run| format!("{:.1} KiB", run.kib_per_watcher(self.watchers)));
        text += &row("CPU per delivery: server / load generator", &|run| {
            format!("{:.1} µs / {:.1} µs", run.server_cpu, run.client_cpu)
        });
        text += &row(
            &format!("CPU of one change's {} deliveries, over {cores} core(s)", self.watchers),
            &|run| format!("{:.1} ms", floor(run)),
        );
        text += &format!(
            "\nRatio of deliveries per server CPU-second, `cms-server` / broadcaster: **{:.2}×** (target 0.8×).\n\n\
             The load generator is an optimised build reading every stream on one thread. It shares\n\
             the machine's cores with the server's workers, so the delays include its own queueing,\n\
             and the last watcher hears a change no sooner than the CPU time of all its deliveries\n\
             spread over the cores (the last row). Most of a server's share is the kernel's: one\n\
             `send` per watcher, which on loopback also runs the receiving socket's TCP processing\n\
             and wakes the load generator's thread. A `cms-server` watcher that stops reading is cut\n\
             off once what was sent to it stays unread for `CMS_SEND_TIMEOUT` (`tests/e2e/watch.rs`).\n",
            self.ratio()
        );
        text
    }
}

/// The fan-out bench on a server of its own (an empty store), then
/// the same watchers on the broadcaster baseline, alone in turn, with a
/// client runtime of one thread, which leaves the server's workers the most
/// of the machine.
pub(super) fn fan_out(options: &BenchOptions, release: &Path) -> Result<Figures> {
    const CHANGES: usize = 20;
    let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?.0;
    ensure!(
        limit as usize > options.watchers + 1000,
        "{} watchers need more open files than the limit of {limit}: raise `ulimit -n`",
        options.watchers
    );
    let data = tempfile::Builder::new().prefix("cms-bench-watch-").tempdir()?;
    // Every watcher is the admin's: one identity, so its bounds are lifted.
    let watches = (options.watchers + 1).to_string();
    let env = [
        ("CMS_WATCHES_PER_IDENTITY", watches.as_str()),
        ("CMS_REQUEST_RATE_PER_IDENTITY", "1000000"),
        ("CMS_REQUEST_BURST_PER_IDENTITY", "1000000"),
        ("CMS_BOOTSTRAP_ADMIN_PASSWORD", ADMIN_PASSWORD),
        ("CMS_KEY_POOL", "0"),
        ("CMS_PROVISIONING", "false"),
    ];
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let server = Process::start("cms-server (watchers)", &release.join("cms-server"), data.path(), &env)?;
    let cms = runtime.block_on(async {
        let target = login(Target::new(server.addr)).await?;
        println!("opening {} watchers on cms-server", options.watchers);
        measure(&server, Subject::Tenant(&target), options.watchers, CHANGES).await
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    let status = server.terminate()?;
    let (cms, frames) = cms?;
    ensure!(status.success(), "the watched server exited with {status}");

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let binary = release.join("examples").join("broadcaster");
    let server = Process::start("broadcaster (watchers)", &binary, data.path(), &[])?;
    println!("opening {} watchers on the broadcaster", options.watchers);
    let subject = Subject::Broadcast(&frames);
    let baseline = runtime.block_on(measure(&server, subject, options.watchers, CHANGES));
    runtime.shutdown_timeout(Duration::from_secs(5));
    let status = server.terminate()?;
    let (baseline, echoed) = baseline?;
    ensure!(status.success(), "the broadcaster exited with {status}");
    let frame_bytes = frame_bytes(&frames, &echoed, CHANGES)?;
    Ok(Figures { watchers: options.watchers, changes: CHANGES, frame_bytes, cms, baseline })
}

/// One watcher's arrivals: the watched object's `resourceVersion` and when.
type Arrivals = Arc<Mutex<Vec<(u64, Instant)>>>;
/// The event frames one watcher received, as the server sent them.
type Captured = Arc<Mutex<Vec<Vec<u8>>>>;

/// What a fan-out run watches, and how it changes it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// One tenant on `cms-server` (an empty store), changed by `PUT`s.
    Tenant(&'a Target),
    /// The broadcaster, sent these frames one by one.
    Broadcast(&'a [Vec<u8>]),
}

/// Opens `watchers` watches on `server`, then makes `changes` changes. Returns
/// the figures and the event frames the first watcher received.
pub(crate) async fn measure(
    server: &Process,
    subject: Subject<'_>,
    watchers: usize,
    changes: usize,
) -> Result<(Run, Vec<Vec<u8>>)> {
    let name = tenant_name(0);
    let plain = Target::new(server.addr);
    let request = match subject {
        Subject::Tenant(target) => {
            let body = tenant_body(&name, serde_json::json!({}), None);
            let create = target.with_json("POST", "/api/v1/tenants", &body);
            let (status, body) = load::exchange(target.addr, &create).await?;
            ensure!(
                status == 201,
                "creating the watched tenant: {status} {}",
                String::from_utf8_lossy(&body)
            );
            target.get("/api/v1/tenants?watch=true")
        }
        Subject::Broadcast(frames) => {
            ensure!(frames.len() == changes, "{} frames for {changes} changes", frames.len());
            plain.get("/watch")
        }
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = server.rss()?;

    let captured: Captured = Arc::default();
    let mut arrivals = Vec::new();
    let mut synced = Vec::new();
    for index in 0..watchers {
        let seen: Arrivals = Arc::default();
        let (ready, ready_rx) = tokio::sync::oneshot::channel();
        let capture = (index == 0).then(|| captured.clone());
        tokio::spawn(watch(server.addr, request.clone(), seen.clone(), capture, ready));
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
    for index in 0..changes {
        let (version, request) = match subject {
            Subject::Tenant(target) => {
                let version = index as u64 + 1;
                let labels = serde_json::json!({"change": index.to_string()});
                let body = tenant_body(&name, labels, Some(version));
                (version + 1, target.with_json("PUT", &format!("/api/v1/tenants/{name}"), &body))
            }
            Subject::Broadcast(frames) => {
                let version = resource_version(&frames[index]).context("a frame without a version")?;
                (version, plain.with_json("PUT", "/frame", &frames[index]))
            }
        };
        let at = Instant::now();
        let (status, reply) = load::exchange(server.addr, &request).await?;
        ensure!(status == 200, "a change failed: {status} {}", String::from_utf8_lossy(&reply));
        if matches!(subject, Subject::Broadcast(_)) {
            let reached = String::from_utf8_lossy(&reply);
            ensure!(reached == watchers.to_string(), "a frame reached {reached} of {watchers} watchers");
        }
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
    let run = Run {
        deliveries: delays.len(),
        p50: quantile(0.5),
        p99: quantile(0.99),
        max: *delays.last().context("no deliveries")?,
        rss_before,
        rss_after,
        server_cpu,
        client_cpu,
    };
    let frames = captured.lock().map_err(|_| anyhow::anyhow!("a watcher panicked"))?.clone();
    Ok((run, frames))
}

/// The bytes of one change's frames, checked to be the same from both
/// servers: one frame per change, each as long as the other server's.
pub(crate) fn frame_bytes(cms: &[Vec<u8>], baseline: &[Vec<u8>], changes: usize) -> Result<usize> {
    ensure!(cms.len() == changes, "the first watcher got {} frames of {changes} changes", cms.len());
    ensure!(cms == baseline, "the broadcaster's watchers did not get the frames cms-server sent");
    Ok(cms.iter().map(Vec::len).sum::<usize>() / changes.max(1))
}

/// One watcher: sends the request, reports once synced (the `id:` line
/// after the initial burst), then records the arrival of each event's
/// `resourceVersion`. Each byte is scanned once, and every frame of one read
/// is stamped with that read's time.
async fn watch(
    addr: std::net::SocketAddr,
    request: Vec<u8>,
    seen: Arrivals,
    capture: Option<Captured>,
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
                ensure!(
                    ready.is_none(),
                    "a watch ended before it was in sync: {}",
                    String::from_utf8_lossy(&pending[..pending.len().min(300)])
                );
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
                    // The live frames only, not the initial burst's.
                    if let Some(capture) = capture.as_ref().filter(|_| ready.is_none()) {
                        let frame = sse_frame(frame).to_vec();
                        capture.lock().map_err(|_| anyhow::anyhow!("a watcher panicked"))?.push(frame);
                    }
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

/// An event frame without the chunk's size line before it: from its `id:`
/// line to its blank line, the bytes the server's stream produced.
fn sse_frame(frame: &[u8]) -> &[u8] {
    if frame.starts_with(b"id: ") {
        return frame;
    }
    match frame.windows(5).position(|window| window == b"\nid: ") {
        Some(at) => &frame[at + 1..],
        None => frame,
    }
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

    const FRAME: &[u8] =
        b"id: 9\ndata: {\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"resourceVersion\":9}}}\n\n";

    #[test]
    fn captured_frames_are_the_stream_bytes_without_the_chunk_size_line() {
        // What a watcher's scan finds after the previous frame of a chunked
        // body: the chunk's end, the next chunk's size, then the frame.
        let mut chunked = format!("\r\n{:x}\r\n", FRAME.len()).into_bytes();
        chunked.extend_from_slice(FRAME);
        assert_eq!(sse_frame(&chunked), FRAME);
        assert_eq!(sse_frame(FRAME), FRAME);
        // So a frame sent again through the broadcaster is captured as the
        // same bytes, the same length, as where it came from.
        assert_eq!(sse_frame(&chunked).len(), sse_frame(FRAME).len());
    }

    #[test]
    fn both_servers_must_send_the_same_frames_one_per_change() {
        let longer = [FRAME, b"x"].concat();
        let frames = vec![FRAME.to_vec(), longer.clone()];
        // The mean length, rounded down.
        assert_eq!(frame_bytes(&frames, &frames, 2).unwrap(), FRAME.len());
        let other = vec![FRAME.to_vec(), FRAME.to_vec()];
        assert!(frame_bytes(&frames, &other, 2).is_err(), "other bytes from the baseline");
        assert!(frame_bytes(&frames[..1], &frames[..1], 2).is_err(), "a change without its frame");
    }

    fn run(server_cpu: f64, rss_after: u64) -> Run {
        Run {
            deliveries: 40_000,
            p50: Duration::from_millis(20),
            p99: Duration::from_millis(80),
            max: Duration::from_millis(90),
            rss_before: 10 * 1024 * 1024,
            rss_after,
            server_cpu,
            client_cpu: 4.0,
        }
    }

    #[test]
    fn the_ratio_compares_deliveries_per_server_cpu_second() {
        let figures = Figures {
            watchers: 2000,
            changes: 20,
            frame_bytes: 700,
            // 10 µs and 8 µs of server CPU per delivery.
            cms: run(10.0, 10 * 1024 * 1024 + 2000 * 12 * 1024),
            baseline: run(8.0, 10 * 1024 * 1024 + 2000 * 3 * 1024),
        };
        assert!((figures.cms.per_cpu_second() - 100_000.0).abs() < 1e-6);
        assert!((figures.baseline.per_cpu_second() - 125_000.0).abs() < 1e-6);
        assert!((figures.ratio() - 0.8).abs() < 1e-9);
        assert!((figures.cms.kib_per_watcher(2000) - 12.0).abs() < 1e-9);
        let text = figures.markdown();
        assert!(text.starts_with("\n## Watch fan-out\n"), "{text}");
        assert!(text.contains("| Figure | `cms-server` | broadcaster |"), "{text}");
        assert!(text.contains("| deliveries per server CPU-second | 100000 | 125000 |"), "{text}");
        assert!(text.contains("| memory per watcher | 12.0 KiB | 3.0 KiB |"), "{text}");
        assert!(text.contains("| delivery delay p50 / p99 / max | 20.0 ms / 80.0 ms / 90.0 ms |"), "{text}");
        assert!(text.contains("`cms-server` / broadcaster: **0.80×**"), "{text}");
        assert!(text.contains("(700 bytes each)"), "{text}");
    }
}
