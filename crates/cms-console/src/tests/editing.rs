//! Config patches on the tenant page and the YAML editor: each change goes
//! through `Tenancy`, refusals show at their fields, a stale version is 409
//! with a reload link and the operator's text kept, and viewers and posts
//! without the form token are refused.

use cms_model::{ConfigPatch, Kind, PatchTarget, Tenant};
use cms_store::{Key, Store};
use http::StatusCode;
use serde_json::{Value, json};

use super::{ADMIN, Fixture, Reply, VIEWER, location};
use crate::yaml;

const BODY: &str = "machine:\n  network:\n    hostname: node\n";

fn patch(f: &Fixture, name: &str) -> Option<(u64, ConfigPatch)> {
    let object = f.store.get(&Key::child(Kind::ConfigPatch, "demo", name))?;
    Some((object.resource_version, object.parse().expect("a config patch")))
}

/// Creates patch `name` of tenant `demo` with the form.
async fn create_patch(f: &Fixture, session: &str, name: &str, body: &str) -> Reply {
    let fields = [("name", name), ("format", "strategic"), ("target", "all"), ("patches", body)];
    f.submit("/tenants/demo/configpatches/new", session, &fields).await
}

/// The text of the page's `textarea#yaml`, unescaped.
fn editor_text(reply: &Reply) -> String {
    let start = reply.body.find("name=\"yaml\"").expect("the editor's textarea");
    let start = start + reply.body[start..].find('>').expect("the textarea's tag ends") + 1;
    let end = start + reply.body[start..].find("</textarea>").expect("the textarea ends");
    let text = &reply.body[start..end];
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

fn assert_has(reply: &Reply, expected: &[&str]) {
    for needle in expected {
        assert!(reply.body.contains(needle), "{needle} in {}", reply.body);
    }
}

#[tokio::test]
async fn config_patches_are_created_edited_enabled_and_deleted() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert_has(
        &page,
        &["id=\"no-config-patches\"", "id=\"create-config-patch\"", "<label for=\"patch-body\">"],
    );

    let created = create_patch(&f, &admin, "hostname", BODY).await;
    assert_eq!(location(&created), "/tenants/demo");
    let (version, stored) = patch(&f, "hostname").expect("the patch was created");
    assert!(stored.spec.enabled);
    assert_eq!(stored.spec.patches, vec![json!({"machine": {"network": {"hostname": "node"}}})]);
    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert_has(
        &page,
        &[
            "<tr data-config-patch=\"hostname\">",
            "<td class=\"state\" data-enabled=\"true\">enabled</td>",
            "<td class=\"referenced\">nothing (not applied)</td>",
            "action=\"/tenants/demo/configpatches/hostname/edit\"",
            "<textarea class=\"code\" id=\"patch-hostname-body\"",
        ],
    );

    let version = version.to_string();
    let fields = [
        ("resourceVersion", version.as_str()),
        ("format", "strategic"),
        ("target", "worker"),
        ("patches", "- machine: {}\n- cluster: {}\n"),
    ];
    let edited = f.submit("/tenants/demo/configpatches/hostname/edit", &admin, &fields).await;
    assert_eq!(location(&edited), "/tenants/demo");
    let (version, stored) = patch(&f, "hostname").expect("the patch");
    assert_eq!(stored.spec.target, PatchTarget::Worker);
    assert_eq!(stored.spec.patches.len(), 2);

    let version = version.to_string();
    let fields = [("resourceVersion", version.as_str()), ("enabled", "false")];
    let disabled = f.submit("/tenants/demo/configpatches/hostname/enable", &admin, &fields).await;
    assert_eq!(location(&disabled), "/tenants/demo");
    let (_, stored) = patch(&f, "hostname").expect("the patch");
    assert!(!stored.spec.enabled);
    assert_eq!(stored.spec.patches.len(), 2, "the rest of the patch stays");
    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert_has(&page, &["data-enabled=\"false\">disabled</td>", ">Enable hostname</button>"]);

    let deleted = f.submit("/tenants/demo/configpatches/hostname/delete", &admin, &[]).await;
    assert_eq!(location(&deleted), "/tenants/demo");
    assert!(patch(&f, "hostname").is_none());
    let missing = f.submit("/tenants/demo/configpatches/hostname/delete", &admin, &[]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn refused_patches_are_shown_at_their_fields() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;

    let scalar = create_patch(&f, &admin, "p", "3\n").await;
    assert_eq!(scalar.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", scalar.body);
    assert_has(
        &scalar,
        &[
            "<p class=\"field-error\" id=\"patch-body-error\">[0]: must be an object</p>",
            "aria-invalid=\"true\" aria-describedby=\"patch-body-hint patch-body-error\"",
            "<input id=\"patch-name\" name=\"name\" type=\"text\" required value=\"p\"",
        ],
    );
    let syntax = create_patch(&f, &admin, "p", "machine: [\n").await;
    assert_eq!(syntax.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_has(
        &syntax,
        &["id=\"patch-body-error\">Line 1, column 10: unclosed bracket", "machine: [\n</textarea>"],
    );
    let fields =
        [("name", "p"), ("format", "jsonpatch"), ("target", "all"), ("patches", "- op: frobnicate\n")];
    let operation = f.submit("/tenants/demo/configpatches/new", &admin, &fields).await;
    assert_eq!(operation.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_has(
        &operation,
        &["id=\"patch-body-error\">[0]: is not an RFC 6902 operation", "value=\"jsonpatch\" selected"],
    );
    let name = create_patch(&f, &admin, "Not_A_Name", BODY).await;
    assert_eq!(name.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_has(
        &name,
        &[
            "<p class=\"field-error\" id=\"patch-name-error\">",
            "aria-describedby=\"patch-name-hint patch-name-error\"",
        ],
    );
    assert!(f.store.all(Kind::ConfigPatch, Some("demo".into())).is_empty(), "nothing was created");

    assert_eq!(location(&create_patch(&f, &admin, "p", BODY).await), "/tenants/demo");
    let again = create_patch(&f, &admin, "p", BODY).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_has(&again, &["id=\"patch-name-error\""]);
    let absent = f
        .submit(
            "/tenants/none/configpatches/new",
            &admin,
            &[("name", "p"), ("format", "strategic"), ("target", "all"), ("patches", BODY)],
        )
        .await;
    assert_eq!(absent.status, StatusCode::NOT_FOUND, "{}", absent.body);
}

#[tokio::test]
async fn a_stale_patch_form_is_409_keeps_the_text_and_offers_a_reload() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    assert_eq!(location(&create_patch(&f, &admin, "p", BODY).await), "/tenants/demo");
    let (read_at, _) = patch(&f, "p").expect("the patch");
    let read_at = read_at.to_string();
    let toggle = [("resourceVersion", read_at.as_str()), ("enabled", "false")];
    assert_eq!(
        location(&f.submit("/tenants/demo/configpatches/p/enable", &admin, &toggle).await),
        "/tenants/demo"
    );

    let fields = [
        ("resourceVersion", read_at.as_str()),
        ("format", "strategic"),
        ("target", "all"),
        ("patches", "machine:\n  kept: mine\n"),
    ];
    let stale = f.submit("/tenants/demo/configpatches/p/edit", &admin, &fields).await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
    assert_has(
        &stale,
        &[
            "This config patch changed since you opened it",
            "<a href=\"/tenants/demo\">Reload the page</a>",
            "machine:\n  kept: mine\n</textarea>",
            "id=\"patch-p-editor\" open",
        ],
    );
    let again = f.submit("/tenants/demo/configpatches/p/enable", &admin, &toggle).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_has(
        &again,
        &[
            "id=\"config-patches-error\"",
            "Config patch p changed since you opened it",
            "id=\"reload-patches\"",
        ],
    );
    let (_, stored) = patch(&f, "p").expect("the patch");
    assert!(!stored.spec.enabled);
    assert_eq!(stored.spec.patches, vec![json!({"machine": {"network": {"hostname": "node"}}})]);
}

#[tokio::test]
async fn the_yaml_editor_round_trips_and_applies_changes() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({"team": "a"}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert_has(&page, &["<a id=\"edit-as-yaml\" href=\"/tenants/demo/edit\">Edit as YAML</a>"]);
    let editor = f.get("/tenants/demo/edit", Some(&admin)).await;
    assert_eq!(editor.status, StatusCode::OK, "{}", editor.body);
    assert_has(&editor, &["<label for=\"yaml\">", "action=\"/tenants/demo/edit\""]);
    let text = editor_text(&editor);
    let document = yaml::read(&text).expect("the editor shows YAML");
    assert_eq!(document["metadata"]["name"], "demo");
    assert_eq!(document["metadata"]["labels"], json!({"team": "a"}));
    assert_eq!(document["spec"]["kubernetesVersion"], "1.31.0");
    assert!(document["metadata"]["resourceVersion"].is_u64(), "{text}");
    assert!(document.get("status").is_none() && !text.contains("phase"), "no status: {text}");

    let unchanged = f.submit("/tenants/demo/edit", &admin, &[("yaml", &text)]).await;
    assert_eq!(location(&unchanged), "/tenants/demo");
    let mut changed =
        yaml::read(&editor_text(&f.get("/tenants/demo/edit", Some(&admin)).await)).expect("YAML");
    changed["metadata"]["labels"]["env"] = json!("prod");
    changed["spec"]["kubernetesVersion"] = json!("v1.31.2");
    let saved = f.submit("/tenants/demo/edit", &admin, &[("yaml", &yaml::write(&changed))]).await;
    assert_eq!(location(&saved), "/tenants/demo");
    let tenant: Tenant = f.console.tenancy.tenant("demo").expect("the tenant");
    assert_eq!(tenant.metadata.labels.get("env").map(String::as_str), Some("prod"));
    assert_eq!(tenant.spec.kubernetes_version, "1.31.2", "normalized as the API does");
    assert_eq!(tenant.spec.node_groups.map(|groups| groups.len()), Some(1), "the node groups stay");
}

#[tokio::test]
async fn the_yaml_editor_shows_refusals_at_the_field_and_stale_versions() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    let text = editor_text(&f.get("/tenants/demo/edit", Some(&admin)).await);

    let broken = "metadata:\n  name: demo\n spec: [\n";
    let syntax = f.submit("/tenants/demo/edit", &admin, &[("yaml", broken)]).await;
    assert_eq!(syntax.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", syntax.body);
    assert_has(
        &syntax,
        &[
            "<p class=\"field-error\" id=\"yaml-error\" data-line=\"3\">Line 3",
            "aria-invalid=\"true\" aria-describedby=\"yaml-hint yaml-error\"",
            "id=\"form-error\"",
        ],
    );
    assert_eq!(editor_text(&syntax), broken, "the text is kept");

    let mut document: Value = yaml::read(&text).expect("YAML");
    document["spec"]["kubernetesVersion"] = json!("1.31");
    let field = f.submit("/tenants/demo/edit", &admin, &[("yaml", &yaml::write(&document))]).await;
    assert_eq!(field.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_has(&field, &["data-path=\"spec.kubernetesVersion\"><code>spec.kubernetesVersion</code>: "]);
    document["spec"]["kubernetesVersion"] = json!("1.31.0");
    document["spec"]["bogus"] = json!(1);
    let unknown = f.submit("/tenants/demo/edit", &admin, &[("yaml", &yaml::write(&document))]).await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_has(&unknown, &["<code>spec.bogus</code>"]);
    let renamed = text.replace("name: demo", "name: other");
    let other = f.submit("/tenants/demo/edit", &admin, &[("yaml", &renamed)]).await;
    assert_eq!(other.status, StatusCode::BAD_REQUEST);
    assert_has(&other, &["<code>metadata.name</code>"]);

    let mut meanwhile = f.console.tenancy.tenant("demo").expect("the tenant");
    meanwhile.metadata.labels.insert("changed".into(), "meanwhile".into());
    f.console.tenancy.update_tenant(meanwhile).await.expect("changed meanwhile");
    let mine = text.replace("labels: {}", "labels:\n    mine: 'yes'");
    assert_ne!(mine, text);
    let stale = f.submit("/tenants/demo/edit", &admin, &[("yaml", &mine)]).await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
    assert_has(
        &stale,
        &["This tenant changed since you opened it", "<a id=\"reload-editor\" href=\"/tenants/demo/edit\">"],
    );
    assert_eq!(editor_text(&stale), mine, "the operator's text is kept");
    let tenant = f.console.tenancy.tenant("demo").expect("the tenant");
    assert!(!tenant.metadata.labels.contains_key("mine"));
}

#[tokio::test]
async fn tenants_are_created_from_yaml() {
    let f = Fixture::new().await;
    let admin = f.sign_in(ADMIN).await;
    let form = f.get("/tenants/new", Some(&admin)).await;
    assert_has(&form, &["<a id=\"create-as-yaml\" href=\"/tenants/new/yaml\">"]);
    let editor = f.get("/tenants/new/yaml", Some(&admin)).await;
    assert_eq!(editor.status, StatusCode::OK);
    let mut document = yaml::read(&editor_text(&editor)).expect("the template is YAML");
    document["metadata"]["name"] = json!("acme");
    let text = yaml::write(&document);
    let created = f.submit("/tenants/new/yaml", &admin, &[("yaml", &text)]).await;
    assert_eq!(location(&created), "/tenants/acme");
    assert!(f.store.get(&Key::tenant("acme")).is_some());
    assert!(f.store.get(&Key::child(Kind::NodeGroup, "acme", "controlplane")).is_some(), "with its group");
    let again = f.submit("/tenants/new/yaml", &admin, &[("yaml", &text)]).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_has(&again, &["<code>metadata.name</code>"]);
    let broken = f.submit("/tenants/new/yaml", &admin, &[("yaml", "metadata: {name: [\n")]).await;
    assert_eq!(broken.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_has(&broken, &["id=\"yaml-error\"", "Line "]);
}

#[tokio::test]
async fn viewers_and_posts_without_the_form_token_are_refused() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    assert_eq!(location(&create_patch(&f, &admin, "p", BODY).await), "/tenants/demo");
    let viewer = f.sign_in(VIEWER).await;
    let page = f.get("/tenants/demo", Some(&viewer)).await;
    assert_has(&page, &["<tr data-config-patch=\"p\">"]);
    for control in
        ["create-config-patch", "edit-as-yaml", "enable-patch", "delete-patch", "edit-patch", "<textarea"]
    {
        assert!(!page.body.contains(control), "a viewer sees no {control}");
    }
    for path in ["/tenants/demo/edit", "/tenants/new/yaml"] {
        let refused = f.get(path, Some(&viewer)).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
    }
    let text =
        editor_text(&f.get("/tenants/demo/edit", Some(&admin)).await).replace("labels: {}", "labels: {x: y}");
    let posts: [(&str, Vec<(&str, &str)>); 6] = [
        (
            "/tenants/demo/configpatches/new",
            vec![("name", "q"), ("format", "strategic"), ("target", "all"), ("patches", BODY)],
        ),
        (
            "/tenants/demo/configpatches/p/edit",
            vec![("resourceVersion", "1"), ("format", "strategic"), ("target", "worker"), ("patches", BODY)],
        ),
        ("/tenants/demo/configpatches/p/enable", vec![("resourceVersion", "1"), ("enabled", "false")]),
        ("/tenants/demo/configpatches/p/delete", vec![]),
        ("/tenants/demo/edit", vec![("yaml", text.as_str())]),
        (
            "/tenants/new/yaml",
            vec![("yaml", "metadata: {name: forged}\nspec: {kubernetesVersion: 1.31.0}\n")],
        ),
    ];
    for (path, fields) in &posts {
        let forged = f.submit(path, &viewer, fields).await;
        assert_eq!(forged.status, StatusCode::FORBIDDEN, "{path}");
        assert_has(&forged, &["<h1>Forbidden</h1>", "role view may not"]);
        let tokenless = f.post(path, Some(&admin), fields).await;
        assert_eq!(tokenless.status, StatusCode::FORBIDDEN, "{path}");
        assert_has(&tokenless, &["security token"]);
    }
    let (_, stored) = patch(&f, "p").expect("the patch stays");
    assert!(stored.spec.enabled && stored.spec.target == PatchTarget::All);
    assert!(patch(&f, "q").is_none() && f.store.get(&Key::tenant("forged")).is_none());
    assert!(f.console.tenancy.tenant("demo").expect("the tenant").metadata.labels.is_empty());
}
