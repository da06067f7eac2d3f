//! A closed-loop HTTP/1.1 load generator: N keep-alive connections, each
//! sending one request and reading its reply before sending the next.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one reply may take before the run is abandoned.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// What one connection sends, and how it learns from the replies.
pub(crate) trait Workload: Send {
    /// The next raw request, or `None` when this connection is done.
    fn request(&mut self) -> Option<Vec<u8>>;
    /// Looks at a reply; an error aborts the run.
    fn reply(&mut self, status: u16, body: &[u8]) -> Result<()>;
}

/// Makes the workload of connection `index`.
pub(crate) type WorkloadFactory = Arc<dyn Fn(usize) -> Box<dyn Workload> + Send + Sync>;

/// How a run is shaped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) connections: usize,
    /// Replies completed before this much time has passed are not counted.
    pub(crate) warmup: Duration,
    /// Counting stops after warm-up plus this much time.
    pub(crate) measure: Duration,
}

/// What a run measured, over the counted period only.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) requests: u64,
    /// Replies with a status outside 2xx.
    pub(crate) failures: u64,
    pub(crate) elapsed: Duration,
    /// Per-request latencies in microseconds, sorted.
    pub(crate) latencies: Vec<u32>,
}

impl Outcome {
    pub(crate) fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    /// The latency at quantile `q` (0 to 1), in microseconds.
    pub(crate) fn latency(&self, q: f64) -> u32 {
        if self.latencies.is_empty() {
            return 0;
        }
        let index = ((self.latencies.len() - 1) as f64 * q).round() as usize;
        self.latencies[index]
    }
}

/// Runs the workload over `shape.connections` connections to `addr`.
pub(crate) async fn run(addr: SocketAddr, shape: Shape, factory: WorkloadFactory) -> Result<Outcome> {
    let started = Instant::now();
    let count_from = started + shape.warmup;
    let stop_at = count_from + shape.measure;
    let mut tasks = Vec::new();
    for index in 0..shape.connections {
        let workload = factory(index);
        tasks.push(tokio::spawn(connection(addr, workload, count_from, stop_at)));
    }
    let mut outcome = Outcome::default();
    for task in tasks {
        let counted = task.await.context("a load connection panicked")??;
        outcome.requests += counted.requests;
        outcome.failures += counted.failures;
        outcome.latencies.extend(counted.latencies);
    }
    outcome.elapsed = Instant::now().min(stop_at).saturating_duration_since(count_from);
    outcome.latencies.sort_unstable();
    Ok(outcome)
}

async fn connection(
    addr: SocketAddr,
    mut workload: Box<dyn Workload>,
    count_from: Instant,
    stop_at: Instant,
) -> Result<Outcome> {
    let mut stream = TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
    stream.set_nodelay(true)?;
    let mut buffer = Vec::with_capacity(64 * 1024);
    let mut outcome = Outcome::default();
    while Instant::now() < stop_at {
        let Some(request) = workload.request() else { break };
        let sent = Instant::now();
        stream.write_all(&request).await.context("sending a request")?;
        let (status, body) = tokio::time::timeout(REPLY_TIMEOUT, read_reply(&mut stream, &mut buffer))
            .await
            .with_context(|| format!("no reply within {REPLY_TIMEOUT:?}"))??;
        let done = Instant::now();
        workload.reply(status, &body)?;
        if done >= count_from && done <= stop_at {
            outcome.requests += 1;
            if !(200..300).contains(&status) {
                outcome.failures += 1;
            }
            let micros = done.duration_since(sent).as_micros();
            outcome.latencies.push(u32::try_from(micros).unwrap_or(u32::MAX));
        }
    }
    Ok(outcome)
}

/// Reads one reply; bytes of the next reply stay in `buffer`.
async fn read_reply(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<(u16, Vec<u8>)> {
    let head_end = loop {
        if let Some(end) = find(buffer, b"\r\n\r\n") {
            break end;
        }
        fill(stream, buffer).await?;
    };
    let head = std::str::from_utf8(&buffer[..head_end]).context("a reply head that is not text")?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("a reply without a status: {head:?}"))?;
    let mut length = None;
    let mut chunked = false;
    for line in head.lines().skip(1) {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().context("a bad content-length")?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body_start = head_end + 4;
    let body = match (length, chunked) {
        (_, true) => read_chunked(stream, buffer, body_start).await?,
        (Some(length), false) => {
            while buffer.len() < body_start + length {
                fill(stream, buffer).await?;
            }
            let body = buffer[body_start..body_start + length].to_vec();
            buffer.drain(..body_start + length);
            body
        }
        (None, false) => {
            buffer.drain(..body_start);
            Vec::new()
        }
    };
    Ok((status, body))
}

/// Decodes a chunked body that starts at `start` in `buffer`.
async fn read_chunked(stream: &mut TcpStream, buffer: &mut Vec<u8>, start: usize) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut at = start;
    loop {
        let line_end = loop {
            if let Some(end) = find(&buffer[at..], b"\r\n") {
                break at + end;
            }
            fill(stream, buffer).await?;
        };
        let size_text =
            std::str::from_utf8(&buffer[at..line_end]).context("a chunk size that is not text")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .with_context(|| format!("a bad chunk size {size_text:?}"))?;
        let data_start = line_end + 2;
        // Every chunk, the last one of size zero included, ends with CRLF.
        while buffer.len() < data_start + size + 2 {
            fill(stream, buffer).await?;
        }
        body.extend_from_slice(&buffer[data_start..data_start + size]);
        at = data_start + size + 2;
        if size == 0 {
            buffer.drain(..at);
            return Ok(body);
        }
    }
}

async fn fill(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<()> {
    let mut chunk = [0_u8; 16 * 1024];
    let read = stream.read(&mut chunk).await.context("reading a reply")?;
    if read == 0 {
        bail!("the server closed the connection");
    }
    buffer.extend_from_slice(&chunk[..read]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Where requests go: an address, and headers every request carries (such
/// as `Authorization`), each line ending in CRLF.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) addr: SocketAddr,
    headers: String,
}

impl Target {
    /// A target whose requests carry no extra headers.
    pub(crate) fn new(addr: SocketAddr) -> Target {
        Target { addr, headers: String::new() }
    }

    /// This target with `Authorization: Bearer <token>` on every request.
    pub(crate) fn with_bearer(&self, token: &str) -> Target {
        Target { addr: self.addr, headers: format!("{}Authorization: Bearer {token}\r\n", self.headers) }
    }

    /// This target with the web console's session cookie on every request.
    pub(crate) fn with_session_cookie(&self, token: &str) -> Target {
        Target { addr: self.addr, headers: format!("{}Cookie: cms_session={token}\r\n", self.headers) }
    }

    /// A `GET` request.
    pub(crate) fn get(&self, path: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nHost: {}\r\n{}\r\n", self.addr, self.headers).into_bytes()
    }

    /// A request with a JSON body.
    pub(crate) fn with_json(&self, method: &str, path: &str, body: &[u8]) -> Vec<u8> {
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            self.headers,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        request
    }
}

/// Sends one request on a fresh connection and returns the reply's status and body.
pub(crate) async fn exchange(addr: SocketAddr, request: &[u8]) -> Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
    stream.write_all(request).await.context("sending a request")?;
    let mut buffer = Vec::new();
    tokio::time::timeout(REPLY_TIMEOUT, read_reply(&mut stream, &mut buffer))
        .await
        .with_context(|| format!("no reply within {REPLY_TIMEOUT:?}"))?
}
