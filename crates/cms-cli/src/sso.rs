//! `cms login --sso`: a sign-in at the server's identity provider, as
//! kubelogin does it. The client keeps a PKCE verifier, asks the server for
//! the provider's URL with a loopback redirect, opens it in a browser (or
//! prints it), takes the one request that comes back to the loopback port,
//! and exchanges its code and state with the verifier for a login token.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cms_model::{LoginResponse, SsoStartRequest, SsoStartResponse, SsoTokenRequest};
use reqwest::Method;
use sha2::{Digest, Sha256};

use crate::cli::LoginArgs;
use crate::client::Client;

/// How long the browser may take to come back.
const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);

/// Signs in at the identity provider; the user name (from the token) and
/// the login token.
pub(crate) fn login(client: &Client, args: &LoginArgs) -> Result<(String, LoginResponse)> {
    let listener = TcpListener::bind(("127.0.0.1", args.callback_port))
        .with_context(|| format!("listening on 127.0.0.1:{} for the sign-in", args.callback_port))?;
    let redirect_uri = format!("http://127.0.0.1:{}/callback", listener.local_addr()?.port());
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).map_err(|err| anyhow!("no randomness for PKCE: {err}"))?;
    let verifier = URL_SAFE_NO_PAD.encode(random);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let start = SsoStartRequest { redirect_uri: redirect_uri.clone(), code_challenge: challenge };
    let started: SsoStartResponse = client.write(Method::POST, "/api/v1/auth/sso/start", &start)?;
    eprintln!("Sign in at your identity provider:\n\n    {}\n", started.authorization_url);
    if !args.no_browser && webbrowser::open(&started.authorization_url).is_ok() {
        eprintln!("(opened in your browser; waiting for it to come back)");
    }
    let (code, state) = wait_for_code(&listener)?;
    let request = SsoTokenRequest { code, state, code_verifier: verifier, redirect_uri };
    let reply: LoginResponse = client.write(Method::POST, "/api/v1/auth/sso/token", &request)?;
    Ok((subject_of(&reply.token), reply))
}

/// The code and state of the first request to `/callback`; other paths
/// (a browser's favicon) get 404 and the wait goes on.
fn wait_for_code(listener: &TcpListener) -> Result<(String, String)> {
    let deadline = Instant::now() + SIGN_IN_TIMEOUT;
    listener.set_nonblocking(true)?;
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    bail!("the sign-in did not come back within {} s", SIGN_IN_TIMEOUT.as_secs());
                }
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(err) => return Err(err).context("waiting for the sign-in to come back"),
        };
        if let Some(answer) = answer(stream)? {
            return answer;
        }
    }
}

/// Reads one request: `None` when it is not the callback.
fn answer(mut stream: TcpStream) -> Result<Option<Result<(String, String)>>> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let target = line.split_whitespace().nth(1).unwrap_or_default().to_string();
    let Some(query) = target.strip_prefix("/callback") else {
        stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")?;
        return Ok(None);
    };
    let pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(query.trim_start_matches('?').as_bytes()).into_owned().collect();
    let get = |name: &str| pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    let (message, result) = match (get("code"), get("state"), get("error")) {
        (Some(code), Some(state), None) => ("Signed in. You can close this window.", Ok((code, state))),
        (_, _, Some(error)) => {
            let detail = get("error_description").unwrap_or_default();
            (
                "The sign-in failed; see the terminal.",
                Err(anyhow!("the identity provider refused: {error} {detail}")),
            )
        }
        _ => ("The sign-in failed; see the terminal.", Err(anyhow!("the sign-in came back without a code"))),
    };
    let body = format!("<!doctype html><title>cms</title><p>{message}</p>");
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    Ok(Some(result))
}

/// The `sub` of a login token, for the context's user; the server checks
/// the token, this only reads it.
fn subject_of(token: &str) -> String {
    token
        .split('.')
        .nth(1)
        .and_then(|payload| URL_SAFE_NO_PAD.decode(payload).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|claims| claims["sub"].as_str().map(str::to_string))
        .unwrap_or_else(|| "(single sign-on)".to_string())
}
