//! One HTTP/1.1 exchange over a bare TCP connection, for requests that an HTTP
//! client library would refuse or retry, such as an oversized body that the
//! server answers before reading it all.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one raw exchange may take.
const RAW_TIMEOUT: Duration = Duration::from_secs(20);

/// The parts of a raw reply that tests look at.
#[derive(Debug, Clone)]
pub struct RawReply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Sends `head` (request line and headers, without the blank line) plus
/// `Content-Length` and `Connection: close`, then `body`, while reading the
/// reply concurrently; the body may be cut short by the server.
pub async fn exchange(addr: SocketAddr, head: &str, body: Vec<u8>) -> RawReply {
    tokio::time::timeout(RAW_TIMEOUT, exchange_unbounded(addr, head, body))
        .await
        .unwrap_or_else(|_| panic!("a raw exchange with {addr} took longer than {RAW_TIMEOUT:?}"))
}

async fn exchange_unbounded(addr: SocketAddr, head: &str, body: Vec<u8>) -> RawReply {
    let stream =
        TcpStream::connect(addr).await.unwrap_or_else(|err| panic!("cannot connect to {addr}: {err}"));
    let (mut reader, mut writer) = stream.into_split();
    let request = format!("{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    let writing = tokio::spawn(async move {
        // The server may answer and close before it has read the whole body,
        // so a failed write is expected and not an error of the test.
        if writer.write_all(request.as_bytes()).await.is_ok() {
            let _ = writer.write_all(&body).await;
        }
        writer
    });
    let mut received = Vec::new();
    let mut chunk = [0_u8; 16 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) => break,
            Ok(read) => {
                received.extend_from_slice(&chunk[..read]);
                if complete(&received) {
                    break;
                }
            }
            // A reset after the reply arrived still leaves the reply.
            Err(_) if complete(&received) => break,
            Err(err) => panic!("reading the reply from {addr} failed after {} bytes: {err}", received.len()),
        }
    }
    writing.abort();
    let text = String::from_utf8_lossy(&received).into_owned();
    let (head, body) =
        text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("a reply without a head: {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a reply without a status: {head:?}"));
    RawReply { status, head: head.to_string(), body: body.to_string() }
}

/// Whether `received` holds a whole reply with a `Content-Length` body.
fn complete(received: &[u8]) -> bool {
    let Some(end) = received.windows(4).position(|window| window == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok());
    match length {
        Some(length) => received.len() >= end + 4 + length,
        None => false,
    }
}
