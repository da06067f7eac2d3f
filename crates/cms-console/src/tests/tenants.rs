//! The tenants page: its rows, filters and pages, the controls each role
//! sees, and its size with many tenants.

use futures_util::future::join_all;
use http::StatusCode;
use serde_json::json;

use super::{ADMIN, Fixture, VIEWER};
use crate::filters::PER_PAGE;

/// The names of the page's rows, in order.
fn rows(body: &str) -> Vec<&str> {
    body.split("<tr data-tenant=\"").skip(1).filter_map(|rest| rest.split('"').next()).collect()
}

#[tokio::test]
async fn rows_show_each_tenant_s_state() {
    let f = Fixture::new().await;
    f.tenant("web", json!({"env": "prod"}), "active").await;
    f.machine("web", "m1", true).await;
    f.machine("web", "m2", false).await;
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.header("cache-control"), "no-store");
    let body = &page.body;
    assert!(body.contains("<table id=\"tenants\" data-revision=\""), "{body}");
    assert!(
        body.contains("<th class=\"name\" scope=\"row\"><a href=\"/tenants/web\">web</a></th>"),
        "{body}"
    );
    assert!(body.contains("<td class=\"phase\" data-phase=\"active\">active</td>"), "{body}");
    assert!(body.contains("<td class=\"ready\" data-ready=\"no\">no</td>"), "{body}");
    assert!(body.contains("<td class=\"message\">no reason reported yet</td>"), "{body}");
    assert!(body.contains("<td class=\"kubernetes\">1.31.0</td>"));
    let talos = &f.console.tenancy.secrets().options().default_talos_version;
    assert!(body.contains(&format!("<td class=\"talos\">{talos}</td>")));
    assert!(body.contains("<td class=\"machines\">1/2</td>"), "{body}");
    assert!(body.contains("<td class=\"age\"><time datetime=\""), "{body}");
    assert!(body.contains("id=\"create-tenant\""), "an admin may create tenants");
    assert!(body.contains("<span id=\"user\">admin</span>") && body.contains(">admin</span>"));
    assert_eq!(f.get("/tenants", Some(&admin)).await.body.matches("data-tenant=\"web\"").count(), 1);

    let viewer = f.sign_in(VIEWER).await;
    let page = f.get("/", Some(&viewer)).await;
    assert_eq!(rows(&page.body), ["web"]);
    assert!(!page.body.contains("create-tenant"), "a viewer may not create tenants");
    assert!(page.body.contains("<span class=\"role\" id=\"role\">view</span>"), "{}", page.body);
}

/// Checks the rows the query `query` shows.
async fn check(f: &Fixture, session: &str, query: &str, expected: &[&str]) {
    let reply = f.get(&format!("/?{query}"), Some(session)).await;
    assert_eq!(reply.status, StatusCode::OK, "{query}: {}", reply.body);
    assert_eq!(rows(&reply.body), expected, "{query}");
}

#[tokio::test]
async fn filters_and_pages() {
    let f = Fixture::new().await;
    for index in 0..60 {
        let (labels, phase) = match index % 3 {
            0 => (json!({"env": "prod", "team": "a"}), "active"),
            1 => (json!({"env": "dev"}), "failed"),
            _ => (json!({}), "pending"),
        };
        f.tenant(&format!("t{index:02}"), labels, phase).await;
    }
    let admin = f.sign_in(ADMIN).await;
    let first = f.get("/", Some(&admin)).await;
    let names = rows(&first.body);
    assert_eq!(names.len(), PER_PAGE);
    assert_eq!((names[0], names[49]), ("t00", "t49"));
    assert!(first.body.contains("<a rel=\"next\" href=\"/?page=2\">"), "{}", first.body);
    assert!(!first.body.contains("rel=\"prev\""));
    assert!(first.body.contains("Tenants 1 to 50 of 60"));

    let second = f.get("/?page=2", Some(&admin)).await;
    assert_eq!(rows(&second.body).len(), 10);
    assert!(second.body.contains("<a rel=\"prev\" href=\"/\">"), "{}", second.body);
    assert!(!second.body.contains("rel=\"next\""));

    let teens: Vec<String> = (10..20).map(|index| format!("t{index}")).collect();
    let teens: Vec<&str> = teens.iter().map(String::as_str).collect();
    check(&f, &admin, "q=t1", &teens).await;
    check(&f, &admin, "q=T05", &["t05"]).await;
    check(&f, &admin, "phase=failed&q=t0", &["t01", "t04", "t07"]).await;
    check(&f, &admin, "label=env%3Dprod&q=t1", &["t12", "t15", "t18"]).await;
    check(&f, &admin, "label=team&q=t2", &["t21", "t24", "t27"]).await;
    check(&f, &admin, "label=env%3Dprod%2Cteam%3Da&phase=active&q=t5", &["t51", "t54", "t57"]).await;
    check(&f, &admin, "phase=pending&page=2", &[]).await;

    let filtered = f.get("/?label=env%3Ddev&page=1", Some(&admin)).await;
    assert_eq!(rows(&filtered.body).len(), 20);
    assert!(filtered.body.contains("data-label=\"env=dev\""));
    assert!(!filtered.body.contains("rel=\"next\""));
    let empty = f.get("/?q=nothing", Some(&admin)).await;
    assert!(empty.body.contains("id=\"no-tenants\""));
    check(&f, &admin, "label=team+in+%28a%2Cb%29%2Cenv%21%3Ddev&q=t0", &["t00", "t03", "t06", "t09"]).await;
    check(&f, &admin, "label=%21team%2Cenv&q=t0", &["t01", "t04", "t07"]).await;
    check(&f, &admin, "label=env+notin+%28prod%29&q=t0", &["t01", "t02", "t04", "t05", "t07", "t08"]).await;

    // A malformed selector shows the form with the message at its field, and no table.
    let malformed = f.get("/?label=team+in+%28a&q=t0", Some(&admin)).await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    let body = &malformed.body;
    assert!(body.contains("<label for=\"label\">Labels</label>"), "{body}");
    assert!(body.contains("aria-describedby=\"label-hint label-error\" aria-invalid=\"true\""), "{body}");
    assert!(
        body.contains("id=\"label-error\">The label selector &quot;team in (a&quot; is not valid: found the end, expected &#39;,&#39; or &#39;)&#39;.</p>")
            || body.contains("id=\"label-error\">The label selector &quot;team in (a&quot; is not valid: found the end, expected ',' or ')'.</p>"),
        "{body}"
    );
    assert!(body.contains("value=\"team in (a\""), "the selector stays in the field: {body}");
    assert!(!body.contains("<table"), "{body}");
    assert_eq!(f.get("/?phase=sleeping", Some(&admin)).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(f.get("/?page=0", Some(&admin)).await.status, StatusCode::BAD_REQUEST);
}

/// Ten thousand tenants: the first page is one `Store::list` of 50 from
/// the cache, and small. (Its time is measured by benchmarks, not here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_page_of_ten_thousand_tenants_is_small() {
    let f = Fixture::new().await;
    let names: Vec<String> = (0..10_000).map(|index| format!("tenant-{index:05}")).collect();
    for chunk in names.chunks(500) {
        join_all(chunk.iter().map(|name| f.tenant(name, json!({"env": "prod"}), "active"))).await;
    }
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(rows(&page.body).len(), PER_PAGE);
    assert!(page.body.contains("of 10000"), "{}", &page.body[..2000.min(page.body.len())]);
    assert!(page.body.len() < 200 * 1024, "the first page is {} bytes", page.body.len());
    let filtered = f.get("/?label=env%3Dprod&phase=active&q=tenant-09", Some(&admin)).await;
    assert_eq!(rows(&filtered.body).len(), PER_PAGE);
    assert!(filtered.body.len() < 200 * 1024);
}
