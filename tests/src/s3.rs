//! A real S3 API for tests of the S3 backup store: moto's server
//! (`moto_server`, named by `CMS_TEST_MOTO`, installed by `.ci/moto-server`)
//! on a free loopback port, with one empty bucket, killed when dropped.

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::api::REQUEST_TIMEOUT;
use crate::loopback::LoopbackServer;

/// A running `moto_server` with the bucket [`MotoServer::bucket`].
#[derive(Debug)]
pub struct MotoServer {
    server: LoopbackServer,
}

impl MotoServer {
    /// Starts `$CMS_TEST_MOTO` on a free loopback port, waits until it
    /// answers and creates the bucket. Fails the test, never skips it, when
    /// the variable is unset.
    pub async fn start() -> MotoServer {
        let server = LoopbackServer::start("CMS_TEST_MOTO", ".ci/moto-server", "moto's S3 server").await;
        let moto = MotoServer { server };
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
        self.server.url()
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
