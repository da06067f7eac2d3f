//! The HTTP client: one server, one optional bearer token, and replies turned
//! into typed values or into [`ApiError`] and [`ConnectionError`].

use std::error::Error as _;
use std::time::Duration;

use anyhow::{Context, Result};
use reqwest::Method;
use reqwest::blocking::{RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::failure::{ApiError, ConnectionError};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A client bound to one server.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::blocking::Client,
    streaming: reqwest::blocking::Client,
}

/// A downloaded document and the file name the server suggests for it.
#[derive(Debug)]
pub(crate) struct Document {
    pub(crate) body: String,
    pub(crate) file_name: Option<String>,
}

impl Client {
    /// A client for `server` (a base URL such as `http://localhost:8080`).
    pub(crate) fn new(server: &str, token: Option<String>) -> Result<Client> {
        let base = server.trim_end_matches('/').to_string();
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .context("building the HTTP client")?;
        // Watch streams stay open as long as the command runs.
        let streaming = reqwest::blocking::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(None)
            .build()
            .context("building the HTTP client")?;
        Ok(Client { base, token, http, streaming })
    }

    /// The base URL this client talks to.
    pub(crate) fn server(&self) -> &str {
        &self.base
    }

    /// `GET` of a path under the server root, parsed as `T`.
    pub(crate) fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let response = self.send(self.request(Method::GET, path))?;
        parse(response, path)
    }

    /// `POST` or `PUT` of `body`, parsed as `T`.
    pub(crate) fn write<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<T> {
        let response = self.send(self.request(method, path).json(body))?;
        parse(response, path)
    }

    /// `DELETE`; some kinds answer with the object, others with no body.
    pub(crate) fn delete(&self, path: &str) -> Result<Option<Value>> {
        let response = self.send(self.request(Method::DELETE, path))?;
        let text = response.text().map_err(|err| self.connection(&err))?;
        if text.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&text).map(Some).with_context(|| format!("reading the reply of DELETE {path}"))
    }

    /// A document download, such as a kubeconfig.
    pub(crate) fn download(&self, path: &str) -> Result<Document> {
        let response = self.send(self.request(Method::GET, path))?;
        let file_name = response
            .headers()
            .get(reqwest::header::CONTENT_DISPOSITION)
            .and_then(|value| value.to_str().ok())
            .and_then(disposition_file_name);
        let body = response.text().map_err(|err| self.connection(&err))?;
        Ok(Document { body, file_name })
    }

    /// `POST` of an empty object for an operation that runs within the
    /// request as long as it takes (a backup, a restore): no overall time
    /// limit, as with streams.
    pub(crate) fn post_unbounded<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let request = self.authorize(self.streaming.post(self.url(path))).json(&serde_json::json!({}));
        parse(self.send(request)?, path)
    }

    /// Opens a `GET` whose body is read as it arrives (a backup's snapshot),
    /// with no overall time limit.
    pub(crate) fn open(&self, path: &str) -> Result<Response> {
        self.send(self.authorize(self.streaming.get(self.url(path))))
    }

    /// Opens a streaming `GET` (server-sent events).
    pub(crate) fn stream(&self, path: &str) -> Result<Response> {
        let request = self.streaming.get(self.url(path)).header("accept", "text/event-stream");
        self.send(self.authorize(request))
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.authorize(self.http.request(method, self.url(path)))
    }

    fn authorize(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn send(&self, request: RequestBuilder) -> Result<Response> {
        let response = request.send().map_err(|err| self.connection(&err))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let text = response.text().unwrap_or_default();
        Err(api_error(status, &text).into())
    }

    /// A transport failure, naming the server and the deepest cause.
    pub(crate) fn connection(&self, error: &reqwest::Error) -> anyhow::Error {
        let mut detail = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            detail = cause.to_string();
            source = cause.source();
        }
        if error.is_timeout() {
            detail = format!("timed out ({detail})");
        }
        ConnectionError { server: self.base.clone(), detail }.into()
    }
}

/// The error of a failed reply: the server's `{error, code, status}` body, or
/// the status and raw text of anything else on the way (a proxy, say).
fn api_error(status: reqwest::StatusCode, text: &str) -> ApiError {
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let field = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_string);
    let reason = status.canonical_reason().unwrap_or("Error").replace(' ', "");
    let message = field("error").unwrap_or_else(|| match text.trim() {
        "" => format!("the server answered HTTP {}", status.as_u16()),
        other => other.chars().take(200).collect(),
    });
    ApiError { status: status.as_u16(), code: field("code").unwrap_or(reason), message }
}

fn parse<T: DeserializeOwned>(response: Response, path: &str) -> Result<T> {
    let bytes = response.bytes().context("reading the reply")?;
    cms_model::parse_json(&bytes)
        .with_context(|| format!("the server's reply to {path} is not what this client expects"))
}

/// The `filename` of a `Content-Disposition` header.
pub(crate) fn disposition_file_name(header: &str) -> Option<String> {
    let start = header.find("filename=")? + "filename=".len();
    let name = header[start..].split(';').next()?.trim().trim_matches('"');
    // A file name from the server never chooses a folder.
    let name = name.rsplit(['/', '\\']).next()?;
    (!name.is_empty() && name != "..").then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_come_from_content_disposition() {
        let name = disposition_file_name(r#"attachment; filename="demo-kubeconfig.yaml""#);
        assert_eq!(name.as_deref(), Some("demo-kubeconfig.yaml"));
        assert_eq!(disposition_file_name(r#"attachment; filename="../../x""#).as_deref(), Some("x"));
        assert_eq!(disposition_file_name("inline"), None);
    }

    #[test]
    fn error_bodies_and_other_replies() {
        let body = r#"{"error":"tenant \"x\" not found","code":"NotFound","status":404}"#;
        let error = api_error(reqwest::StatusCode::NOT_FOUND, body);
        assert_eq!(error.to_string(), r#"tenant "x" not found (NotFound, HTTP 404)"#);
        let error = api_error(reqwest::StatusCode::BAD_GATEWAY, "");
        assert_eq!(error.code, "BadGateway");
        assert_eq!(error.message, "the server answered HTTP 502");
    }
}
