//! Single sign-on at a real OpenID Connect provider (oidc-provider-mock):
//! `cms login --sso` with the redirect completed by the test, IdP groups
//! mapped to roles (a user in two groups gets the higher role), a removed
//! group losing its access at the next sign-in, a user in no mapped group
//! turned away, the server's own checks of state (a real one replayed at
//! another redirect URI included) and PKCE verifier, the
//! groups in the kubeconfig's certificate, and the audit log naming the
//! identity's source, issuer and subject.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cms_e2e::Api;
use cms_e2e::Server;
use cms_e2e::cli::{Cli, wait_bounded};
use cms_e2e::oidc::OidcProvider;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A server whose users sign in at `provider`.
pub(crate) async fn sso_server(provider: &OidcProvider) -> Server {
    Server::options()
        .env("CMS_SSO_ISSUER", provider.issuer())
        .env("CMS_SSO_CLIENT_ID", "cms-e2e")
        .env("CMS_SSO_CLIENT_SECRET", "e2e-client-secret")
        .env("CMS_SSO_GROUP_ROLES", "platform=admin,devs=edit,viewers=view")
        .start()
        .await
}

/// The redirect URI a client on this machine would listen on.
const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// A sign-in of `sub` through the API as a client would make it, up to the
/// provider's answer: the code, the state and the client's real verifier.
async fn provider_answer(api: &Api, provider: &OidcProvider, sub: &str) -> (String, String, String) {
    let real = URL_SAFE_NO_PAD.encode([7u8; 32]);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(real.as_bytes()));
    let start = json!({"redirectUri": REDIRECT, "codeChallenge": challenge});
    let url = api.post("/api/v1/auth/sso/start", &start).await.expect(200)["authorizationUrl"]
        .as_str()
        .expect("an authorization URL")
        .to_string();
    assert!(url.starts_with(&provider.issuer()), "{url}");
    let location = provider.sign_in(&url, sub).await;
    let query = location.split_once('?').expect("a query").1;
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let get = |name: &str| pairs.iter().find(|(key, _)| key == name).expect(name).1.clone();
    (get("code"), get("state"), real)
}

/// A sign-in of `sub` through the API as a client would make it, with the
/// verifier `verifier` presented at the end: the token endpoint's answer.
pub(crate) async fn api_sign_in(
    api: &Api,
    provider: &OidcProvider,
    sub: &str,
    verifier: Option<&str>,
) -> (u16, Value) {
    let (code, state, real) = provider_answer(api, provider, sub).await;
    let body = json!({"code": code, "state": state, "codeVerifier": verifier.unwrap_or(&real),
        "redirectUri": REDIRECT});
    let reply = api.post("/api/v1/auth/sso/token", &body).await;
    (reply.status, reply.json())
}

pub(crate) fn tenant(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"kubernetesVersion": "1.31.1",
        "controlPlaneEndpoint": "https://10.0.0.1:6443"}})
}

/// The CN and O of the client certificate of a kubeconfig.
pub(crate) fn kube_subject(kubeconfig: &str) -> (String, Vec<String>) {
    let config: Value = serde_saphyr::from_str(kubeconfig).expect("the kubeconfig is YAML");
    let data = config["users"][0]["user"]["client-certificate-data"].as_str().expect("a certificate");
    let pem = base64::engine::general_purpose::STANDARD.decode(data).expect("base64");
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).expect("PEM");
    let (_, cert) = x509_parser::parse_x509_certificate(&pem.contents).expect("a certificate");
    let text = |attr: &x509_parser::x509::AttributeTypeAndValue| attr.as_str().unwrap().to_string();
    let cn = cert.subject().iter_common_name().map(text).next().expect("a CN");
    (cn, cert.subject().iter_organization().map(text).collect())
}

#[tokio::test]
async fn cli_sign_in_maps_groups_to_roles_and_a_removed_group_loses_access() {
    let provider = OidcProvider::start().await;
    provider.set_user("alice", json!({"email": "alice@example.com", "groups": ["viewers", "devs"]})).await;
    let server = sso_server(&provider).await;

    // `cms login --sso`: the URL on stderr, the browser's part done here.
    let cli = Cli::new(&server);
    let mut child = cli.spawn(&["login", "--sso", "--no-browser"]);
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let url = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).expect("stderr") > 0, "cms exited before printing the URL");
        if line.trim().starts_with("http") {
            break line.trim().to_string();
        }
    };
    assert!(url.contains("code_challenge=") && url.contains("code_challenge_method=S256"), "{url}");
    assert!(url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A"), "a loopback redirect: {url}");
    let location = provider.sign_in(&url, "alice").await;
    let page = reqwest::get(&location).await.expect("the CLI answers the browser").text().await.unwrap();
    assert!(page.contains("Signed in"), "{page}");
    let status = wait_bounded(&mut child, Duration::from_secs(30), &["login", "--sso"]);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert!(status.success(), "cms login --sso failed: {rest}");
    assert!(rest.contains("as alice@example.com"), "{rest}");

    // In viewers and devs: edit, the higher of the two.
    let saved = std::fs::read_to_string(cli.config_path()).expect("the context file");
    let saved: Value = serde_saphyr::from_str(&saved).expect("the context file is YAML");
    let token = saved["contexts"][0]["token"].as_str().expect("a saved token").to_string();
    let alice = server.api().with_token(Some(token));
    alice.post("/api/v1/tenants", &tenant("by-alice")).await.expect(201);
    cli.run(&["get", "tenants"]).expect(0);
    alice.get("/api/v1/users").await.expect_error(403, "Forbidden");
    let refused = alice
        .post(
            "/api/v1/users/alice@example.com/tokens",
            &json!({"metadata": {"name": "t"}, "spec": {"expiresIn": "1h"}}),
        )
        .await
        .expect_error(403, "Forbidden");
    assert!(refused.contains("local users"), "{refused}");

    // The kubeconfig names the user and carries its groups, prefixed.
    let kubeconfig = alice.get("/api/v1/tenants/by-alice/kubeconfig").await;
    assert_eq!(kubeconfig.status, 200, "{}", kubeconfig.body);
    let (cn, groups) = kube_subject(&kubeconfig.body);
    assert_eq!(cn, "oidc:alice@example.com");
    // Edit's group, then each of the user's groups in an O of its own.
    assert_eq!(groups, ["system:masters", "oidc:viewers", "oidc:devs"]);

    // The audit log names the source, the issuer and the subject.
    let audit = server.api().get("/api/v1/audit?actor=alice@example.com").await.expect(200);
    let create = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["method"] == "POST" && record["route"] == "/api/v1/tenants")
        .expect("the create is on the audit log")
        .clone();
    assert_eq!(create["actorSource"], "oidc");
    assert_eq!(create["actorIssuer"], provider.issuer());
    assert_eq!(create["actorSubject"], "alice");
    assert_eq!(create["actorRole"], "edit");

    // devs is taken away at the provider: the next sign-in views only.
    provider.set_user("alice", json!({"email": "alice@example.com", "groups": ["viewers"]})).await;
    let (status, reply) = api_sign_in(&server.api().with_token(None), &provider, "alice", None).await;
    assert_eq!(status, 200, "{reply}");
    let viewer = server.api().with_token(reply["token"].as_str().map(str::to_string));
    viewer.get("/api/v1/tenants/by-alice").await.expect(200);
    viewer.post("/api/v1/tenants", &tenant("by-viewer")).await.expect_error(403, "Forbidden");

    // In platform: admin.
    provider.set_user("root", json!({"email": "root@example.com", "groups": ["platform", "viewers"]})).await;
    let (status, reply) = api_sign_in(&server.api().with_token(None), &provider, "root", None).await;
    assert_eq!(status, 200, "{reply}");
    let root = server.api().with_token(reply["token"].as_str().map(str::to_string));
    root.get("/api/v1/users").await.expect(200);
}

#[tokio::test]
async fn the_server_checks_what_the_provider_does_not() {
    let provider = OidcProvider::start().await;
    provider.set_user("bob", json!({"email": "bob@example.com", "groups": ["others"]})).await;
    provider.set_user("carol", json!({"email": "carol@example.com", "groups": ["devs"]})).await;
    let server = sso_server(&provider).await;
    let anonymous = server.api().with_token(None);

    // No mapped group, and no default role: turned away.
    let (status, reply) = api_sign_in(&anonymous, &provider, "bob", None).await;
    assert_eq!(status, 403, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("none of their groups"), "{reply}");

    // A verifier that does not match the challenge (the provider would
    // accept it).
    let wrong = URL_SAFE_NO_PAD.encode([8u8; 32]);
    let (status, reply) = api_sign_in(&anonymous, &provider, "carol", Some(&wrong)).await;
    assert_eq!(status, 401, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("PKCE"), "{reply}");

    // A state this server did not sign; a redirect that is not loopback.
    let forged = json!({"code": "c", "state": "not.a.state", "codeVerifier": wrong, "redirectUri": REDIRECT});
    anonymous.post("/api/v1/auth/sso/token", &forged).await.expect_error(401, "Unauthorized");
    let elsewhere = json!({"redirectUri": "http://evil.example:80/cb",
        "codeChallenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"});
    anonymous.post("/api/v1/auth/sso/start", &elsewhere).await.expect_error(422, "Invalid");

    // Carol signs in; password logins still work beside.
    let (status, reply) = api_sign_in(&anonymous, &provider, "carol", None).await;
    assert_eq!(status, 200, "{reply}");
    server.api().get("/api/v1/tenants").await.expect(200);

    // A server without single sign-on says so.
    let plain = Server::start().await;
    let start =
        json!({"redirectUri": REDIRECT, "codeChallenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"});
    plain.api().with_token(None).post("/api/v1/auth/sso/start", &start).await.expect_error(404, "NotFound");
}

#[tokio::test]
async fn a_real_state_is_refused_at_another_redirect_uri() {
    let provider = OidcProvider::start().await;
    provider.set_user("carol", json!({"email": "carol@example.com", "groups": ["devs"]})).await;
    let server = sso_server(&provider).await;
    let anonymous = server.api().with_token(None);
    let (code, state, verifier) = provider_answer(&anonymous, &provider, "carol").await;

    // The state this server signed for REDIRECT, replayed with another
    // loopback address: refused before the code is spent.
    let elsewhere = "http://127.0.0.1:10/callback";
    let replayed = json!({"code": code, "state": state, "codeVerifier": verifier, "redirectUri": elsewhere});
    let message = anonymous.post("/api/v1/auth/sso/token", &replayed).await.expect_error(401, "Unauthorized");
    assert!(message.contains("another address"), "{message}");

    // The same answer at the address it began with signs in.
    let right = json!({"code": code, "state": state, "codeVerifier": verifier, "redirectUri": REDIRECT});
    let reply = anonymous.post("/api/v1/auth/sso/token", &right).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}
