//! A caller whose grants give it some tenants: its tenants in the list and
//! the live updates, the page of a missing tenant on the others, and the
//! scale form on its own when its grant is edit.

use cms_model::{GrantSpec, Kind, NodeGroup};
use cms_store::{Key, Store};
use http::StatusCode;
use serde_json::{Value, json};

use super::{Fixture, location, next_chunk};

fn update(frame: &str) -> Value {
    let data = frame.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or("null");
    serde_json::from_str(data).expect("JSON data")
}

async fn grant(f: &Fixture, name: &str, spec: Value) {
    let spec: GrantSpec = serde_json::from_value(spec).expect("a grant spec");
    f.auth.create_grant(name, spec).await.expect("a grant");
}

/// Tenants `a1` (team a) and `b1` (team b), each with group `cp`, and an
/// edit grant on team a to SSO group `a-devs`, whose member has no role.
async fn teams() -> (Fixture, String) {
    let f = Fixture::new().await;
    f.tenant("a1", json!({"team": "a"}), "active").await;
    f.tenant("b1", json!({"team": "b"}), "active").await;
    let spec = json!({"role": "edit", "subjects": [{"kind": "Group", "name": "a-devs"}], "tenants": {"selector": "team=a"}});
    grant(&f, "a-devs-edit", spec).await;
    let session = f.sso_session("dev@example.com", &["a-devs"]);
    (f, session)
}

#[tokio::test]
async fn a_granted_caller_sees_its_tenants_and_scales_them() {
    let (f, dev) = teams().await;
    let list = f.get("/", Some(&dev)).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert!(list.body.contains("data-tenant=\"a1\""), "{}", list.body);
    assert!(
        !list.body.contains("\"b1\"") && !list.body.contains("/tenants/b1"),
        "another team's tenant is not named: {}",
        list.body
    );
    assert!(list.body.contains("data-total=\"1\""), "{}", list.body);

    let page = f.get("/tenants/a1", Some(&dev)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("action=\"/tenants/a1/node-groups/cp/scale\""),
        "edit may scale: {}",
        page.body
    );
    assert!(
        page.body.contains("<span class=\"role\" id=\"role\">edit</span>"),
        "its role there: {}",
        page.body
    );
    assert!(!page.body.contains("/tenants/a1/delete"), "deleting stays an admin's");

    let hidden = f.get("/tenants/b1", Some(&dev)).await;
    let missing = f.get("/tenants/b9", Some(&dev)).await;
    assert_eq!((hidden.status, missing.status), (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND));
    let unnamed = |body: &str, name: &str| body.replace(&format!("&quot;{name}&quot;"), "&quot;NAME&quot;");
    assert_eq!(unnamed(&hidden.body, "b1"), unnamed(&missing.body, "b9"), "hidden is as missing");
    assert!(hidden.body.contains("tenant &quot;b1&quot; not found"), "{}", hidden.body);
    for path in ["/tenants/b1/kubeconfig", "/tenants/b1/edit", "/tenants/b1/backups"] {
        assert_eq!(f.get(path, Some(&dev)).await.status, StatusCode::NOT_FOUND, "{path}");
    }

    let scaled = f.submit("/tenants/a1/node-groups/cp/scale", &dev, &[("count", "2")]).await;
    assert_eq!(location(&scaled), "/tenants/a1");
    let group: NodeGroup =
        f.store.get(&Key::child(Kind::NodeGroup, "a1", "cp")).expect("cp").parse().expect("a group");
    assert_eq!(group.spec.count, 2);
    let refused = f.submit("/tenants/b1/node-groups/cp/scale", &dev, &[("count", "2")]).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    let group: NodeGroup =
        f.store.get(&Key::child(Kind::NodeGroup, "b1", "cp")).expect("cp").parse().expect("a group");
    assert_eq!(group.spec.count, 1, "another team's group is untouched");
    let delete = f.submit("/tenants/a1/delete", &dev, &[("confirm", "a1")]).await;
    assert_eq!(delete.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_view_grant_reads_without_the_scale_form() {
    let f = Fixture::new().await;
    f.tenant("a1", json!({"team": "a"}), "active").await;
    grant(
        &f,
        "ops-view",
        json!({"role": "view", "subjects": [{"kind": "Group", "name": "ops"}], "tenants": {"names": ["a1"]}}),
    )
    .await;
    let ops = f.sso_session("ops@example.com", &["ops"]);
    let page = f.get("/tenants/a1", Some(&ops)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("/node-groups/cp/scale"), "view may not scale: {}", page.body);
    let refused = f.submit("/tenants/a1/node-groups/cp/scale", &ops, &[("count", "2")]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.body.contains("role view may not"), "{}", refused.body);
    let nobody = f.sso_session("nobody@example.com", &["others"]);
    assert_eq!(
        f.get("/", Some(&nobody)).await.status,
        StatusCode::SEE_OTHER,
        "no role, no grant: signed out"
    );
}

#[tokio::test]
async fn live_updates_carry_a_granted_caller_s_tenants_only() {
    let (f, dev) = teams().await;
    let mut stream = f.open("/events", &dev).await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert!(update(&next_chunk(&mut stream).await).is_null(), "the position first");
    f.store.update_status(Key::tenant("b1"), json!({"phase": "failed"}), None).await.expect("written");
    f.machine("b1", "m1", true).await;
    f.store.update_status(Key::tenant("a1"), json!({"phase": "updating"}), None).await.expect("written");
    let a1 = update(&next_chunk(&mut stream).await);
    assert_eq!(
        (a1["type"].as_str(), a1["name"].as_str()),
        (Some("MODIFIED"), Some("a1")),
        "b1's changes are not sent"
    );

    // A tenant relabelled into the grant arrives as added, and out as deleted.
    let relabel = |team: &str| {
        let mut tenant: cms_model::Tenant =
            f.store.get(&Key::tenant("b1")).expect("b1").parse().expect("a tenant");
        tenant.metadata.labels.insert("team".into(), team.into());
        tenant
    };
    let tenancy = cms_tenancy::Tenancy::new(f.store.clone(), f.console.tenancy.secrets().clone());
    let mut moved = relabel("a");
    moved.metadata.resource_version = Some(f.store.get(&Key::tenant("b1")).expect("b1").resource_version);
    tenancy.update_tenant(moved).await.expect("relabelled");
    let joined = update(&next_chunk(&mut stream).await);
    assert_eq!((joined["type"].as_str(), joined["name"].as_str()), (Some("ADDED"), Some("b1")));
    let mut back = relabel("b");
    back.metadata.resource_version = Some(f.store.get(&Key::tenant("b1")).expect("b1").resource_version);
    tenancy.update_tenant(back).await.expect("relabelled");
    // The machine watch is a stream of its own: b1's machine may still
    // arrive, as b1's MODIFIED, now that b1 is shown.
    let mut left = update(&next_chunk(&mut stream).await);
    if left["type"] == "MODIFIED" {
        left = update(&next_chunk(&mut stream).await);
    }
    assert_eq!((left["type"].as_str(), left["name"].as_str()), (Some("DELETED"), Some("b1")));
}

#[tokio::test]
async fn admins_list_create_and_delete_grants() {
    let f = Fixture::new().await;
    let admin = f.sign_in(super::ADMIN).await;
    let empty = f.get("/grants", Some(&admin)).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(empty.body.contains("Grants: 0") && empty.body.contains("id=\"nav-grants\""), "{}", empty.body);
    let fields = [
        ("name", "a-devs-edit"),
        ("role", "edit"),
        ("users", "alice, bob"),
        ("groups", "a-devs\n"),
        ("workloads", "system:serviceaccount:ci:*"),
        ("tenants", "shared"),
        ("selector", "team=a"),
    ];
    let created = f.submit("/grants/new", &admin, &fields).await;
    assert_eq!(location(&created), "/grants");
    let stored = f.auth.accounts().grant("a-devs-edit".into()).await.expect("read").expect("created");
    let spec = serde_json::to_value(&stored.spec).expect("JSON");
    assert_eq!(spec["subjects"].as_array().map(Vec::len), Some(4), "{spec}");
    assert_eq!(spec["tenants"], json!({"names": ["shared"], "selector": "team=a"}));
    let list = f.get("/grants", Some(&admin)).await;
    assert!(
        list.body.contains("data-grant=\"a-devs-edit\"") && list.body.contains("team=a"),
        "{}",
        list.body
    );

    let bad = f
        .submit(
            "/grants/new",
            &admin,
            &[("name", "bad"), ("role", "view"), ("groups", "g"), ("selector", "team in (")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.body.contains("The grant was not created."), "{}", bad.body);
    let admin_role = f
        .submit(
            "/grants/new",
            &admin,
            &[("name", "root"), ("role", "admin"), ("groups", "g"), ("tenants", "x")],
        )
        .await;
    assert_eq!(admin_role.status, StatusCode::BAD_REQUEST, "admin is refused as the API refuses it");
    assert!(admin_role.body.contains("global role"), "{}", admin_role.body);

    let viewer = f.sign_in(super::VIEWER).await;
    assert_eq!(f.get("/grants", Some(&viewer)).await.status, StatusCode::FORBIDDEN);
    let forged = f.submit("/grants/a-devs-edit/delete", &viewer, &[("confirm", "a-devs-edit")]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let deleted = f.submit("/grants/a-devs-edit/delete", &admin, &[("confirm", "a-devs-edit")]).await;
    assert_eq!(location(&deleted), "/grants");
    assert!(f.auth.accounts().grants().await.expect("grants").is_empty());
}
