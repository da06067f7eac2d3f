//! Per-tenant grants on the real server with a real OpenID Connect provider
//! (oidc-provider-mock): a grant of edit on `team=a` to the group `a-devs`,
//! made with `cms create grant`, lets a member of `a-devs` whose groups map
//! to no role sign in; it lists team a's tenants only, gets 404 on the
//! others exactly as on a missing tenant, watches its tenants only, and
//! scales its own in the console (headless Chromium).

use std::time::Duration;

use cms_e2e::browser::{Browser, Fetch};
use cms_e2e::cli::Cli;
use cms_e2e::fixtures::TENANTS;
use cms_e2e::oidc::OidcProvider;
use cms_e2e::{Server, Watch};
use serde_json::{Value, json};

use crate::sso::{api_sign_in, kube_subject, sso_server};

const WAIT: Duration = Duration::from_secs(15);

/// A tenant of `team`, with one control-plane group of two hosts.
fn team_tenant(name: &str, team: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"team": team}},
        "spec": {"kubernetesVersion": "1.31.1", "controlPlaneEndpoint": "https://10.0.0.1:6443",
            "nodeGroups": [{"name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:bare",
                "providerConfig": {"hosts": [{"address": "10.0.0.1"}, {"address": "10.0.0.2"}]}}]}
    })
}

/// A server with tenants a1, a2 (team a) and b1 (team b), whose provider
/// knows `ann`, in `a-devs` only, a group that maps to no role.
async fn teams() -> (OidcProvider, Server) {
    let provider = OidcProvider::start().await;
    provider.set_user("ann", json!({"email": "ann@example.com", "groups": ["a-devs"]})).await;
    let server = sso_server(&provider).await;
    for (name, team) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        server.api().post(TENANTS, &team_tenant(name, team)).await.expect(201);
    }
    (provider, server)
}

/// The names of a list's items.
fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["metadata"]["name"].as_str())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn a_group_granted_edit_on_a_label_sees_and_changes_only_its_tenants() {
    let (provider, server) = teams().await;
    let anonymous = server.api().with_token(None);

    // Before the grant, ann's groups give nothing: the sign-in is refused.
    let (status, reply) = api_sign_in(&anonymous, &provider, "ann", None).await;
    assert_eq!(status, 403, "{reply}");

    let admin_token = server.api().token().expect("the admin's token").to_string();
    let cli = Cli::new(&server).env("SERVICE_TOKEN", &admin_token);
    let created = cli.run(&[
        "create",
        "grant",
        "a-devs-edit",
        "--role",
        "edit",
        "--group",
        "a-devs",
        "--selector",
        "team=a",
    ]);
    assert_eq!(created.expect(0).ok().trim(), "grant/a-devs-edit created");
    cli.run(&["create", "grant", "root", "--role", "admin", "--group", "a-devs", "--tenant", "a1"]).expect(2);
    let listed = cli.run(&["get", "grants"]).expect(0).ok().to_string();
    assert!(
        listed.contains("a-devs-edit")
            && listed.contains("Group:a-devs")
            && listed.contains("selector(team=a)"),
        "{listed}"
    );

    let (status, reply) = api_sign_in(&anonymous, &provider, "ann", None).await;
    assert_eq!(status, 200, "a member of a granted group signs in with no role: {reply}");
    let ann = server.api().with_token(reply["token"].as_str().map(str::to_string));

    let list = ann.get(TENANTS).await.expect(200);
    assert_eq!((names(&list), list["total"].clone()), (vec!["a1".to_string(), "a2".to_string()], json!(2)));
    assert_eq!(ann.get("/api/v1/machines").await.expect(200)["total"], 0);

    // b1 is answered exactly as a tenant that does not exist.
    for path in ["", "/machines", "/kubeconfig", "/node-groups/cp"] {
        let hidden = ann.get(&format!("{TENANTS}/b1{path}")).await;
        let missing = ann.get(&format!("{TENANTS}/zz{path}")).await;
        assert_eq!(hidden.status, 404, "{path}: {}", hidden.body);
        assert_eq!(hidden.body.replace("b1", "NAME"), missing.body.replace("zz", "NAME"), "{path}");
    }
    let mut b1 = server.api().get(&format!("{TENANTS}/b1")).await.expect(200);
    b1["spec"]["kubernetesVersion"] = json!("1.31.2");
    ann.put(&format!("{TENANTS}/b1"), &b1).await.expect_error(404, "NotFound");

    // Its own: changed, kept within team a, downloaded with edit's credentials.
    let mut a1 = ann.get(&format!("{TENANTS}/a1")).await.expect(200);
    a1["metadata"]["labels"]["team"] = json!("b");
    ann.put(&format!("{TENANTS}/a1"), &a1).await.expect_error(403, "Forbidden");
    ann.post(TENANTS, &team_tenant("b2", "b")).await.expect_error(403, "Forbidden");
    ann.post(TENANTS, &team_tenant("a3", "a")).await.expect(201);
    ann.delete(&format!("{TENANTS}/a3")).await.expect_error(403, "Forbidden");
    let kubeconfig = ann.get(&format!("{TENANTS}/a1/kubeconfig")).await;
    assert_eq!(kubeconfig.status, 200, "{}", kubeconfig.body);
    let (cn, groups) = kube_subject(&kubeconfig.body);
    assert_eq!(
        (cn.as_str(), groups.as_slice()),
        ("oidc:ann@example.com", &["system:masters".to_string(), "oidc:a-devs".to_string()][..])
    );
    ann.get("/api/v1/grants").await.expect_error(403, "Forbidden");

    // The watch: team a's tenants, then only their changes.
    let mut watch = Watch::open(&ann, "", &[]).await;
    let (burst, _) = watch.initial_burst(WAIT).await;
    assert_eq!(burst, ["a1", "a2", "a3"]);
    server.api().post(TENANTS, &team_tenant("b3", "b")).await.expect(201);
    server.api().post(TENANTS, &team_tenant("a4", "a")).await.expect(201);
    let next = watch.next_event(WAIT).await;
    assert_eq!((next.event_type(), next.name()), (Some("ADDED"), Some("a4")), "b3 is never sent: {next:?}");

    // The grant removed: the next request of the same token is refused.
    cli.run(&["delete", "grant", "a-devs-edit"]).expect(0);
    ann.get(TENANTS).await.expect_error(401, "Unauthorized");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_group_scales_its_tenants_in_the_console() {
    // The provider lives as long as the test: the browser signs in there.
    let (_provider, server) = teams().await;
    let grant = json!({"metadata": {"name": "a-devs-edit"}, "spec": {"role": "edit",
        "subjects": [{"kind": "Group", "name": "a-devs"}], "tenants": {"selector": "team=a"}}});
    server.api().post("/api/v1/grants", &grant).await.expect(201);
    let console = format!("http://localhost:{}", server.addr().port());
    let browser = Browser::start().await;
    browser.goto(&format!("{console}/")).await;
    browser.wait_for_path("/login").await;
    browser.click("#sso-login").await;
    browser.fill("input[name=sub]", "ann").await;
    browser.click("button[type=submit]").await;
    browser.wait_for_path("/").await;
    assert_eq!(browser.text("#user").await, "ann@example.com");
    browser.find("tr[data-tenant=a1]").await;
    assert!(browser.exists("tr[data-tenant=a2]").await);
    assert!(!browser.exists("tr[data-tenant=b1]").await, "another team's tenant is not listed");

    let hidden = browser.fetch(Fetch::get("/tenants/b1")).await;
    assert_eq!(hidden.status, 404, "{}", hidden.body);
    browser.goto(&format!("{console}/tenants/a1")).await;
    assert_eq!(browser.text("#role").await, "edit", "its role on this tenant");
    let group = "tr[data-node-group=cp]";
    browser.fill("#count-cp", "2").await;
    browser.submit(&format!("{group} form.scale")).await;
    browser.wait_for_text(&format!("{group} .count"), "2").await;
    let stored = server.api().get(&format!("{TENANTS}/a1/node-groups/cp")).await.expect(200);
    assert_eq!(stored["spec"]["count"], 2, "the scale reached the store: {stored}");
    browser.assert_accessible("the tenant page of a granted user").await;

    // The tenants page follows team a's changes only.
    browser.goto(&format!("{console}/")).await;
    browser.find("tr[data-tenant=a1]").await;
    server.api().post(TENANTS, &team_tenant("b9", "b")).await.expect(201);
    server.api().post(TENANTS, &team_tenant("a9", "a")).await.expect(201);
    browser.find("tr[data-tenant=a9]").await;
    assert!(!browser.exists("tr[data-tenant=b9]").await, "b9 never reaches the page");
    browser.close().await;
}

/// Grants live with users in the shared database: one made or deleted on
/// replica A applies on replica B once B's cache of them (2 s) is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_made_on_one_replica_applies_on_another() {
    use crate::replicas::{database, replica};
    let url = database();
    let a = replica(Server::options(), &url).start().await;
    let b = replica(Server::options(), &url).start().await;
    for (name, team) in [("a1", "a"), ("b1", "b")] {
        a.api().post(TENANTS, &team_tenant(name, team)).await.expect(201);
    }
    let user = json!({"metadata": {"name": "alice"}, "spec": {"role": "none", "password": "alice-password"}});
    a.api().post("/api/v1/users", &user).await.expect(201);
    let alice = b.api().with_token(None).login("alice", "alice-password").await;
    alice.get(TENANTS).await.expect_error(403, "Forbidden");

    let grant = json!({"metadata": {"name": "alice-a"}, "spec": {"role": "view",
        "subjects": [{"kind": "User", "name": "alice"}], "tenants": {"selector": "team=a"}}});
    a.api().post("/api/v1/grants", &grant).await.expect(201);
    let listed = eventually_on_b("the grant reaches replica B", || async {
        let reply = alice.get(TENANTS).await;
        (reply.status == 200).then(|| names(&reply.json()))
    })
    .await;
    assert_eq!(listed, ["a1"]);
    alice.get(&format!("{TENANTS}/b1")).await.expect_error(404, "NotFound");

    a.api().delete("/api/v1/grants/alice-a").await.expect_empty(204);
    eventually_on_b("the deletion reaches replica B", || async {
        (alice.get(&format!("{TENANTS}/a1")).await.status == 404).then_some(())
    })
    .await;
}

/// Polls `probe` every 100 ms until it answers, for at most 10 s (five
/// times the cache's 2 s), then fails naming `what`.
async fn eventually_on_b<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
