//! A real S3 API for tests of the S3 backup store: moto's server
//! (`moto_server`, named by `CMS_TEST_MOTO`, installed by `.ci/moto-server`)
//! on a free loopback port, with one empty bucket, killed when dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::api::REQUEST_TIMEOUT;

/// How long `moto_server` may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The environment variable that names the `moto_server` executable.
const BINARY_VARIABLE: &str = "CMS_TEST_MOTO";

/// A running `moto_server` with the bucket [`MotoServer::bucket`].
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    addr: SocketAddr,
}

impl MotoServer {
    /// Starts `$CMS_TEST_MOTO` on a free loopback port, waits until it
    /// answers and creates the bucket. Fails the test, never skips it, when
    /// the variable is unset.
    #[allow(clippy::disallowed_methods)] // The tests run the S3 API they talk to as a process.
    pub async fn start() -> MotoServer {
        let binary = std::env::var_os(BINARY_VARIABLE).unwrap_or_else(|| {
            panic!(
                "this test needs moto's S3 server: run `.ci/moto-server` and set {BINARY_VARIABLE} to the \
                 path it prints (`cargo xtask e2e` and `.ci/run` do both)"
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
        let mut moto = MotoServer { child, addr };
        let began = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("moto_server exited before answering: {status}");
            }
            assert!(
                began.elapsed() < START_TIMEOUT,
                "moto_server did not answer on {addr} in {START_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // moto takes an unsigned request that creates a bucket.
        let http = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build().unwrap();
        let created = http.put(format!("{}/{}", moto.endpoint(), moto.bucket())).send().await.unwrap();
        assert!(created.status().is_success(), "creating the bucket: {}", created.status());
        moto
    }

    /// The bucket the server holds.
    pub fn bucket(&self) -> &'static str {
        "backups"
    }

    /// The S3 endpoint, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `AWS_*` variables that point an S3 client at this server.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ACCESS_KEY_ID", "testing".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "moto-secret-7f3a".to_string()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
    }

    /// A client of the bucket, signing as the server's store does.
    fn client(&self) -> AmazonS3 {
        let mut builder = AmazonS3Builder::new().with_bucket_name(self.bucket());
        for (name, value) in self.env() {
            builder = builder.with_config(name.to_ascii_lowercase().parse().unwrap(), value);
        }
        builder.build().unwrap()
    }

    /// The names of every object in the bucket, sorted.
    pub async fn object_names(&self) -> Vec<String> {
        let objects: Vec<_> = self.client().list(None).try_collect().await.unwrap();
        let mut names: Vec<String> = objects.into_iter().map(|object| object.location.to_string()).collect();
        names.sort();
        names
    }

    /// The bytes of the object `name`.
    pub async fn get_object(&self, name: &str) -> Vec<u8> {
        let object =
            self.client().get(&Path::from(name)).await.unwrap_or_else(|err| panic!("reading {name}: {err}"));
        object.bytes().await.unwrap().to_vec()
    }

    /// Writes the object `name`, replacing any.
    pub async fn put_object(&self, name: &str, bytes: Vec<u8>) {
        let client = self.client();
        client
            .put(&Path::from(name), bytes.into())
            .await
            .unwrap_or_else(|err| panic!("writing {name}: {err}"));
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
