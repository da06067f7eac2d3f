//! The web console mounted in the real application: its paths beside the
//! API's, its pages kept as pages by the error shaping, its forms on the
//! audit log under the caller's name (and reads of machine logs, refused
//! or not), its event stream through the framework, and the body limit.
//! The console's own behaviour is tested in `cms-console`.

use actix_web::test::TestRequest;
use cms_model::UserRole;
use cms_service::ServiceOptions;
use serde_json::Value;

use crate::{ADMIN_PASSWORD, Reply, harness, harness_with, next_chunk};

const POLICY: &str = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

fn form(request: TestRequest, body: &str) -> TestRequest {
    request.insert_header(("content-type", "application/x-www-form-urlencoded")).set_payload(body.to_string())
}

/// The session token a sign-in answer sets.
fn session(reply: &Reply) -> String {
    let cookie = reply.header("set-cookie");
    let token =
        cookie.strip_prefix("cms_session=").and_then(|rest| rest.split(';').next()).unwrap_or_default();
    assert!(!token.is_empty(), "a session cookie: {cookie:?}");
    token.to_string()
}

/// The hidden form token of a page.
fn csrf(page: &Reply) -> String {
    let text = page.text();
    let marker = "name=\"csrf\" value=\"";
    let start = text.find(marker).map(|at| at + marker.len()).unwrap_or(text.len());
    text[start..].split('"').next().unwrap_or_default().to_string()
}

#[actix_web::test]
async fn the_console_sits_at_the_root_beside_the_api() {
    let h = harness().await;
    let home = h.send_as(TestRequest::get().uri("/")).await;
    assert_eq!(home.status.as_u16(), 303);
    assert_eq!(home.header("location"), "/login");
    assert_eq!(home.header("content-security-policy"), POLICY);
    assert!(home.request_id.is_some(), "console answers carry request ids too");
    let login = h.send_as(TestRequest::get().uri("/login")).await;
    assert_eq!(login.status.as_u16(), 200);
    assert_eq!(login.header("content-type"), "text/html; charset=utf-8");
    assert_eq!(login.header("x-content-type-options"), "nosniff");
    assert_eq!(login.header("referrer-policy"), "same-origin");
    assert!(login.text().contains("<form class=\"stacked\" id=\"login\""), "{}", login.text());

    assert_eq!(h.send_as(TestRequest::get().uri("/healthz")).await.text(), "ok");
    assert_eq!(h.get("/api/v1/tenants").await.status.as_u16(), 200);
    h.get("/nothing-here").await.error(404, "NotFound");
    assert!(h.send_as(TestRequest::get().uri("/openapi.json")).await.json()["paths"]["/"].is_null());
}

#[actix_web::test]
async fn console_forms_are_audited_and_their_refusals_stay_pages() {
    let h = harness().await;
    let signed_in = h
        .send_as(form(
            TestRequest::post().uri("/login"),
            &format!("username=admin&password={ADMIN_PASSWORD}"),
        ))
        .await;
    assert_eq!(signed_in.status.as_u16(), 303, "{}", signed_in.text());
    let token = session(&signed_in);
    let cookie = ("cookie", format!("cms_session={token}"));

    let page = h.send_as(TestRequest::get().uri("/tenants/new").insert_header(cookie.clone())).await;
    assert_eq!(page.status.as_u16(), 200, "{}", page.text());
    let forged = form(TestRequest::post().uri("/tenants/new").insert_header(cookie.clone()), "name=forged");
    let refused = h.send_as(forged).await;
    assert_eq!(refused.status.as_u16(), 403);
    assert_eq!(refused.header("content-type"), "text/html; charset=utf-8", "not reshaped into JSON");
    assert!(refused.text().contains("security token"), "{}", refused.text());

    let body = format!("csrf={}&name=acme&kubernetesVersion=1.31&groupName=", csrf(&page));
    let invalid = h.send_as(form(TestRequest::post().uri("/tenants/new").insert_header(cookie), &body)).await;
    assert_eq!(invalid.status.as_u16(), 422, "{}", invalid.text());
    assert!(invalid.text().contains("id=\"kubernetesVersion-error\""));

    let log = h.get("/api/v1/audit").await.json();
    let items = log["items"].as_array().cloned().unwrap_or_default();
    let seen: Vec<(String, String, u64)> = items
        .iter()
        .map(|record: &Value| {
            let text = |field: &str| record[field].as_str().unwrap_or_default().to_string();
            (text("actor"), text("path"), record["status"].as_u64().unwrap_or_default())
        })
        .collect();
    for expected in [("admin", "/login", 303), ("admin", "/tenants/new", 403), ("admin", "/tenants/new", 422)]
    {
        let expected = (expected.0.to_string(), expected.1.to_string(), expected.2);
        assert!(seen.contains(&expected), "{expected:?} in {seen:?}");
    }
    let create = items.iter().find(|record| record["status"] == 422).cloned().unwrap_or_default();
    assert_eq!(create["target"]["kind"], "Tenant", "{create}");
    assert_eq!(create["target"]["name"], "acme", "{create}");
}

#[actix_web::test]
async fn the_event_stream_flows_through_the_framework() {
    let h = harness().await;
    let token = h.user("watcher", UserRole::View).await;
    let request = TestRequest::get().uri("/events").insert_header(("cookie", format!("cms_session={token}")));
    let response = h.open_as(request).await;
    assert_eq!(response.status().as_u16(), 200);
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    assert_eq!(header("content-type").as_deref(), Some("text/event-stream"));
    assert_eq!(header("content-security-policy").as_deref(), Some(POLICY));
    let mut body = response.into_body();
    let synced = next_chunk(&mut body).await.unwrap_or_default();
    assert!(synced.starts_with(b"id: "), "{synced:?}");
    h.tenant("live").await;
    let added = String::from_utf8_lossy(&next_chunk(&mut body).await.unwrap_or_default()).into_owned();
    assert!(added.contains("\"type\":\"ADDED\",\"name\":\"live\""), "{added}");
    h.state.shutdown.cancel();
    assert!(next_chunk(&mut body).await.is_none(), "the stream ends at shutdown");
}

#[actix_web::test]
async fn forms_over_the_body_limit_get_a_page() {
    let h = harness_with(ServiceOptions { body_limit: 64, ..ServiceOptions::default() }).await;
    let big = format!("username=admin&password={}", "x".repeat(200));
    let reply = h.send_as(form(TestRequest::post().uri("/login"), &big)).await;
    assert_eq!(reply.status.as_u16(), 413);
    assert_eq!(reply.header("content-type"), "text/html; charset=utf-8");
    assert_eq!(reply.header("content-security-policy"), POLICY);
}

#[actix_web::test]
async fn a_refused_read_of_a_machine_s_log_is_audited() {
    let h = harness().await;
    h.tenant("acme").await;
    let token = h.user("vera", UserRole::View).await;
    let request = TestRequest::get()
        .uri("/tenants/acme/machines/cp-0/logs?service=etcd")
        .insert_header(("cookie", format!("cms_session={token}")));
    let refused = h.send_as(request).await;
    assert_eq!(refused.status.as_u16(), 403, "{}", refused.text());
    assert_eq!(refused.header("content-type"), "text/html; charset=utf-8", "a page, as every refusal");

    let log = h.get("/api/v1/audit").await.json();
    let items = log["items"].as_array().cloned().unwrap_or_default();
    let record = items.iter().find(|record| record["actor"] == "vera").cloned().unwrap_or_default();
    assert_eq!(record["method"], "GET", "{log}");
    assert_eq!(record["route"], "/tenants/{name}/machines/{id}/logs", "{record}");
    assert_eq!(record["status"], 403, "{record}");
    assert_eq!(record["target"]["kind"], "Machine", "{record}");
    assert_eq!(record["target"]["tenant"], "acme", "{record}");
    assert_eq!(record["target"]["name"], "cp-0", "{record}");
}
