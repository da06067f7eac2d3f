//! Every error status that is reachable without authentication, each with the
//! body `{"error", "code", "status"}` (decisions §2).

use cms_e2e::fixtures::{TENANTS, control_plane_group, tenant, tenant_path, tenant_with_groups};
use cms_e2e::{Method, Server, raw};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_400() {
    let server = Server::start().await;
    let api = server.api();
    let created = api.post(TENANTS, &tenant("iota")).await.expect(201);

    let truncated =
        api.request(Method::POST, TENANTS).header("content-type", "application/json").body("{\"metadata\":");
    api.send(truncated).await.expect_error(400, "BadRequest");
    let empty = api.request(Method::POST, TENANTS).header("content-type", "application/json").body("");
    api.send(empty).await.expect_error(400, "BadRequest");

    api.get(&format!("{TENANTS}?limit=x")).await.expect_error(400, "BadRequest");

    // The path names one tenant and the body another.
    let mut other = created.clone();
    other["metadata"]["name"] = json!("kappa");
    api.put(&tenant_path("iota"), &other).await.expect_error(400, "BadRequest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_things_are_404_and_unserved_methods_405() {
    let server = Server::start().await;
    let api = server.api();

    for path in ["/api/v1/nothing-here", "/nothing-here", "/api/v2/tenants", "/api/v1/tenants/a/b/c/d/e"] {
        api.get(path).await.expect_error(404, "NotFound");
    }
    api.get(&tenant_path("lambda")).await.expect_error(404, "NotFound");

    let unserved = [
        (Method::DELETE, TENANTS.to_string()),
        (Method::PATCH, tenant_path("lambda")),
        (Method::POST, "/api/v1/machines".to_string()),
        (Method::POST, "/healthz".to_string()),
        (Method::DELETE, "/version".to_string()),
    ];
    for (method, path) in unserved {
        let request = api.request(method, &path).header("content-type", "application/json").body("{}");
        api.send(request).await.expect_error(405, "MethodNotAllowed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_are_409() {
    let server = Server::start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("mu")).await.expect(201);
    let message = api.post(TENANTS, &tenant("mu")).await.expect_error(409, "Conflict");
    assert!(message.contains("mu"), "the message names the tenant: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_one_mebibyte_are_413() {
    let server = Server::start().await;
    let mut body = tenant("nu");
    body["metadata"]["annotations"] = json!({"padding": "x".repeat(1024 * 1024 + 1024)});
    let body = serde_json::to_vec(&body).expect("a JSON body");
    let token = server.api().token().expect("a token").to_string();
    let head = format!(
        "POST {TENANTS} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json",
        server.addr()
    );
    let reply = raw::exchange(server.addr(), &head, body).await;
    assert_eq!(reply.status, 413, "{}\n{}", reply.head, reply.body);
    let error: serde_json::Value = serde_json::from_str(&reply.body).expect("a JSON error body");
    assert_eq!(error, json!({"error": error["error"], "code": "PayloadTooLarge", "status": 413}));
    assert!(error["error"].as_str().is_some_and(|message| !message.is_empty()), "{error}");

    // The server keeps serving, and nothing was created.
    server.api().get(&tenant_path("nu")).await.expect_error(404, "NotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_are_not_json_are_415() {
    let server = Server::start().await;
    let api = server.api();
    let body = serde_json::to_string(&tenant("xi")).expect("a JSON body");
    for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
        let request =
            api.request(Method::POST, TENANTS).header("content-type", content_type).body(body.clone());
        api.send(request).await.expect_error(415, "UnsupportedMediaType");
    }
    api.get(&tenant_path("xi")).await.expect_error(404, "NotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_break_rules_are_422_naming_the_field() {
    let server = Server::start().await;
    let api = server.api();
    let check = |body: serde_json::Value, field: &'static str| {
        let api = api.clone();
        async move {
            let message = api.post(TENANTS, &body).await.expect_error(422, "Invalid");
            assert!(message.contains(field), "the message names {field}: {message}");
        }
    };

    // A typo in a field name is never dropped silently.
    let mut typo = control_plane_group();
    typo.as_object_mut().expect("a group object").remove("count");
    typo["cout"] = json!(3);
    check(tenant_with_groups("omicron", vec![typo]), "spec.nodeGroups[0].cout").await;

    let mut bad_name = tenant("Bad_Name");
    check(bad_name.clone(), "metadata.name").await;
    bad_name["metadata"]["name"] = json!("a".repeat(64));
    check(bad_name, "metadata.name").await;

    let mut version = tenant("pi");
    version["spec"]["kubernetesVersion"] = json!("1.31");
    check(version, "spec.kubernetesVersion").await;

    let mut wrong_type = tenant("pi");
    wrong_type["spec"]["kubernetesVersion"] = json!(131);
    check(wrong_type, "spec.kubernetesVersion").await;

    let mut cidr = tenant("pi");
    cidr["spec"]["podNetwork"] = json!(["10.0.0.0/33"]);
    check(cidr, "spec.podNetwork[0]").await;

    let mut zero = control_plane_group();
    zero["count"] = json!(0);
    check(tenant_with_groups("pi", vec![zero]), "spec.nodeGroups[0].count").await;

    let mut provider = control_plane_group();
    provider["providerClass"] = json!("aws:m5.large");
    check(tenant_with_groups("pi", vec![provider]), "spec.nodeGroups[0].providerClass").await;

    check(json!({"metadata": {"name": "pi"}, "spec": {"kubernetesVersion": "1.31.1"}, "extra": 1}), "extra")
        .await;
    api.get(&tenant_path("pi")).await.expect_error(404, "NotFound");

    // A PUT must carry the version it read.
    let created = api.post(TENANTS, &tenant("rho")).await.expect(201);
    let mut unversioned = created.clone();
    unversioned["metadata"].as_object_mut().expect("a metadata object").remove("resourceVersion");
    let message = api.put(&tenant_path("rho"), &unversioned).await.expect_error(422, "Invalid");
    assert!(message.contains("resourceVersion"), "the message names the field: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projected_state_is_503_before_any_apply() {
    let server = Server::start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("sigma")).await.expect(201);
    for path in [
        "/api/v1/projected".to_string(),
        format!("{}/projected", tenant_path("sigma")),
        format!("{}/projected/Machine", tenant_path("sigma")),
        format!("{}/projected/machine", tenant_path("sigma")),
    ] {
        api.get(&path).await.expect_error(503, "Unavailable");
    }
}
