//! `GET /metrics` and tenant names: the series labelled with a tenant are
//! left out for anonymous scrapes, served to callers with a valid bearer
//! token, and to everyone when `metrics_tenant_labels` is set.

use actix_web::test::TestRequest;
use cms_model::UserRole;
use cms_service::ServiceOptions;

use crate::{Harness, harness, harness_with};

/// A tenant name no other series holds.
const MARKER: &str = "marker-7f3a9c";

/// Creates the tenant [`MARKER`] and records its newest backup's age as
/// `cms-backup` does after a backup.
async fn tenant_with_a_backup<S>(h: &Harness<S>)
where
    S: actix_web::dev::Service<
            actix_http::Request,
            Response = actix_web::dev::ServiceResponse<actix_web::body::BoxBody>,
            Error = actix_web::Error,
        >,
{
    cms_service::metrics_handle();
    h.tenant(MARKER).await;
    metrics::gauge!(cms_backup::NEWEST_AGE, "tenant" => MARKER).set(42.0);
}

fn scrape_of(status: u16, body: &str) -> &str {
    assert_eq!(status, 200, "{body}");
    body
}

#[actix_web::test]
async fn anonymous_scrapes_hold_no_tenant_name_and_authenticated_ones_do() {
    let h = harness().await;
    tenant_with_a_backup(&h).await;

    let anonymous = h.send_as(TestRequest::get().uri("/metrics")).await;
    let text = scrape_of(anonymous.status.as_u16(), &anonymous.text()).to_string();
    assert!(!text.contains(MARKER), "{text}");
    assert!(text.contains("# TYPE cms_backup_newest_age_seconds gauge"), "the family is still described");
    assert!(text.contains("cms_http_requests_total{"), "the other series stay: {text}");

    let series = format!("cms_backup_newest_age_seconds{{tenant=\"{MARKER}\"}} 42");
    let admin = h.get("/metrics").await;
    assert!(scrape_of(admin.status.as_u16(), &admin.text()).contains(&series), "{}", admin.text());
    let viewer = h.user("viewer", UserRole::View).await;
    let viewed = h.get_as("/metrics", &viewer).await;
    assert!(scrape_of(viewed.status.as_u16(), &viewed.text()).contains(&series), "any role lists tenants");

    let forged = h.get_as("/metrics", "not-a-token").await;
    forged.error(401, "Unauthorized");
    assert!(!forged.text().contains(MARKER));
}

#[actix_web::test]
async fn the_setting_serves_tenant_names_to_anonymous_scrapes() {
    let h = harness_with(ServiceOptions { metrics_tenant_labels: true, ..ServiceOptions::default() }).await;
    tenant_with_a_backup(&h).await;
    let anonymous = h.send_as(TestRequest::get().uri("/metrics")).await;
    let text = scrape_of(anonymous.status.as_u16(), &anonymous.text()).to_string();
    assert!(text.contains(&format!("cms_backup_newest_age_seconds{{tenant=\"{MARKER}\"}} 42")), "{text}");
}
