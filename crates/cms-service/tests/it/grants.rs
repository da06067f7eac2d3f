//! Grants over HTTP: their API (admins only, validated, audited, with
//! optimistic concurrency), and what they give a caller with no global
//! role: its tenants in lists and the watch, 404 on the others exactly as
//! for a missing tenant, 403 where it sees but may not change, creates and
//! relabels within its grants, and client configs of its role there.

use actix_web::test::TestRequest;
use cms_model::UserRole;
use serde_json::{Value, json};

use crate::downloads::certificate;
use crate::{harness, json as with_json, next_chunk};

const GRANT: &str = r#"{"metadata":{"name":"a-devs-edit"},"spec":{"role":"edit",
    "subjects":[{"kind":"User","name":"alice"},{"kind":"Group","name":"a-devs"},
    {"kind":"Workload","name":"system:serviceaccount:ns:*"}],"tenants":{"names":["x"],"selector":"team=a"}}}"#;

fn tenant(name: &str, team: &str) -> String {
    json!({"metadata": {"name": name, "labels": {"team": team}},
        "spec": {"kubernetesVersion": "1.31.0", "controlPlaneEndpoint": format!("https://{name}.example:6443")}})
    .to_string()
}

#[actix_web::test]
async fn grants_are_resources_for_admins() {
    let h = harness().await;
    let created = h.post("/api/v1/grants", GRANT).await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.text());
    let body = created.json();
    assert_eq!(body["metadata"]["resourceVersion"], 1);
    assert_eq!(body["spec"]["tenants"], json!({"names": ["x"], "selector": "team=a"}));
    h.post("/api/v1/grants", GRANT).await.error(409, "Conflict");
    let list = h.get("/api/v1/grants").await.json();
    assert_eq!(
        (list["total"].clone(), list["items"][0]["metadata"]["name"].clone()),
        (json!(1), json!("a-devs-edit"))
    );
    h.get("/api/v1/grants?labelSelector=a%3Db").await.error(400, "BadRequest");

    let mut changed = h.get("/api/v1/grants/a-devs-edit").await.json();
    changed["spec"]["role"] = json!("view");
    let updated = h.put("/api/v1/grants/a-devs-edit", &changed.to_string()).await;
    assert_eq!(
        (updated.status.as_u16(), updated.json()["metadata"]["resourceVersion"].clone()),
        (200, json!(2))
    );
    h.put("/api/v1/grants/a-devs-edit", &changed.to_string()).await.error(409, "Conflict");
    h.put("/api/v1/grants/other", &changed.to_string()).await.error(400, "BadRequest");
    changed["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    h.put("/api/v1/grants/a-devs-edit", &changed.to_string()).await.error(422, "Invalid");

    let refused = [
        (
            r#"{"metadata":{"name":"g"},"spec":{"role":"admin","subjects":[{"kind":"Group","name":"g"}],"tenants":{"names":["x"]}}}"#,
            400,
            "global role",
        ),
        (
            r#"{"metadata":{"name":"g"},"spec":{"role":"edit","subjects":[{"kind":"Group","name":"g"}],"tenants":{"selector":"team in ("}}}"#,
            422,
            "spec.tenants.selector",
        ),
        (
            r#"{"metadata":{"name":"g"},"spec":{"role":"edit","subjects":[{"kind":"Group","name":"a\u0007b"}],"tenants":{"names":["x"]}}}"#,
            422,
            "spec.subjects[0].name",
        ),
        (
            r#"{"metadata":{"name":"g"},"spec":{"role":"edit","subjects":[{"kind":"User","name":"../../etc"}],"tenants":{"names":["x"]}}}"#,
            422,
            "spec.subjects[0].name",
        ),
        (
            r#"{"metadata":{"name":"g"},"spec":{"role":"edit","subjects":[],"tenants":{"names":["x"]}}}"#,
            422,
            "spec.subjects",
        ),
        (
            r#"{"metadata":{"name":"g"},"spec":{"role":"edit","subjects":[{"kind":"Group","name":"g"}],"tenants":{"names":["x"]},"extra":1}}"#,
            422,
            "extra",
        ),
        (
            r#"{"metadata":{"name":"g","labels":{"a":"b"}},"spec":{"role":"edit","subjects":[{"kind":"Group","name":"g"}],"tenants":{"names":["x"]}}}"#,
            422,
            "labels",
        ),
        (
            r#"{"metadata":{"name":"G!"},"spec":{"role":"edit","subjects":[{"kind":"Group","name":"g"}],"tenants":{"names":["x"]}}}"#,
            422,
            "metadata.name",
        ),
    ];
    for (body, status, words) in refused {
        let reply = h.post("/api/v1/grants", body).await;
        let code = if status == 400 { "BadRequest" } else { "Invalid" };
        let message = reply.error(status, code);
        assert!(message.contains(words), "{body}: {message}");
    }
    let many: Vec<Value> = (0..=cms_model::MAX_GRANT_SUBJECTS)
        .map(|i| json!({"kind": "Group", "name": format!("g{i}")}))
        .collect();
    let body = json!({"metadata": {"name": "many"}, "spec": {"role": "view", "subjects": many, "tenants": {"names": ["x"]}}});
    h.post("/api/v1/grants", &body.to_string()).await.error(422, "Invalid");

    let editor = h.user("editor", UserRole::Edit).await;
    h.get_as("/api/v1/grants", &editor).await.error(403, "Forbidden");
    assert_eq!(h.delete("/api/v1/grants/a-devs-edit").await.status.as_u16(), 204);
    h.get("/api/v1/grants/a-devs-edit").await.error(404, "NotFound");
    h.delete("/api/v1/grants/a-devs-edit").await.error(404, "NotFound");

    let audit = h.get("/api/v1/audit?limit=50").await.json();
    let kinds: Vec<&str> =
        audit["items"].as_array().unwrap().iter().filter_map(|r| r["target"]["kind"].as_str()).collect();
    assert_eq!(kinds.len(), audit["total"].as_u64().unwrap() as usize, "{audit}");
    assert!(kinds.iter().all(|kind| *kind == "Grant"), "grant writes are audited with their kind: {audit}");
}

#[actix_web::test]
async fn a_user_with_no_role_sees_and_changes_only_what_its_grants_give() {
    let h = harness().await;
    for (name, team) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        assert_eq!(h.post("/api/v1/tenants", &tenant(name, team)).await.status.as_u16(), 201);
    }
    let grant = r#"{"metadata":{"name":"alice-a"},"spec":{"role":"edit","subjects":[{"kind":"User","name":"alice"}],
        "tenants":{"selector":"team=a"}}}"#;
    assert_eq!(h.post("/api/v1/grants", grant).await.status.as_u16(), 201);
    let view = r#"{"metadata":{"name":"alice-b1"},"spec":{"role":"view","subjects":[{"kind":"User","name":"alice"}],
        "tenants":{"names":["b2"]}}}"#;
    assert_eq!(h.post("/api/v1/grants", view).await.status.as_u16(), 201);
    let alice = {
        let created = h
            .post(
                "/api/v1/users",
                r#"{"metadata":{"name":"alice"},"spec":{"role":"none","password":"alice-password"}}"#,
            )
            .await;
        assert_eq!(created.json()["spec"]["role"], "none", "{}", created.text());
        let login = h.post("/api/v1/auth/login", r#"{"username":"alice","password":"alice-password"}"#).await;
        login.json()["token"].as_str().expect("a token").to_string()
    };
    let as_alice = |request: TestRequest| request.insert_header(("authorization", format!("Bearer {alice}")));

    let list = h.get_as("/api/v1/tenants", &alice).await.json();
    let names: Vec<&str> =
        list["items"].as_array().unwrap().iter().filter_map(|t| t["metadata"]["name"].as_str()).collect();
    assert_eq!((names, list["total"].clone()), (vec!["a1", "a2"], json!(2)));
    let paged = h.get_as("/api/v1/tenants?limit=1&offset=1", &alice).await.json();
    assert_eq!(
        (paged["items"][0]["metadata"]["name"].clone(), paged["total"].clone()),
        (json!("a2"), json!(2))
    );

    // Another team's tenant is answered as one that does not exist.
    let hidden = h.get_as("/api/v1/tenants/b1", &alice).await;
    let missing = h.get_as("/api/v1/tenants/b9", &alice).await;
    assert_eq!(hidden.error(404, "NotFound"), "tenant \"b1\" not found");
    assert_eq!(missing.error(404, "NotFound"), "tenant \"b9\" not found");
    for path in ["/machines", "/kubeconfig", "/node-groups", "/health", "/backups", "/projected"] {
        let message = h.get_as(&format!("/api/v1/tenants/b1{path}"), &alice).await.error(404, "NotFound");
        assert_eq!(message, "tenant \"b1\" not found", "{path}");
    }
    let put = with_json(as_alice(TestRequest::put().uri("/api/v1/tenants/b1")), &tenant("b1", "a"));
    h.send_as(put).await.error(404, "NotFound");
    h.send_as(as_alice(TestRequest::delete().uri("/api/v1/tenants/b1"))).await.error(404, "NotFound");
    // Its own: read and changed, never deleted (admins only).
    assert_eq!(h.get_as("/api/v1/tenants/a1", &alice).await.status.as_u16(), 200);
    h.send_as(as_alice(TestRequest::delete().uri("/api/v1/tenants/a1"))).await.error(403, "Forbidden");
    h.get_as("/api/v1/tenants/a1/secrets", &alice).await.error(403, "Forbidden");
    h.get_as("/api/v1/users", &alice).await.error(403, "Forbidden");

    // Creates and relabels stay within the grants.
    let create = |body: String| with_json(as_alice(TestRequest::post().uri("/api/v1/tenants")), &body);
    assert_eq!(h.send_as(create(tenant("a3", "a"))).await.status.as_u16(), 201);
    let message = h.send_as(create(tenant("b3", "b"))).await.error(403, "Forbidden");
    assert!(message.contains("no grant"), "{message}");
    h.send_as(create(tenant("b1", "b"))).await.error(403, "Forbidden");
    let mut a1 = h.get_as("/api/v1/tenants/a1", &alice).await.json();
    a1["metadata"]["labels"]["team"] = json!("b");
    let relabel = with_json(as_alice(TestRequest::put().uri("/api/v1/tenants/a1")), &a1.to_string());
    h.send_as(relabel).await.error(403, "Forbidden");
    a1["metadata"]["labels"]["team"] = json!("a");
    a1["metadata"]["labels"]["tier"] = json!("gold");
    let kept = with_json(as_alice(TestRequest::put().uri("/api/v1/tenants/a1")), &a1.to_string());
    assert_eq!(h.send_as(kept).await.status.as_u16(), 200);
    let stale = with_json(as_alice(TestRequest::put().uri("/api/v1/tenants/a1")), &a1.to_string());
    h.send_as(stale).await.error(409, "Conflict");

    // Its kubeconfig is of its role there: edit.
    let kubeconfig = h.get_as("/api/v1/tenants/a1/kubeconfig", &alice).await.yaml("a1-kubeconfig.yaml");
    let (groups, _, _) = certificate(&kubeconfig["users"][0]["user"]["client-certificate-data"]);
    assert_eq!(groups, ["system:masters"]);

    // A view grant: read-only credentials, no writes.
    let mut b1 = h.get("/api/v1/tenants/b1").await.json();
    b1["metadata"]["name"] = json!("b2");
    b1["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    assert_eq!(h.post("/api/v1/tenants", &b1.to_string()).await.status.as_u16(), 201);
    let kubeconfig = h.get_as("/api/v1/tenants/b2/kubeconfig", &alice).await.yaml("b2-kubeconfig.yaml");
    let (groups, _, _) = certificate(&kubeconfig["users"][0]["user"]["client-certificate-data"]);
    assert_eq!(groups, ["cms:viewers"]);
    let talosconfig = h.get_as("/api/v1/tenants/b2/talosconfig", &alice).await.yaml("b2-talosconfig.yaml");
    let (roles, _, _) = certificate(&talosconfig["contexts"]["b2"]["crt"]);
    assert_eq!(roles, ["os:reader"]);
    let group = r#"{"metadata":{"name":"w"},"spec":{"role":"worker","count":1,"providerClass":"metal:bare","providerConfig":{"hosts":[{"address":"10.0.0.9"}]}}}"#;
    let post = with_json(as_alice(TestRequest::post().uri("/api/v1/tenants/b2/node-groups")), group);
    let message = h.send_as(post).await.error(403, "Forbidden");
    assert!(message.contains("role view"), "the role on the tenant is named: {message}");
    let post = with_json(as_alice(TestRequest::post().uri("/api/v1/tenants/a1/node-groups")), group);
    assert_eq!(h.send_as(post).await.status.as_u16(), 201);
    let machines = h.get_as("/api/v1/machines", &alice).await.json();
    assert_eq!(machines["total"], 0);

    // Deleting the grant ends what it gave at the next request.
    assert_eq!(h.delete("/api/v1/grants/alice-a").await.status.as_u16(), 204);
    h.get_as("/api/v1/tenants/a1", &alice).await.error(404, "NotFound");
}

#[actix_web::test]
async fn the_watch_shows_a_granted_caller_its_tenants_only() {
    let h = harness().await;
    for (name, team) in [("a1", "a"), ("b1", "b")] {
        assert_eq!(h.post("/api/v1/tenants", &tenant(name, team)).await.status.as_u16(), 201);
    }
    let grant = r#"{"metadata":{"name":"alice-a"},"spec":{"role":"view","subjects":[{"kind":"User","name":"alice"}],
        "tenants":{"selector":"team=a"}}}"#;
    assert_eq!(h.post("/api/v1/grants", grant).await.status.as_u16(), 201);
    h.state.auth.create_user("alice", None, &secrecy::SecretString::from("alice-password")).await.unwrap();
    let alice =
        h.state.auth.login("alice", &secrecy::SecretString::from("alice-password"), None).await.unwrap().0;
    let request = TestRequest::get()
        .uri("/api/v1/tenants?watch=true")
        .insert_header(("authorization", format!("Bearer {alice}")));
    let response = h.open_as(request).await;
    assert_eq!(response.status().as_u16(), 200);
    let mut body = response.into_body();
    let mut text = String::new();
    while !text.contains("id: ") {
        let chunk = next_chunk(&mut body).await.expect("the burst and its end");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains("\"name\":\"a1\"") && !text.contains("\"name\":\"b1\""), "{text}");
    // b1 joins the caller's tenants when relabelled, and leaves again.
    let mut b1 = h.get("/api/v1/tenants/b1").await.json();
    b1["metadata"]["labels"]["team"] = json!("a");
    assert_eq!(h.put("/api/v1/tenants/b1", &b1.to_string()).await.status.as_u16(), 200);
    let joined = String::from_utf8_lossy(&next_chunk(&mut body).await.expect("an event")).into_owned();
    assert!(joined.contains("\"type\":\"ADDED\"") && joined.contains("\"name\":\"b1\""), "{joined}");
    let mut b1 = h.get("/api/v1/tenants/b1").await.json();
    b1["metadata"]["labels"]["team"] = json!("b");
    assert_eq!(h.put("/api/v1/tenants/b1", &b1.to_string()).await.status.as_u16(), 200);
    let left = String::from_utf8_lossy(&next_chunk(&mut body).await.expect("an event")).into_owned();
    assert!(left.contains("\"type\":\"DELETED\"") && left.contains("\"name\":\"b1\""), "{left}");
    h.post("/api/v1/tenants", &tenant("b2", "b")).await;
    h.post("/api/v1/tenants", &tenant("a2", "a")).await;
    let next = String::from_utf8_lossy(&next_chunk(&mut body).await.expect("an event")).into_owned();
    assert!(
        next.contains("\"name\":\"a2\"") && !next.contains("\"name\":\"b2\""),
        "b2 is never sent: {next}"
    );
}
