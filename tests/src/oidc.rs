//! A real OpenID Connect provider for the single sign-on tests:
//! `oidc-provider-mock` (named by `CMS_TEST_OIDC`, installed by
//! `.ci/oidc-provider`) on a free loopback port, killed when dropped. Its
//! users' claims are set over its API, and its sign-in form is answered as
//! a browser would, so that a test can complete a sign-in without one.

use std::time::Duration;

use serde_json::Value;

use crate::loopback::LoopbackServer;

/// A running provider.
#[derive(Debug)]
pub struct OidcProvider {
    server: LoopbackServer,
    http: reqwest::Client,
}

impl OidcProvider {
    /// Starts `$CMS_TEST_OIDC` on a free loopback port and waits until it
    /// answers. Fails the test, never skips it, when the variable is unset.
    pub async fn start() -> OidcProvider {
        let server = LoopbackServer::start("CMS_TEST_OIDC", ".ci/oidc-provider", "oidc-provider-mock").await;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        OidcProvider { server, http }
    }

    /// The issuer URL, as its tokens' `iss`.
    pub fn issuer(&self) -> String {
        self.server.url()
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
