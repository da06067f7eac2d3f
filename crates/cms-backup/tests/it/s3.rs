//! `S3Store` against a real S3 API: a `moto_server` process on a loopback
//! port (`CMS_TEST_MOTO`, installed by `.ci/moto-server`), one per test.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cms_backup::{BackupError, BackupStore, ByteStream, S3Store};
use futures_util::StreamExt;

use crate::{collect, failing, stream_of};

/// How long `moto_server` may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `moto_server` with one empty bucket, killed when dropped.
struct Moto {
    child: Child,
    addr: SocketAddr,
    bucket: &'static str,
}

impl Moto {
    #[allow(clippy::disallowed_methods)] // The tests run the S3 API they talk to as a process.
    fn start() -> Moto {
        let binary = std::env::var_os("CMS_TEST_MOTO").unwrap_or_else(|| {
            panic!(
                "the S3 store's tests need moto's S3 server: run `.ci/moto-server` and set CMS_TEST_MOTO \
                 to the path it prints (`cargo xtask test` does both)"
            )
        });
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(&binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", binary.to_string_lossy()));
        let mut moto = Moto { child, addr, bucket: "backups" };
        let began = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("moto_server exited before answering: {status}");
            }
            assert!(
                began.elapsed() < START_TIMEOUT,
                "moto_server did not answer on {addr} in {START_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let (status, body) = moto.request("PUT", &format!("/{}", moto.bucket));
        assert_eq!(status, 200, "creating the bucket: {body}");
        moto
    }

    /// The store `s3://backups/<prefix>` on this server.
    fn store(&self, prefix: &str) -> S3Store {
        let env = [
            ("AWS_ENDPOINT_URL", format!("http://{}", self.addr)),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ACCESS_KEY_ID", "testing".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
        ];
        let env = env.into_iter().map(|(name, value)| (name.to_string(), value));
        S3Store::new(&format!("s3://{}/{prefix}", self.bucket), env).unwrap()
    }

    /// A plain request to the S3 API (moto takes unsigned ones): the status
    /// and the body.
    fn request(&self, method: &str, target: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let request = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.addr
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
        let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_string();
        (status, body)
    }

    /// The names of every object in the bucket, as S3 lists them.
    fn object_names(&self) -> Vec<String> {
        let (status, body) = self.request("GET", &format!("/{}", self.bucket));
        assert_eq!(status, 200, "{body}");
        elements(&body, "Key")
    }

    /// The entity tags of every object in the bucket; a multipart upload's
    /// ends in `-<number of parts>`.
    fn etags(&self) -> Vec<String> {
        let (status, body) = self.request("GET", &format!("/{}", self.bucket));
        assert_eq!(status, 200, "{body}");
        elements(&body, "ETag")
    }

    /// The keys of the bucket's multipart uploads still under way.
    fn uploads(&self) -> Vec<String> {
        let (status, body) = self.request("GET", &format!("/{}?uploads", self.bucket));
        assert_eq!(status, 200, "{body}");
        elements(&body, "Key")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The texts of every `<name>` element of `xml`.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    xml.split(&open)
        .skip(1)
        .filter_map(|rest| rest.split_once(&close).map(|(text, _)| text.to_string()))
        .collect()
}

/// `len` bytes of a pattern that is not periodic in any part size.
fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ (i / 65_521) as u8).collect()
}

/// `bytes` in chunks of `chunk` bytes, as the encryption gives them.
fn chunked(bytes: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    bytes.chunks(chunk).map(<[u8]>::to_vec).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_object_goes_up_in_parts_and_comes_back_whole() {
    let moto = Moto::start();
    let store = moto.store("cms/prod");
    let snapshot = data(20 * 1024 * 1024 + 12_345);
    let written = store.put("acme/1.etcd", stream_of(chunked(&snapshot, 1024 * 1024 + 40))).await.unwrap();
    assert_eq!(written, snapshot.len() as u64);
    assert_eq!(moto.object_names(), ["cms/prod/acme/1.etcd"]);
    let etags = moto.etags();
    assert!(etags.len() == 1 && etags[0].trim_matches('"').ends_with("-5"), "five parts: {etags:?}");
    assert!(moto.uploads().is_empty(), "uploads left under way: {:?}", moto.uploads());
    let read = collect(store.get("acme/1.etcd").await.unwrap()).await.unwrap();
    assert!(read == snapshot, "the object read back differs ({} bytes read)", read.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn objects_are_listed_by_prefix_sorted_and_deleted() {
    let moto = Moto::start();
    let store = moto.store("cms");
    for key in ["acme/2.json", "acme2/1.json", "acme/1.json", "acme/1.etcd", "acme/10.json"] {
        assert_eq!(store.put(key, stream_of(vec![b"{}".to_vec()])).await.unwrap(), 2);
    }
    // Another store's objects in the same bucket are not this one's.
    moto.store("other").put("acme/9.json", stream_of(vec![b"{}".to_vec()])).await.unwrap();
    assert_eq!(
        store.list("acme/").await.unwrap(),
        ["acme/1.etcd", "acme/1.json", "acme/10.json", "acme/2.json"]
    );
    assert_eq!(store.list("acme/1").await.unwrap(), ["acme/1.etcd", "acme/1.json", "acme/10.json"]);
    assert_eq!(
        store.list("acme").await.unwrap(),
        ["acme/1.etcd", "acme/1.json", "acme/10.json", "acme/2.json", "acme2/1.json"]
    );
    assert_eq!(store.list("").await.unwrap().len(), 5);
    assert!(store.list("nobody/").await.unwrap().is_empty());
    assert_eq!(collect(store.get("acme/1.json").await.unwrap()).await.unwrap(), b"{}");

    store.delete("acme/1.json").await.unwrap();
    store.delete("acme/1.json").await.unwrap();
    assert!(matches!(store.get("acme/1.json").await, Err(BackupError::NotFound(_))));
    assert_eq!(store.list("acme/1").await.unwrap(), ["acme/1.etcd", "acme/10.json"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_write_leaves_nothing_and_keeps_the_old_object() {
    let moto = Moto::start();
    let store = moto.store("cms");
    // Failing within the first part: nothing was sent.
    let early = store.put("acme/1.etcd", failing(vec![b"half".to_vec()])).await;
    assert!(matches!(early, Err(BackupError::Malformed(_))), "{early:?}");
    // Failing after parts went up: the multipart upload is aborted.
    let late = store.put("acme/1.etcd", failing(chunked(&data(12 * 1024 * 1024), 1024 * 1024))).await;
    assert!(matches!(late, Err(BackupError::Malformed(_))), "{late:?}");
    assert!(matches!(store.get("acme/1.etcd").await, Err(BackupError::NotFound(_))));
    assert!(store.list("").await.unwrap().is_empty());
    assert!(moto.object_names().is_empty(), "left behind: {:?}", moto.object_names());
    assert!(moto.uploads().is_empty(), "uploads left under way: {:?}", moto.uploads());

    let old = data(6 * 1024 * 1024);
    store.put("acme/1.etcd", stream_of(chunked(&old, 1024 * 1024))).await.unwrap();
    assert!(store.put("acme/1.etcd", failing(chunked(&data(11 * 1024 * 1024), 1024 * 1024))).await.is_err());
    assert!(
        collect(store.get("acme/1.etcd").await.unwrap()).await.unwrap() == old,
        "the old object is whole"
    );
    assert!(moto.uploads().is_empty(), "uploads left under way: {:?}", moto.uploads());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_abandoned_write_is_aborted() {
    let moto = Moto::start();
    let store = moto.store("cms");
    // Parts go up, then the source stalls and the writer goes away, as when
    // the request that wrote it is cancelled.
    let chunks =
        chunked(&data(12 * 1024 * 1024), 1024 * 1024).into_iter().map(|chunk| Ok(Bytes::from(chunk)));
    let stalled: ByteStream =
        Box::pin(futures_util::stream::iter(chunks).chain(futures_util::stream::pending()));
    let put = tokio::time::timeout(Duration::from_secs(3), store.put("acme/1.etcd", stalled)).await;
    assert!(put.is_err(), "the write cannot end: {put:?}");
    let began = Instant::now();
    while !moto.uploads().is_empty() {
        assert!(began.elapsed() < Duration::from_secs(20), "uploads left under way: {:?}", moto.uploads());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(moto.object_names().is_empty(), "left behind: {:?}", moto.object_names());
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_objects_and_bad_keys_are_refused() {
    let moto = Moto::start();
    let store = moto.store("");
    assert!(
        matches!(store.get("acme/none.etcd").await, Err(BackupError::NotFound(key)) if key == "acme/none.etcd")
    );
    store.delete("acme/none.etcd").await.unwrap();
    for key in ["../x", "acme//1", "/abs", "acme/a b", "acme/.x.partial"] {
        assert!(matches!(store.get(key).await, Err(BackupError::InvalidKey(_))), "{key}");
        assert!(matches!(store.put(key, stream_of(vec![])).await, Err(BackupError::InvalidKey(_))), "{key}");
    }
    // An empty object is an object.
    assert_eq!(store.put("acme/empty", stream_of(vec![])).await.unwrap(), 0);
    assert_eq!(collect(store.get("acme/empty").await.unwrap()).await.unwrap(), b"");
    assert_eq!(moto.object_names(), ["acme/empty"]);
}

#[test]
fn urls_of_other_schemes_are_refused_without_echoing_credentials() {
    for url in ["file:///srv/backups", "https://user:secret@example.com/b", "s3://", "s3://a:secret@b/x"] {
        let message = S3Store::new(url, []).unwrap_err().to_string();
        assert!(!message.contains("secret"), "{message}");
    }
}
