//! The install image of machine configs follows the tenant's and its node
//! groups' `installerImage` and `schematic`, the group's choice first.

use cms_model::Kind;
use cms_store::{Draft, Key};
use serde_json::json;

use super::{field_error, tenancy, tenant};

const SCHEMATIC: &str = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba";

fn groups(worker_extra: &str) -> String {
    format!(
        r#","nodeGroups":[
            {{"name":"cp","role":"controlplane","count":1,"providerClass":"metal:bare","providerConfig":{{"hosts":[{{"address":"10.0.0.1"}}]}}}},
            {{"name":"w","role":"worker","count":1,"providerClass":"metal:bare","providerConfig":{{"hosts":[{{"address":"10.0.0.2"}}]}}{worker_extra}}}]"#
    )
}

/// The `machine.install.image` of a rendered config, a folded scalar
/// (`>-`, as long strings are written) read on its next line.
fn install_image(config: &str) -> String {
    let mut lines = config.lines().skip_while(|line| line.trim() != "install:");
    let line = lines.find(|line| line.trim_start().starts_with("image:")).expect("an install image");
    match line.trim_start().trim_start_matches("image:").trim() {
        ">-" => lines.next().expect("the folded value").trim().to_string(),
        value => value.to_string(),
    }
}

async fn machine(tenancy: &cms_tenancy::Tenancy, id: &str, group: &str) {
    let spec = json!({"nodeGroup": group, "managementAddress": "10.0.0.1:50000", "connected": true});
    let draft = Draft { spec, ..Draft::default() };
    tenancy.store().create(Key::child(Kind::Machine, "acme", id), draft).await.expect("a machine");
}

#[tokio::test]
async fn machine_configs_install_from_the_schematic_or_the_groups_repository() {
    let (tenancy, _dir) = tenancy().await;
    let extra = format!(
        r#","schematic":"{SCHEMATIC}"{}"#,
        groups(r#","installerImage":"registry.example.com/talos/installer","talosVersion":"1.9.5""#)
    );
    tenancy.create_tenant(tenant("1.9.6", &extra)).await.expect("created");
    machine(&tenancy, "cp-1", "cp").await;
    machine(&tenancy, "w-1", "w").await;

    let (config, _) = tenancy.machine_config("acme", "cp-1").await.expect("the control plane's config");
    assert_eq!(install_image(&config), format!("factory.talos.dev/installer/{SCHEMATIC}:v1.9.6"));

    let (config, _) = tenancy.machine_config("acme", "w-1").await.expect("the worker's config");
    let image = install_image(&config);
    assert_eq!(image, "registry.example.com/talos/installer:v1.9.5", "the group's choice, at its version");
}

#[tokio::test]
async fn without_a_choice_machines_install_the_stock_installer() {
    let (tenancy, _dir) = tenancy().await;
    tenancy.create_tenant(tenant("1.9.6", &groups(""))).await.expect("created");
    machine(&tenancy, "w-1", "w").await;
    let (config, _) = tenancy.machine_config("acme", "w-1").await.expect("the worker's config");
    assert_eq!(install_image(&config), "ghcr.io/siderolabs/installer:v1.9.6");
}

#[tokio::test]
async fn hostile_installer_fields_are_field_errors() {
    let (tenancy, _dir) = tenancy().await;
    let cases = [
        (r#","installerImage":"ghcr.io/x/installer:v1.9.6""#.to_string(), "spec.installerImage"),
        (r#","installerImage":"ghcr.io/x\ninstall: {}""#.to_string(), "spec.installerImage"),
        (r#","schematic":"not-a-schematic""#.to_string(), "spec.schematic"),
        (format!(r#","installerImage":"r.example/i","schematic":"{SCHEMATIC}""#), "spec.schematic"),
        (groups(r#","installerImage":"r.example/i@sha256:00""#), "spec.nodeGroups[1].installerImage"),
    ];
    for (extra, expected) in cases {
        let (field, _) = field_error(tenancy.create_tenant(tenant("1.9.6", &extra)).await);
        assert_eq!(field, expected, "{extra}");
    }
    assert!(tenancy.store().get(&Key::tenant("acme")).is_none(), "nothing refused is written");
}
