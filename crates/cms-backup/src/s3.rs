//! [`S3Store`]: a [`BackupStore`] in a bucket of an S3-compatible object
//! store, through the `object_store` crate.
//!
//! A key is an object name under the store's prefix. Objects are written
//! whole or not at all as S3 makes them: an object smaller than one part is
//! one `PutObject`; a larger one is a multipart upload of [`PART_SIZE`]
//! parts, at most [`PARTS_IN_FLIGHT`] of them sent at once, completed at the
//! end of the stream and aborted when the stream fails, so that neither
//! half an object nor its parts stay behind. Reads are streamed.

use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use crate::error::BackupError;
use crate::store::{BackupStore, ByteStream, check_key};

/// The size of each part of a multipart upload but the last; S3 takes no
/// smaller part. An object up to this size is written with one request.
const PART_SIZE: usize = 5 * 1024 * 1024;

/// How many parts of one upload may be on their way at once: with the part
/// being filled, an upload holds at most this many parts and one more.
const PARTS_IN_FLIGHT: usize = 2;

/// A [`BackupStore`] in an S3-compatible bucket, named by a URL
/// `s3://bucket/prefix`, with the credentials, region and endpoint of the
/// standard `AWS_*` environment variables (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
/// `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, ...).
#[derive(Debug, Clone)]
pub struct S3Store {
    objects: Arc<AmazonS3>,
    bucket: String,
    /// The objects' common prefix, without slashes at its ends; may be empty.
    prefix: String,
}

impl S3Store {
    /// The store that `url` names, configured from the process's `AWS_*`
    /// environment variables.
    pub fn from_env(url: &str) -> Result<S3Store, BackupError> {
        let env = std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)));
        S3Store::new(url, env)
    }

    /// The store that `url` (`s3://bucket` or `s3://bucket/prefix`) names,
    /// configured from the `AWS_*` variables among `env`; other names are
    /// ignored. Errors name the URL's scheme or bucket, never a credential.
    pub fn new(url: &str, env: impl IntoIterator<Item = (String, String)>) -> Result<S3Store, BackupError> {
        let (bucket, prefix) = parse_url(url)?;
        let mut builder = AmazonS3Builder::new();
        for (name, value) in env {
            if !name.starts_with("AWS_") {
                continue;
            }
            if let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(key, value);
            }
        }
        let objects = builder
            .with_bucket_name(bucket.clone())
            .build()
            .map_err(|err| invalid(format!("cannot configure the S3 store of bucket {bucket:?}: {err}")))?;
        Ok(S3Store { objects: Arc::new(objects), bucket, prefix })
    }

    /// The bucket the objects live in.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The prefix of every object's name in the bucket, without slashes at
    /// its ends; empty when the objects live at the bucket's top.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The object name of `key` in the bucket, refusing keys that are not
    /// plain.
    fn path(&self, key: &str) -> Result<Path, BackupError> {
        check_key(key)?;
        Ok(self.full(key))
    }

    /// `name` under the store's prefix.
    fn full(&self, name: &str) -> Path {
        match (self.prefix.is_empty(), name.is_empty()) {
            (true, _) => Path::from(name),
            (false, true) => Path::from(self.prefix.as_str()),
            (false, false) => Path::from(format!("{}/{name}", self.prefix)),
        }
    }

    /// The key of an object name that the listing gave, or `None` for one
    /// outside the prefix.
    fn key_of<'a>(&self, location: &'a Path) -> Option<&'a str> {
        let name = location.as_ref();
        match self.prefix.is_empty() {
            true => Some(name),
            false => name.strip_prefix(self.prefix.as_str())?.strip_prefix('/'),
        }
    }
}

#[async_trait]
impl BackupStore for S3Store {
    fn locate(&self, key: &str) -> String {
        format!("s3://{}/{}", self.bucket, self.full(key))
    }

    async fn put(&self, key: &str, mut data: ByteStream) -> Result<u64, BackupError> {
        let path = self.path(key)?;
        // The first part's worth is gathered before anything is sent: an
        // object no larger is one request, and a stream that fails this
        // early leaves no upload to abort.
        let mut head = Vec::new();
        let mut size = 0usize;
        while size < PART_SIZE {
            let Some(chunk) = data.next().await else {
                self.objects.put(&path, PutPayload::from_iter(head)).await.map_err(store_error)?;
                return Ok(size as u64);
            };
            let chunk = chunk?;
            size += chunk.len();
            head.push(chunk);
        }
        let upload = self.objects.put_multipart(&path).await.map_err(store_error)?;
        let mut upload = Upload(Some(WriteMultipart::new_with_chunk_size(upload, PART_SIZE)));
        let mut size = 0u64;
        let sent = async {
            let mut chunks = futures_util::stream::iter(head.into_iter().map(Ok)).chain(&mut data);
            while let Some(chunk) = chunks.next().await {
                let chunk: Bytes = chunk?;
                size += chunk.len() as u64;
                let writer = upload.writer();
                writer.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(store_error)?;
                writer.put(chunk);
            }
            Ok::<(), BackupError>(())
        }
        .await;
        match sent {
            Ok(()) => {
                // `finish` completes the upload, or aborts it when it cannot.
                upload.take().finish().await.map_err(store_error)?;
                Ok(size)
            }
            Err(err) => {
                if let Err(abort) = upload.take().abort().await {
                    tracing::warn!(key, error = %abort, "could not abort the failed upload of a backup object");
                }
                Err(err)
            }
        }
    }

    async fn get(&self, key: &str) -> Result<ByteStream, BackupError> {
        let path = self.path(key)?;
        match self.objects.get(&path).await {
            Ok(object) => Ok(Box::pin(object.into_stream().map(|chunk| chunk.map_err(store_error)))),
            Err(object_store::Error::NotFound { .. }) => Err(BackupError::NotFound(key.to_string())),
            Err(err) => Err(store_error(err)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, BackupError> {
        // S3 lists by whole path segments: list the folder the prefix names,
        // then keep the keys that start with the prefix.
        let folder = prefix.rsplit_once('/').map_or("", |(folder, _)| folder);
        let mut listing = self.objects.list(Some(&self.full(folder)));
        let mut keys = Vec::new();
        while let Some(object) = listing.next().await {
            let object = object.map_err(store_error)?;
            if let Some(key) = self.key_of(&object.location)
                && key.starts_with(prefix)
            {
                keys.push(key.to_string());
            }
        }
        keys.sort();
        Ok(keys)
    }

    async fn delete(&self, key: &str) -> Result<(), BackupError> {
        match self.objects.delete(&self.path(key)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(err) => Err(store_error(err)),
        }
    }
}

/// A multipart upload under way, aborted in the background when dropped
/// before it was finished or aborted (the request that wrote it went away).
struct Upload(Option<WriteMultipart>);

impl Upload {
    fn writer(&mut self) -> &mut WriteMultipart {
        self.0.as_mut().expect("the upload is under way until taken")
    }

    fn take(&mut self) -> WriteMultipart {
        self.0.take().expect("the upload is taken once")
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        let Some(writer) = self.0.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            if let Err(err) = writer.abort().await {
                tracing::warn!(error = %err, "could not abort an abandoned upload of a backup object");
            }
        });
    }
}

/// The bucket and the prefix of `s3://bucket/prefix`.
fn parse_url(url: &str) -> Result<(String, String), BackupError> {
    let Some(rest) = url.strip_prefix("s3://") else {
        let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
        return Err(invalid(format!(
            "an S3 store's URL is s3://bucket/prefix, not one of scheme {scheme:?}"
        )));
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let prefix = prefix.trim_matches('/');
    if bucket.is_empty() || bucket.contains(['@', ':', '?', '#']) {
        return Err(invalid("an S3 store's URL is s3://bucket/prefix, with a plain bucket name".to_string()));
    }
    if !prefix.is_empty() {
        check_key(prefix).map_err(|_| {
            invalid(format!("the prefix {prefix:?} of an S3 store is not a path of plain segments"))
        })?;
    }
    Ok((bucket.to_string(), prefix.to_string()))
}

/// A configuration that cannot name a store.
fn invalid(message: String) -> BackupError {
    BackupError::Io(io::Error::new(io::ErrorKind::InvalidInput, message))
}

/// A failure of the object store, as the backup store's I/O error.
fn store_error(err: object_store::Error) -> BackupError {
    BackupError::Io(io::Error::other(err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(parse_url("s3://backups").unwrap(), ("backups".to_string(), String::new()));
        assert_eq!(
            parse_url("s3://backups/cms/prod/").unwrap(),
            ("backups".to_string(), "cms/prod".to_string())
        );
        for bad in ["file:///srv", "s3://", "s3://user:key@bucket/x", "s3://b/../x", "backups"] {
            let message = parse_url(bad).unwrap_err().to_string();
            assert!(!message.contains("key@"), "{message}");
        }
    }

    #[test]
    fn keys_live_under_the_prefix() {
        let store =
            S3Store::new("s3://b/cms/prod", [("AWS_REGION".to_string(), "eu-west-1".to_string())]).unwrap();
        assert_eq!(store.path("acme/1.etcd").unwrap().as_ref(), "cms/prod/acme/1.etcd");
        assert_eq!(store.full("").as_ref(), "cms/prod");
        assert_eq!(store.key_of(&Path::from("cms/prod/acme/1.json")), Some("acme/1.json"));
        assert_eq!(store.key_of(&Path::from("cms/prodx/1.json")), None);
        assert!(matches!(store.path("../x"), Err(BackupError::InvalidKey(_))));
        let top = S3Store::new("s3://b", []).unwrap();
        assert_eq!(top.path("acme/1.etcd").unwrap().as_ref(), "acme/1.etcd");
        assert_eq!(store.locate("acme/1.etcd"), "s3://b/cms/prod/acme/1.etcd");
        assert_eq!(top.locate("acme/1.etcd"), "s3://b/acme/1.etcd");
    }
}
