//! The tenant page's machines that need an operator (off, or awaiting a
//! replacement), the `MachinesConnected` condition, and confirming a
//! replaced host.

use cms_model::{Kind, Machine};
use cms_store::{Draft, Key, Store};
use http::StatusCode;
use serde_json::json;

use super::{ADMIN, Fixture, VIEWER, location};

/// What the reconciler writes of a host that does not answer as the
/// tenant's node.
const UNRECOGNIZED: &str = "the node at 10.0.0.3:50000 does not answer as this tenant's node (its \
                            certificate is not signed by the tenant's OS CA): a replaced host or an \
                            impostor; delete the machine to confirm a replacement";

/// Writes tenant `demo`, whose `MachinesConnected` condition names `m-2`,
/// and its machines: `m-1` ready, `m-2` off, `m-3` awaiting replacement.
async fn tenant_with_machines_in_trouble(f: &Fixture) {
    let status = json!({"phase": "active", "conditions": [{
        "type": "MachinesConnected", "status": "False", "reason": "Off",
        "message": "machines off (not answering the node API): m-2",
        "lastTransitionTime": "2026-11-25T06:00:00Z"}]});
    let draft = Draft {
        spec: json!({"kubernetesVersion": "1.31.0", "nodeGroups": [{
            "name": "cp", "role": "controlplane", "count": 3, "providerClass": "metal:bare",
            "providerConfig": {"hosts": [{"address": "10.0.0.1"}, {"address": "10.0.0.2"}, {"address": "10.0.0.3"}]}
        }]}),
        status: Some(status),
        ..Draft::default()
    };
    f.store.create(Key::tenant("demo"), draft).await.expect("tenant created");
    f.machine("demo", "m-1", true).await;
    let off = json!({"stage": "off", "ready": false, "talosVersion": "1.11.0",
                     "message": "the node API does not answer: connection refused"});
    machine(f, "m-2", "10.0.0.2:50000", false, off).await;
    let awaiting = json!({"stage": "awaiting-replacement", "ready": false, "message": UNRECOGNIZED});
    machine(f, "m-3", "10.0.0.3:50000", true, awaiting).await;
}

async fn machine(f: &Fixture, id: &str, address: &str, connected: bool, status: serde_json::Value) {
    let draft = Draft {
        spec: json!({"managementAddress": address, "nodeGroup": "cp", "connected": connected}),
        status: Some(status),
        ..Draft::default()
    };
    f.store.create(Key::child(Kind::Machine, "demo", id), draft).await.expect("machine created");
}

fn stored(f: &Fixture, id: &str) -> Machine {
    let object = f.store.get(&Key::child(Kind::Machine, "demo", id)).expect("the machine is stored");
    object.parse().expect("parses")
}

#[tokio::test]
async fn machines_off_or_awaiting_replacement_stand_out_in_words() {
    let f = Fixture::new().await;
    tenant_with_machines_in_trouble(&f).await;
    let admin = f.sign_in(ADMIN).await;

    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    for expected in [
        "<tr data-machine=\"m-1\"><th class=\"id\" scope=\"row\"><a href=\"/tenants/demo/machines/m-1\">m-1</a></th>",
        "<tr data-machine=\"m-2\" class=\"attention\">",
        "<td class=\"stage\" data-stage=\"off\">",
        "<strong class=\"badge badge-off\">off</strong> <span class=\"stage-note\">not answering the node API</span>",
        "<td class=\"message\">the node API does not answer: connection refused</td>",
        "<tr data-machine=\"m-3\" class=\"attention\">",
        "<td class=\"stage\" data-stage=\"awaiting-replacement\">",
        "<strong class=\"badge badge-replacement\">awaiting-replacement</strong>",
        "<a href=\"#replace-m-3\">the host does not answer as this node</a>",
        "Off, not answering the node API: m-2",
        "Awaiting a confirmed replacement: m-3",
        // The liveness condition is where the other conditions are.
        "<tr data-condition=\"MachinesConnected\">",
        "machines off (not answering the node API): m-2",
        // The machine awaiting replacement: its message and the form.
        "<div class=\"replacement\" id=\"replace-m-3\" data-machine=\"m-3\">",
        UNRECOGNIZED,
        "action=\"/tenants/demo/machines/m-3/replace\"",
        "<label for=\"confirm-replace-m-3\">Type the machine's ID, <code>m-3</code>",
        "Confirm replacement</button>",
    ] {
        assert!(body.contains(expected), "{expected}: {body}");
    }
    assert!(!body.contains("/machines/m-2/replace"), "an off machine is not replaced from here");
    assert!(!body.contains("id=\"replacement-confirmed\""));

    let viewer = f.sign_in(VIEWER).await;
    let seen = f.get("/tenants/demo", Some(&viewer)).await;
    assert!(seen.body.contains(UNRECOGNIZED), "a viewer reads the message");
    assert!(seen.body.contains("A role that may delete machines can confirm the replacement."));
    assert!(!seen.body.contains("/replace\""), "a viewer sees no confirmation form");
}

#[tokio::test]
async fn a_page_without_trouble_marks_nothing() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    f.machine("demo", "m-1", true).await;
    let viewer = f.sign_in(VIEWER).await;
    let page = f.get("/tenants/demo", Some(&viewer)).await;
    assert!(page.body.contains("<td class=\"stage\" data-stage=\"ready\">ready</td>"), "{}", page.body);
    for absent in ["machines-attention", "class=\"attention\"", "badge", "id=\"replacements\""] {
        assert!(!page.body.contains(absent), "{absent}");
    }
}

#[tokio::test]
async fn confirming_a_replacement_needs_the_form_token_the_permission_and_the_typed_id() {
    let f = Fixture::new().await;
    tenant_with_machines_in_trouble(&f).await;
    let admin = f.sign_in(ADMIN).await;
    let viewer = f.sign_in(VIEWER).await;
    let path = "/tenants/demo/machines/m-3/replace";

    let tokenless = f.post(path, Some(&admin), &[("confirm", "m-3")]).await;
    assert_eq!(tokenless.status, StatusCode::FORBIDDEN, "{}", tokenless.body);
    assert!(tokenless.body.contains("security token"), "{}", tokenless.body);
    let forged = f.post(path, Some(&admin), &[("confirm", "m-3"), ("csrf", &"0".repeat(64))]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    let signed_out = f.post(path, None, &[("confirm", "m-3")]).await;
    assert_eq!(location(&signed_out), "/login");
    let viewers = f.submit(path, &viewer, &[("confirm", "m-3")]).await;
    assert_eq!(viewers.status, StatusCode::FORBIDDEN, "{}", viewers.body);

    let mistyped = f.submit(path, &admin, &[("confirm", "m-2")]).await;
    assert_eq!(mistyped.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", mistyped.body);
    let refusal = "<p class=\"field-error\" id=\"confirm-replace-m-3-error\">Type m-3 exactly to confirm the \
                   replacement; nothing was deleted.</p>";
    assert!(mistyped.body.contains(refusal), "{}", mistyped.body);
    assert!(mistyped.body.contains("aria-invalid=\"true\" aria-describedby=\"confirm-replace-m-3-error\""));
    let blank = f.submit(path, &admin, &[]).await;
    assert_eq!(blank.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", blank.body);
    assert!(stored(&f, "m-3").metadata.deletion_timestamp.is_none(), "nothing was deleted");
}

#[tokio::test]
async fn a_confirmed_replacement_deletes_the_machine_and_says_so() {
    let f = Fixture::new().await;
    tenant_with_machines_in_trouble(&f).await;
    let admin = f.sign_in(ADMIN).await;

    let confirmed = f.submit("/tenants/demo/machines/m-3/replace", &admin, &[("confirm", " m-3 ")]).await;
    assert_eq!(location(&confirmed), "/tenants/demo?replaced=m-3#machines-heading");
    let machine = stored(&f, "m-3");
    assert!(
        machine.metadata.deletion_timestamp.is_some(),
        "the machine is being deleted, as the API deletes it"
    );
    assert!(stored(&f, "m-2").metadata.deletion_timestamp.is_none(), "no other machine is touched");

    let page = f.get("/tenants/demo?replaced=m-3", Some(&admin)).await;
    let notice = "Replacement of machine m-3 confirmed: it leaves etcd and the cluster, and the host at its \
                  address is configured anew.";
    assert!(page.body.contains(notice), "{}", page.body);
    assert!(page.body.contains("Replacement confirmed <time"), "{}", page.body);
    assert!(!page.body.contains("/machines/m-3/replace"), "no second confirmation is offered");

    let again = f.submit("/tenants/demo/machines/m-3/replace", &admin, &[("confirm", "m-3")]).await;
    assert_eq!(
        location(&again),
        "/tenants/demo?replaced=m-3#machines-heading",
        "confirming twice is harmless"
    );
    let live = f.get("/tenants/demo?replaced=m-1", Some(&admin)).await;
    assert!(!live.body.contains("id=\"replacement-confirmed\""), "no notice names a machine that stays");
}

#[tokio::test]
async fn only_a_machine_awaiting_replacement_is_deleted_from_here() {
    let f = Fixture::new().await;
    tenant_with_machines_in_trouble(&f).await;
    let admin = f.sign_in(ADMIN).await;

    let off = f.submit("/tenants/demo/machines/m-2/replace", &admin, &[("confirm", "m-2")]).await;
    assert_eq!(off.status, StatusCode::CONFLICT, "{}", off.body);
    assert!(
        off.body.contains("Machine m-2 no longer awaits a replacement (its stage is off)"),
        "{}",
        off.body
    );
    assert!(stored(&f, "m-2").metadata.deletion_timestamp.is_none(), "nothing was deleted");

    let missing = f.submit("/tenants/demo/machines/m-9/replace", &admin, &[("confirm", "m-9")]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
    let no_tenant = f.submit("/tenants/nope/machines/m-3/replace", &admin, &[("confirm", "m-3")]).await;
    assert_eq!(no_tenant.status, StatusCode::NOT_FOUND, "{}", no_tenant.body);
    let read = f.get("/tenants/demo/machines/m-3/replace", Some(&admin)).await;
    assert_eq!(read.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(read.header("allow"), "POST");
}
