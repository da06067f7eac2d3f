//! A reader for the tenant watch stream (server-sent events).

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::Method;
use serde_json::Value;

use crate::api::Api;

/// How long the stream may take to open.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// One server-sent event: its `id`, its `data` parsed as JSON, and its comment lines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frame {
    pub id: Option<u64>,
    pub data: Option<Value>,
    pub comments: Vec<String>,
}

impl Frame {
    /// `ADDED`, `MODIFIED` or `DELETED` for an event frame.
    pub fn event_type(&self) -> Option<&str> {
        self.data.as_ref()?.get("type")?.as_str()
    }

    /// The `object` of an event frame.
    pub fn object(&self) -> &Value {
        self.data.as_ref().and_then(|data| data.get("object")).unwrap_or(&Value::Null)
    }

    /// The `metadata.name` of the event's object.
    pub fn name(&self) -> Option<&str> {
        self.object()["metadata"]["name"].as_str()
    }

    /// The revision a `BOOKMARK` frame carries (its `id`, which its
    /// object's `metadata.resourceVersion` repeats as a string); `None` for
    /// any other frame.
    pub fn bookmark(&self) -> Option<u64> {
        if self.event_type() != Some("BOOKMARK") {
            return None;
        }
        let version = self.object()["metadata"]["resourceVersion"].as_str()?.parse().ok();
        assert_eq!(version, self.id, "a bookmark's resourceVersion is its id: {self:?}");
        version
    }

    /// Whether the frame holds only comments, such as `: heartbeat`.
    pub fn is_comment(&self) -> bool {
        self.data.is_none() && self.id.is_none()
    }
}

/// Why a watch stream did not open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFailure {
    /// The reply's status, or 0 when there was no reply.
    pub status: u16,
    pub message: String,
}

impl fmt::Display for OpenFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// An open watch stream.
pub struct Watch {
    stream: ByteStream,
    buffer: Vec<u8>,
    /// Every comment seen so far, in order, including those skipped by
    /// [`Watch::next_event`].
    pub comments: Vec<String>,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("buffered", &self.buffer.len())
            .field("comments", &self.comments)
            .finish()
    }
}

impl Watch {
    /// Opens `GET /api/v1/tenants?watch=true` plus `extra_query` (such as
    /// `&resourceVersion=7`), with extra headers, and checks that it streams.
    pub async fn open(api: &Api, extra_query: &str, headers: &[(&str, &str)]) -> Watch {
        Watch::try_open(api, extra_query, headers).await.unwrap_or_else(|failure| panic!("{failure}"))
    }

    /// Like [`Watch::open`], but returns what went wrong instead of failing
    /// the test, for callers that expect the server to go away: the status
    /// (0 when the request failed) and a message.
    pub async fn try_open(
        api: &Api,
        extra_query: &str,
        headers: &[(&str, &str)],
    ) -> Result<Watch, OpenFailure> {
        Watch::try_open_at(api, &format!("/api/v1/tenants?watch=true{extra_query}"), headers).await
    }

    /// Opens the watch at `path` (with its query, such as
    /// `/api/v1/tenants/acme?watch=true`), with extra headers, and checks
    /// that it streams.
    pub async fn open_at(api: &Api, path: &str, headers: &[(&str, &str)]) -> Watch {
        Watch::try_open_at(api, path, headers).await.unwrap_or_else(|failure| panic!("{failure}"))
    }

    /// Like [`Watch::open_at`], but returns what went wrong instead of
    /// failing the test.
    pub async fn try_open_at(api: &Api, path: &str, headers: &[(&str, &str)]) -> Result<Watch, OpenFailure> {
        let mut request = api.stream_request(Method::GET, path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let failed =
            |status: u16, message: String| OpenFailure { status, message: format!("GET {path}: {message}") };
        let response = match tokio::time::timeout(OPEN_TIMEOUT, request.send()).await {
            Err(_) => return Err(failed(0, format!("no answer within {OPEN_TIMEOUT:?}"))),
            Ok(Err(err)) => return Err(failed(0, format!("failed: {err:?}"))),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .unwrap_or_default();
        if status != 200 {
            let body = tokio::time::timeout(OPEN_TIMEOUT, response.text()).await;
            return Err(failed(status, format!("expected status 200, got {status}: {body:?}")));
        }
        if !content_type.starts_with("text/event-stream") {
            return Err(failed(status, format!("expected text/event-stream, got {content_type:?}")));
        }
        Ok(Watch { stream: Box::pin(response.bytes_stream()), buffer: Vec::new(), comments: Vec::new() })
    }

    /// The next frame, or `None` when the server ended the stream. Waiting
    /// longer than `within` fails the test.
    pub async fn next_frame(&mut self, within: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(frame) = self.take_frame() {
                self.comments.extend(frame.comments.iter().cloned());
                return Some(frame);
            }
            let chunk = tokio::time::timeout_at(deadline, self.stream.next()).await.unwrap_or_else(|_| {
                panic!("no complete watch frame within {within:?}; buffered {:?}", self.text())
            });
            match chunk {
                Some(Ok(bytes)) => self.buffer.extend(bytes.iter().filter(|&&byte| byte != b'\r')),
                Some(Err(_)) | None => return None,
            }
        }
    }

    /// The next frame that is not only comments; the stream ending fails the test.
    pub async fn next_event(&mut self, within: Duration) -> Frame {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let frame =
                self.next_frame(left).await.expect("the watch stream ended while an event was expected");
            if !frame.is_comment() {
                return frame;
            }
        }
    }

    /// Reads the initial burst: `ADDED` frames up to the frame that carries
    /// only an `id`. Returns the added objects' names and that id.
    pub async fn initial_burst(&mut self, within: Duration) -> (Vec<String>, u64) {
        let mut names = Vec::new();
        loop {
            let frame = self.next_event(within).await;
            match (&frame.data, frame.id) {
                (None, Some(id)) => return (names, id),
                (Some(_), None) => {
                    assert_eq!(
                        frame.event_type(),
                        Some("ADDED"),
                        "the initial burst holds only ADDED: {frame:?}"
                    );
                    names.push(frame.name().expect("an ADDED frame names its tenant").to_string());
                }
                _ => panic!("an initial-burst frame carries data without an id, or an id alone: {frame:?}"),
            }
        }
    }

    /// Waits until the server ends the stream, failing the test after `within`.
    pub async fn expect_end(&mut self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if self.next_frame(left).await.is_none() {
                return;
            }
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer).into_owned()
    }

    /// Splits one complete event (ended by a blank line) off the buffer.
    fn take_frame(&mut self) -> Option<Frame> {
        loop {
            let end = self.buffer.windows(2).position(|pair| pair == b"\n\n")?;
            let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let frame = parse_block(&String::from_utf8_lossy(&block));
            if frame != Frame::default() {
                return Some(frame);
            }
        }
    }
}

fn parse_block(block: &str) -> Frame {
    let mut frame = Frame::default();
    let mut data: Option<String> = None;
    for line in block.lines().filter(|line| !line.is_empty()) {
        if let Some(comment) = line.strip_prefix(':') {
            frame.comments.push(comment.trim().to_string());
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            "id" => {
                frame.id =
                    Some(value.parse().unwrap_or_else(|_| panic!("a watch id is an integer: {line:?}")))
            }
            _ => {}
        }
    }
    frame.data = data.map(|data| {
        serde_json::from_str(&data).unwrap_or_else(|err| panic!("watch data is not JSON ({err}): {data:?}"))
    });
    frame
}

#[cfg(test)]
mod tests {
    use super::parse_block;
    use serde_json::json;

    #[test]
    fn blocks_are_parsed() {
        let frame =
            parse_block("data: {\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\nid: 43\n\n");
        assert_eq!(frame.id, Some(43));
        assert_eq!(frame.event_type(), Some("ADDED"));
        assert_eq!(frame.name(), Some("a"));
        assert!(!frame.is_comment());
        let frame = parse_block(": heartbeat\n\n");
        assert_eq!(frame.comments, ["heartbeat"]);
        assert!(frame.is_comment());
        let frame = parse_block("id: 42\n\n");
        assert_eq!((frame.id, frame.data), (Some(42), None));
        let frame = parse_block("data: [1,\ndata: 2]\n\n");
        assert_eq!(frame.data, Some(json!([1, 2])));
    }
}
