//! Projected state: 503 until a provisioning run records it, then served.

use cms_model::Projected;
use cms_store::Store;
use serde_json::json;

use crate::harness;

#[actix_web::test]
async fn projected_is_unavailable_until_recorded() {
    let h = harness().await;
    h.tenant("t1").await;
    h.get("/api/v1/projected").await.error(503, "Unavailable");
    h.get("/api/v1/tenants/t1/projected").await.error(503, "Unavailable");
    h.get("/api/v1/tenants/t9/projected/machine").await.error(404, "NotFound");

    let item = |kind: &str, name: &str| Projected {
        tenant: "t1".to_string(),
        kind: kind.to_string(),
        tf_type: "terraform_data".to_string(),
        name: name.to_string(),
        spec: json!({"address": "10.0.0.1"}),
    };
    h.store
        .set_projection("t1".to_string(), vec![item("Machine", "w-0"), item("DataSource", "img")])
        .await
        .expect("projection recorded");

    let all = h.get("/api/v1/projected").await;
    assert_eq!(all.status.as_u16(), 200);
    assert_eq!(all.json()["items"].as_array().map(Vec::len), Some(2));
    let machines = h.get("/api/v1/tenants/t1/projected/MACHINE").await.json();
    assert_eq!(machines["items"].as_array().map(Vec::len), Some(1), "{machines}");
    assert_eq!(machines["items"][0]["tfType"], "terraform_data");
    let none = h.get("/api/v1/tenants/t1/projected/network").await.json();
    assert_eq!(none, json!({"items": [], "total": 0}));
    let page = h.get("/api/v1/projected?limit=1&offset=1").await.json();
    assert_eq!(page["total"], 2, "{page}");
    assert_eq!(page["items"][0]["name"], "w-0", "sorted by name, the second of two: {page}");
    h.get("/api/v1/projected?limit=abc").await.error(400, "BadRequest");
}
