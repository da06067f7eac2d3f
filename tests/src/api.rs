//! A small HTTP client for the server's API, with replies that check themselves.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder};
use serde_json::Value;

/// The longest one request may take, from sending to the last byte of the body.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client bound to one server. Cloning is cheap and shares the connection pool.
#[derive(Debug, Clone)]
pub struct Api {
    base: String,
    /// The bearer token sent with every request, if any.
    token: Option<String>,
    client: reqwest::Client,
    streaming: reqwest::Client,
}

impl Api {
    /// A client for the server at `addr`.
    pub fn new(addr: SocketAddr) -> Api {
        let client = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("an HTTP client");
        // Watch streams stay open for as long as a test reads them, so their
        // client has no overall timeout; readers bound each read instead.
        let streaming = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .expect("an HTTP client");
        Api { base: format!("http://{addr}"), token: None, client, streaming }
    }

    /// This client, logged in as `user`: later requests carry its token.
    pub async fn login(self, user: &str, password: &str) -> Api {
        let body = serde_json::json!({"username": user, "password": password});
        let reply = self.send(self.client.post(self.url("/api/v1/auth/login")).json(&body)).await;
        let token = reply.expect(200)["token"].as_str().expect("a login token").to_string();
        self.with_token(Some(token))
    }

    /// This client with another bearer token, or none.
    pub fn with_token(&self, token: Option<String>) -> Api {
        Api { token, ..self.clone() }
    }

    /// The bearer token this client sends.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    fn authorize(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// The absolute URL of a path such as `/api/v1/tenants`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request builder for any method and path, to send with [`Api::send`].
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.authorize(self.client.request(method, self.url(path)))
    }

    /// A request builder without an overall timeout, for streams.
    pub fn stream_request(&self, method: Method, path: &str) -> RequestBuilder {
        self.authorize(self.streaming.request(method, self.url(path)))
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(Method::GET, path)).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    /// `PUT path` with a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::PUT, path).json(body)).await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> Reply {
        self.send(self.request(Method::DELETE, path)).await
    }

    /// Sends a request and reads the whole reply; a transport error fails the test.
    pub async fn send(&self, request: RequestBuilder) -> Reply {
        let what = describe(&request);
        self.try_send(request).await.unwrap_or_else(|err| panic!("{what} failed: {err:?}"))
    }

    /// Sends a request and reads the whole reply, returning transport errors,
    /// for callers that expect the server to go away.
    pub async fn try_send(&self, request: RequestBuilder) -> Result<Reply, reqwest::Error> {
        let what = describe(&request);
        let response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await?;
        Ok(Reply { what, status, headers, body })
    }
}

fn describe(request: &RequestBuilder) -> String {
    match request.try_clone().and_then(|clone| clone.build().ok()) {
        Some(built) => format!("{} {}", built.method(), built.url()),
        None => "a request".to_string(),
    }
}

/// A complete reply: status, headers and body text.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The method and URL, for messages.
    pub what: String,
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// The body parsed as JSON; a body that is not JSON fails the test.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|err| panic!("{}: the body is not JSON ({err}): {:?}", self.what, self.body))
    }

    /// Asserts the status and returns the JSON body.
    #[track_caller]
    pub fn expect(&self, status: u16) -> Value {
        self.assert_status(status);
        self.json()
    }

    /// Asserts the status and that the body is empty.
    #[track_caller]
    pub fn expect_empty(&self, status: u16) {
        self.assert_status(status);
        assert!(self.body.is_empty(), "{}: expected an empty body, got {:?}", self.what, self.body);
    }

    /// Asserts an error reply: the status, a JSON content type, and a body of
    /// exactly `{"error": "<non-empty message>", "code": code, "status": status}`.
    /// Returns the message.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str) -> String {
        self.assert_status(status);
        let content_type = self.header("content-type").unwrap_or_default();
        assert!(
            content_type.starts_with("application/json"),
            "{}: an error must be JSON, got content type {content_type:?}",
            self.what
        );
        let body = self.json();
        let object =
            body.as_object().unwrap_or_else(|| panic!("{}: error body {body} is not an object", self.what));
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["code", "error", "status"],
            "{}: error body {body} has the wrong fields",
            self.what
        );
        assert_eq!(body["code"], code, "{}: error body {body}", self.what);
        assert_eq!(body["status"], status, "{}: error body {body}", self.what);
        let message = body["error"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{}: error body {body} has no message", self.what);
        message.to_string()
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
    }

    #[track_caller]
    fn assert_status(&self, status: u16) {
        assert_eq!(
            self.status, status,
            "{}: expected status {status}, got {}: {}",
            self.what, self.status, self.body
        );
    }
}
