//! The tenant page and its forms, the create form, the downloads, and what
//! a viewer sees and is refused.

use cms_model::{Kind, NodeGroup};
use cms_store::{Key, Store};
use http::StatusCode;
use serde_json::json;

use super::{ADMIN, Fixture, VIEWER, location};

fn node_group(f: &Fixture, tenant: &str, name: &str) -> NodeGroup {
    let object = f.store.get(&Key::child(Kind::NodeGroup, tenant, name)).expect("the node group exists");
    object.parse().expect("a node group")
}

#[tokio::test]
async fn the_tenant_page_shows_spec_conditions_groups_and_machines() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "provisioning").await;
    f.machine("demo", "m-1", true).await;
    let condition = json!({"type": "Ready", "status": "False", "reason": "Waiting", "message": "for machines",
        "lastTransitionTime": "2026-01-02T03:04:05Z"});
    let status = json!({"phase": "provisioning", "conditions": [condition]});
    f.store.update_status(Key::tenant("demo"), status, None).await.expect("status written");
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    for expected in [
        "<section id=\"tenant\" data-tenant=\"demo\" data-revision=\"",
        "<dd class=\"phase\" id=\"phase\" data-phase=\"provisioning\">provisioning</dd>",
        "<dd class=\"ready\" id=\"ready\" data-ready=\"no\">no</dd>",
        "<dt id=\"message-label\">Why not ready</dt><dd class=\"message\" id=\"message\">no reason reported yet</dd>",
        "<dd class=\"kubernetes\">1.31.0</dd>",
        "<dd class=\"installer\">ghcr.io/siderolabs/installer:v",
        "<dd class=\"pod-network\">10.244.0.0/16</dd>",
        "<table id=\"conditions\"",
        "<tr data-condition=\"Ready\"><th class=\"type\" scope=\"row\">Ready</th><td class=\"status\">False</td><td class=\"reason\">Waiting</td>",
        "<tr data-node-group=\"cp\">",
        "<td class=\"role\">controlplane</td>",
        "action=\"/tenants/demo/node-groups/cp/scale\"",
        "<label for=\"count-cp\">",
        "<tr data-machine=\"m-1\">",
        "<td class=\"address\">10.0.0.1:50000</td>",
        "<td class=\"talos\">1.11.0</td>",
        "href=\"/tenants/demo/kubeconfig\"",
        "href=\"/tenants/demo/talosconfig\"",
        "id=\"delete-tenant\" method=\"post\" action=\"/tenants/demo/delete\"",
    ] {
        assert!(body.contains(expected), "{expected} in {body}");
    }
    let missing = f.get("/tenants/nothing", Some(&admin)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.body.contains("tenant &quot;nothing&quot; not found"), "{}", missing.body);
}

/// The headline comes first, says why a tenant is not ready, and is marked
/// ready (the stylesheet's green) only when the tenant is.
#[tokio::test]
async fn the_headline_says_ready_or_why_not_before_anything_else() {
    let f = Fixture::new().await;
    f.tenant("down", json!({}), "active").await;
    let blocker = "4 of 4 machines unreachable: cp-0: could not connect to 10.0.0.1:50000: connection refused \
                   (and 3 more); check that the hosts are powered on and reachable from the service";
    let status = json!({"phase": "active", "ready": false, "message": blocker});
    f.store.update_status(Key::tenant("down"), status, None).await.expect("status written");
    f.tenant("up", json!({}), "active").await;
    f.store
        .update_status(Key::tenant("up"), json!({"phase": "active", "ready": true}), None)
        .await
        .expect("up");
    let admin = f.sign_in(ADMIN).await;

    let body = f.get("/tenants/down", Some(&admin)).await.body;
    let headline =
        body.find("<section class=\"headline\" id=\"headline\" data-ready=\"no\" data-phase=\"active\"");
    let headline = headline.unwrap_or_else(|| panic!("a headline that is not ready in {body}"));
    let heading = body.find("<h1>Tenant down</h1>").expect("the page's heading");
    let spec = body.find("<h2>Spec</h2>").expect("the spec");
    assert!(heading < headline && headline < spec, "the headline comes right after the heading");
    let expected = format!(
        "<dt id=\"message-label\">Why not ready</dt><dd class=\"message\" id=\"message\">{blocker}</dd>"
    );
    assert!(body.contains(&expected), "{body}");
    assert!(body[headline..spec].find("id=\"ready\"") < body[headline..spec].find("id=\"message\""));

    let body = f.get("/tenants/up", Some(&admin)).await.body;
    assert!(body.contains("<section class=\"headline\" id=\"headline\" data-ready=\"yes\""), "{body}");
    assert!(
        body.contains("<dt id=\"message-label\">Message</dt><dd class=\"message\" id=\"message\">none</dd>")
    );

    // The tenants table says which tenants are not ready, and why.
    let body = f.get("/", Some(&admin)).await.body;
    let down = format!("<td class=\"ready\" data-ready=\"no\">no</td><td class=\"message\">{blocker}</td>");
    assert!(body.contains(&down), "{body}");
    assert!(
        body.contains("<td class=\"ready\" data-ready=\"yes\">yes</td><td class=\"message\"></td>"),
        "{body}"
    );
    assert!(body.contains("<tr data-tenant=\"down\" data-ready=\"no\">"), "{body}");
}

#[tokio::test]
async fn scaling_replaces_the_node_group_through_tenancy() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    let before = node_group(&f, "demo", "cp");
    let reply = f.submit("/tenants/demo/node-groups/cp/scale", &admin, &[("count", "2")]).await;
    assert_eq!(location(&reply), "/tenants/demo");
    let after = node_group(&f, "demo", "cp");
    assert_eq!(after.spec.count, 2);
    assert!(after.metadata.resource_version > before.metadata.resource_version);
    assert_eq!(after.spec.metal_hosts(), before.spec.metal_hosts(), "the rest of the spec stays");

    let refused = f.submit("/tenants/demo/node-groups/cp/scale", &admin, &[("count", "3")]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.body.contains(
            "<p class=\"field-error\" id=\"count-cp-error\">lists 2 hosts but its machines need 3: \
             machine &lt;group&gt;-&lt;i&gt; takes hosts[i]</p>"
        ),
        "{}",
        refused.body
    );
    assert!(refused.body.contains("aria-describedby=\"count-cp-error\""));
    let words = f.submit("/tenants/demo/node-groups/cp/scale", &admin, &[("count", "many")]).await;
    assert_eq!(words.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(node_group(&f, "demo", "cp").spec.count, 2);
    let missing = f.submit("/tenants/demo/node-groups/none/scale", &admin, &[("count", "1")]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn scaling_past_the_caps_shows_the_422_at_the_form() {
    let f = Fixture::with_caps(2, 3).await;
    f.tenant("demo", json!({}), "active").await;
    let workers = json!({"name": "w", "role": "worker", "count": 2, "providerClass": "metal:bare",
        "providerConfig": {"hosts": [{"address": "10.0.1.1"}, {"address": "10.0.1.2"}]}});
    let draft = cms_store::Draft { spec: workers, ..cms_store::Draft::default() };
    f.store.create(Key::child(Kind::NodeGroup, "demo", "w"), draft).await.expect("1 + 2 machines fit");
    let admin = f.sign_in(ADMIN).await;

    let refused = f.submit("/tenants/demo/node-groups/cp/scale", &admin, &[("count", "2")]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    assert!(
        refused.body.contains(
            "<p class=\"field-error\" id=\"count-cp-error\">tenant &quot;demo&quot; would have 4 machines"
        ),
        "{}",
        refused.body
    );
    assert_eq!(node_group(&f, "demo", "cp").spec.count, 1, "nothing was written");
    let shrunk = f.submit("/tenants/demo/node-groups/w/scale", &admin, &[("count", "1")]).await;
    assert_eq!(location(&shrunk), "/tenants/demo");
    let grown = f.submit("/tenants/demo/node-groups/cp/scale", &admin, &[("count", "2")]).await;
    assert_eq!(location(&grown), "/tenants/demo", "2 + 1 machines fit");
}

#[tokio::test]
async fn deleting_needs_the_tenant_s_name_typed() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    let mismatch = f.submit("/tenants/demo/delete", &admin, &[("confirm", "dmeo")]).await;
    assert_eq!(mismatch.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(mismatch.body.contains("<p class=\"field-error\" id=\"confirm-error\">"), "{}", mismatch.body);
    assert!(f.store.get(&Key::tenant("demo")).is_some_and(|tenant| !tenant.deleting));
    let deleted = f.submit("/tenants/demo/delete", &admin, &[("confirm", "demo")]).await;
    assert_eq!(location(&deleted), "/");
    assert!(f.store.get(&Key::tenant("demo")).is_some_and(|tenant| tenant.deleting));
    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert!(page.body.contains("id=\"deleting\""));
    assert!(!page.body.contains("id=\"delete-tenant\""), "no delete form while deleting");
}

#[tokio::test]
async fn a_viewer_sees_no_controls_and_is_refused_by_the_permission_table() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let viewer = f.sign_in(VIEWER).await;
    let page = f.get("/tenants/demo", Some(&viewer)).await;
    assert_eq!(page.status, StatusCode::OK);
    for control in ["class=\"scale\"", "id=\"delete-tenant\"", "create-tenant", "name=\"count\""] {
        assert!(!page.body.contains(control), "a viewer sees no {control}");
    }
    assert!(page.body.contains("id=\"download-kubeconfig\""), "viewers download configs");
    let attempts = [
        (
            "/tenants/demo/node-groups/cp/scale",
            vec![("count", "3")],
            "role view may not create or update resources",
        ),
        ("/tenants/demo/delete", vec![("confirm", "demo")], "role view may not delete tenants"),
        ("/tenants/new", vec![("name", "x"), ("kubernetesVersion", "1.31.0")], "role view may not create"),
    ];
    for (path, fields, message) in attempts {
        let reply = f.submit(path, &viewer, &fields).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        assert!(reply.body.contains(message), "{path}: {}", reply.body);
        assert!(reply.body.contains("<h1>Forbidden</h1>"), "a page: {}", reply.body);
    }
    assert_eq!(node_group(&f, "demo", "cp").spec.count, 1);
    assert!(f.store.get(&Key::tenant("demo")).is_some_and(|tenant| !tenant.deleting));
    assert_eq!(f.get("/tenants/new", Some(&viewer)).await.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_create_form_shows_refusals_at_their_fields() {
    let f = Fixture::new().await;
    let admin = f.sign_in(ADMIN).await;
    let form = f.get("/tenants/new", Some(&admin)).await;
    assert_eq!(form.status, StatusCode::OK);
    for field in [
        "data-field=\"metadata.name\"",
        "data-field=\"spec.kubernetesVersion\"",
        "data-field=\"spec.talosVersion\"",
        "data-field=\"spec.controlPlaneEndpoint\"",
        "data-field=\"spec.nodeGroups[0].name\"",
        "data-field=\"spec.nodeGroups[0].count\"",
        "data-field=\"spec.nodeGroups[0].providerClass\"",
        "data-field=\"spec.nodeGroups[0].providerConfig.hosts\"",
        "<label for=\"hosts\">",
        "<textarea id=\"hosts\" name=\"hosts\"",
    ] {
        assert!(form.body.contains(field), "{field} in {}", form.body);
    }
    let fields = [
        ("name", "acme"),
        ("kubernetesVersion", "1.31"),
        ("groupName", "cp"),
        ("count", "1"),
        ("providerClass", "metal:bare"),
        ("hosts", "10.0.0.1"),
    ];
    let refused = f.submit("/tenants/new", &admin, &fields).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    let body = &refused.body;
    assert!(body.contains("<p class=\"field-error\" id=\"kubernetesVersion-error\">"), "{body}");
    assert!(body.contains("aria-describedby=\"kubernetesVersion-hint kubernetesVersion-error\""), "{body}");
    assert!(body.contains("value=\"1.31\""), "the form keeps what was typed");
    assert!(f.store.get(&Key::tenant("acme")).is_none());

    let mut fields = fields;
    fields[1] = ("kubernetesVersion", "1.31.0");
    fields[5] = ("hosts", "10.0.0.1\r\nnot-an-address");
    let hosts = f.submit("/tenants/new", &admin, &fields).await;
    assert_eq!(hosts.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        hosts.body.contains("<p class=\"field-error\" id=\"hosts-error\">[1].address: "),
        "{}",
        hosts.body
    );

    fields[5] = ("hosts", "10.0.0.1\n");
    let endpoint = [("controlPlaneEndpoint", "https://10.0.0.1:6443")];
    let all: Vec<_> = fields.iter().chain(endpoint.iter()).copied().collect();
    let created = f.submit("/tenants/new", &admin, &all).await;
    assert_eq!(location(&created), "/tenants/acme");
    assert!(f.store.get(&Key::tenant("acme")).is_some());
    assert!(f.store.secrets("acme".into()).await.expect("readable").is_some(), "secrets were made");

    let again = f.submit("/tenants/new", &admin, &all).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("<p class=\"field-error\" id=\"name-error\">"), "{}", again.body);

    let kubeconfig = f.get("/tenants/acme/kubeconfig", Some(&admin)).await;
    assert_eq!(kubeconfig.status, StatusCode::OK, "{}", kubeconfig.body);
    assert_eq!(kubeconfig.header("content-type"), "application/yaml");
    assert_eq!(kubeconfig.header("content-disposition"), "attachment; filename=\"acme-kubeconfig.yaml\"");
    assert_eq!(kubeconfig.header("cache-control"), "no-store");
    assert!(kubeconfig.body.contains("https://10.0.0.1:6443"));
    let short = f.get("/tenants/acme/talosconfig?ttl=10s", Some(&admin)).await;
    assert_eq!(short.status, StatusCode::BAD_REQUEST);
    let talosconfig = f.get("/tenants/acme/talosconfig?ttl=2h", Some(&admin)).await;
    assert_eq!(talosconfig.header("content-disposition"), "attachment; filename=\"acme-talosconfig.yaml\"");
    assert_eq!(
        location(&f.get("/tenants/acme/kubeconfig", None).await),
        "/login?next=%2Ftenants%2Facme%2Fkubeconfig"
    );
}

#[tokio::test]
async fn an_autoscaled_group_shows_its_range_by_its_count() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let workers = json!({"name": "w", "role": "worker", "count": 2, "providerClass": "metal:bare",
        "providerConfig": {"hosts": [{"address": "10.0.1.1"}, {"address": "10.0.1.2"}, {"address": "10.0.1.3"}]},
        "autoscaling": {"minCount": 1, "maxCount": 3}});
    let draft = cms_store::Draft { spec: workers, ..cms_store::Draft::default() };
    f.store.create(Key::child(Kind::NodeGroup, "demo", "w"), draft).await.expect("group created");
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    let expected = "<td class=\"count\">2 <span class=\"autoscaling\">autoscaled 1–3</span></td>";
    assert!(body.contains(expected), "{expected} in {body}");
    assert!(body.contains("<td class=\"count\">1</td>"), "the control planes are not autoscaled: {body}");
}
