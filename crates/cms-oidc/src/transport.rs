//! [`Transport`]: the HTTP exchanges with issuers, the crate's one IO seam.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::OidcError;

/// Sends one HTTP request and returns the whole answer. Failures are the
/// transport's own (no connection, a timeout), never an HTTP status.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    async fn send(&self, request: http::Request<Vec<u8>>) -> Result<http::Response<Vec<u8>>, String>;
}

/// [`Transport`] over `reqwest`, with TLS, a timeout and no redirects (a
/// token endpoint that redirects is refused rather than followed).
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
}

impl HttpTransport {
    /// A transport whose every exchange ends within `timeout`.
    pub fn new(timeout: Duration) -> Result<HttpTransport, OidcError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| OidcError::Config(format!("cannot build the HTTP client: {err}")))?;
        Ok(HttpTransport { client })
    }
}

#[async_trait]
impl Transport for HttpTransport {
    async fn send(&self, request: http::Request<Vec<u8>>) -> Result<http::Response<Vec<u8>>, String> {
        let request = reqwest::Request::try_from(request).map_err(|err| err.to_string())?;
        let response = self.client.execute(request).await.map_err(|err| err.to_string())?;
        let mut answer = http::Response::builder().status(response.status());
        if let Some(headers) = answer.headers_mut() {
            *headers = response.headers().clone();
        }
        let body = response.bytes().await.map_err(|err| err.to_string())?;
        answer.body(body.to_vec()).map_err(|err| err.to_string())
    }
}

/// The JSON document at `url`, from `issuer`.
pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
    transport: &dyn Transport,
    issuer: &str,
    url: &str,
) -> Result<T, OidcError> {
    let unavailable = |reason: String| OidcError::Unavailable { issuer: issuer.to_string(), reason };
    let request = http::Request::get(url)
        .header(http::header::ACCEPT, "application/json")
        .body(Vec::new())
        .map_err(|err| OidcError::Config(format!("{url:?}: {err}")))?;
    let response = transport.send(request).await.map_err(unavailable)?;
    if !response.status().is_success() {
        return Err(unavailable(format!("GET {url} answered {}", response.status())));
    }
    serde_json::from_slice(response.body()).map_err(|err| OidcError::Provider {
        issuer: issuer.to_string(),
        reason: format!("GET {url}: {err}"),
    })
}
