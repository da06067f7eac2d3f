//! A real OpenID Connect provider for the single sign-on tests:
//! `oidc-provider-mock` (named by `CMS_TEST_OIDC`, installed by
//! `.ci/oidc-provider`) on a free loopback port, killed when dropped. Its
//! users' claims are set over its API, and its sign-in form is answered as
//! a browser would, so that a test can complete a sign-in without one.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the provider may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The environment variable that names the provider's executable.
const BINARY_VARIABLE: &str = "CMS_TEST_OIDC";

/// A running provider.
#[derive(Debug)]
pub struct OidcProvider {
    child: Child,
    addr: SocketAddr,
    http: reqwest::Client,
}

impl OidcProvider {
    /// Starts `$CMS_TEST_OIDC` on a free loopback port and waits for its
    /// discovery document. Fails the test, never skips it, when the
    /// variable is unset.
    #[allow(clippy::disallowed_methods)] // The tests run the identity provider they sign in at as a process.
    pub async fn start() -> OidcProvider {
        let binary = std::env::var_os(BINARY_VARIABLE).unwrap_or_else(|| {
            panic!(
                "this test needs an OpenID Connect provider: run `.ci/oidc-provider` and set {BINARY_VARIABLE} \
                 to the path it prints (`cargo xtask e2e` and `.ci/run` do both)"
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
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let mut provider = OidcProvider { child, addr, http };
        let began = Instant::now();
        loop {
            let discovery =
                provider.http.get(format!("{}/.well-known/openid-configuration", provider.issuer()));
            if discovery.send().await.is_ok_and(|response| response.status().is_success()) {
                break;
            }
            if let Ok(Some(status)) = provider.child.try_wait() {
                panic!("oidc-provider-mock exited before answering: {status}");
            }
            assert!(
                began.elapsed() < START_TIMEOUT,
                "oidc-provider-mock did not answer in {START_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        provider
    }

    /// The issuer URL, as its tokens' `iss`.
    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sets every claim of user `sub` (replacing the ones before), read when
    /// a code is exchanged.
    pub async fn set_user(&self, sub: &str, claims: Value) {
        let response =
            self.http.put(format!("{}/users/{sub}", self.issuer())).json(&claims).send().await.unwrap();
        assert!(response.status().is_success(), "setting the claims of {sub}: {}", response.status());
    }

    /// Signs `sub` in at `authorization_url` as the sign-in form would, and
    /// returns where the provider sends the browser: the redirect URI with
    /// the code and state.
    pub async fn sign_in(&self, authorization_url: &str, sub: &str) -> String {
        let response = self.http.post(authorization_url).form(&[("sub", sub)]).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 302, "the provider signs {sub} in");
        let location = response.headers().get("location").expect("a redirect").to_str().unwrap();
        assert!(location.contains("code="), "the redirect carries a code: {location}");
        location.to_string()
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
