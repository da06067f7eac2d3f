//! A trusted workload issuer for the workload identity tests, served over
//! HTTP on a free loopback port: its discovery document and key set from
//! `cms_oidc::testing::FakeIssuer`, whose keys a test rotates while the
//! server runs, as a CI platform does.

use std::sync::Arc;

use cms_oidc::Transport;
use cms_oidc::testing::{FakeIssuer, TestKey};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// A workload issuer listening on loopback until dropped.
#[derive(Debug)]
pub struct WorkloadIssuer {
    fake: Arc<FakeIssuer>,
    task: tokio::task::JoinHandle<()>,
}

impl WorkloadIssuer {
    /// An issuer publishing `keys`.
    pub async fn start(keys: Vec<TestKey>) -> WorkloadIssuer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fake = FakeIssuer::new(&url, keys);
        let serving = fake.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let serving = serving.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut line = String::new();
                    if BufReader::new(read).read_line(&mut line).await.is_err() {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let request =
                        http::Request::get(format!("{}{path}", serving.url())).body(Vec::new()).unwrap();
                    let response = serving.send(request).await.unwrap();
                    let head = format!(
                        "HTTP/1.1 {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        response.status(),
                        response.body().len()
                    );
                    let _ = write.write_all(head.as_bytes()).await;
                    let _ = write.write_all(response.body()).await;
                });
            }
        });
        WorkloadIssuer { fake, task }
    }

    /// The issuer URL.
    pub fn url(&self) -> String {
        self.fake.url().to_string()
    }

    /// Publishes `keys` instead of the current ones.
    pub fn publish(&self, keys: Vec<TestKey>) {
        self.fake.publish(keys);
    }
}

impl Drop for WorkloadIssuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
