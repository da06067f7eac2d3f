//! The `cms` client on resources: `apply -f` of multi-document YAML and of
//! JSON on standard input, `get` of every kind in every output format,
//! `edit` (with a conflict met halfway), `delete`, and the exit codes.

use std::os::unix::fs::PermissionsExt;

use cms_e2e::Server;
use cms_e2e::cli::Cli;
use cms_e2e::cli_binary;
use serde_json::Value;

const STACK: &str = "\
kind: Tenant
metadata: {name: alpha, labels: {team: blue}}
spec:
  kubernetesVersion: 1.31.1
  controlPlaneEndpoint: https://10.1.0.10:6443
---
kind: NodeGroup
tenant: alpha
metadata: {name: workers}
spec:
  role: worker
  count: 2
  providerClass: metal:bare
  providerConfig: {hosts: [{address: 10.1.0.21}, {address: 10.1.0.22}]}
---
kind: ConfigPatch
metadata: {name: sysctls}
spec:
  format: strategic
  patches: [{machine: {sysctls: {vm.max_map_count: '262144'}}}]
";

fn logged_in(server: &Server) -> Cli {
    let cli = Cli::new(server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);
    cli
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}):\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_and_delete_every_kind() {
    let server = Server::start().await;
    let cli = logged_in(&server);
    std::fs::write(cli.home().join("stack.yaml"), STACK).unwrap();

    let created = cli.run(&["apply", "-f", "stack.yaml", "--tenant", "alpha"]);
    assert_eq!(
        created.ok(),
        "tenant/alpha created\nnodegroup/workers created\nconfigpatch/sysctls created\n"
    );
    // Applying again updates in place with the current resourceVersion.
    let again = cli.run(&["apply", "-f", "stack.yaml", "--tenant", "alpha"]);
    assert!(!again.ok().contains("created"), "{again}");

    // JSON on standard input; an array holds several documents.
    let beta =
        r#"[{"kind": "Tenant", "metadata": {"name": "beta"}, "spec": {"kubernetesVersion": "1.32.0"}}]"#;
    assert_eq!(cli.run_with_input(&["apply", "-f", "-", "-o", "name"], beta).ok(), "tenant/beta\n");

    let table = cli.run(&["get", "tenants"]);
    let lines: Vec<&str> = table.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("NAME    PHASE     READY   KUBERNETES   TALOS   GROUPS   AGE"), "{table}");
    assert!(lines[1].starts_with("alpha   pending   false   1.31.1       -       1        "), "{table}");
    assert!(lines[2].starts_with("beta "), "{table}");

    assert_eq!(cli.run(&["get", "tenants", "-o", "name"]).ok(), "tenant/alpha\ntenant/beta\n");
    let one = json(cli.run(&["get", "tenant", "alpha", "-o", "json"]).ok());
    assert_eq!(one["metadata"]["labels"]["team"], "blue");
    let list = json(cli.run(&["get", "tenants", "-o", "json"]).ok());
    assert_eq!(list["total"], 2);
    let yaml: Value =
        serde_saphyr::from_str(cli.run(&["get", "nodegroups", "workers", "-t", "alpha", "-o", "yaml"]).ok())
            .expect("YAML output");
    assert_eq!(yaml["spec"]["count"], 2);
    let groups = cli.run(&["get", "nodegroups", "--tenant", "alpha"]);
    assert!(groups.ok().contains("workers   worker   2                     0/0     metal:bare"), "{groups}");
    let patches = cli.run(&["get", "configpatches", "--tenant", "alpha"]);
    assert!(patches.ok().contains("sysctls   strategic   all      true      1"), "{patches}");
    let machines = cli.run(&["get", "machines"]);
    assert_eq!(machines.ok(), "");
    assert!(machines.stderr.contains("No machines found."), "{machines}");
    cli.run(&["get", "machines", "--tenant", "alpha", "-o", "json"]).expect(0);
    // Projected state exists only once provisioning has run.
    let projected = cli.run(&["get", "projected"]);
    projected.expect(1);
    assert!(projected.stderr.contains("(Unavailable, HTTP 503)"), "{projected}");
    // A machine config needs a machine, which only provisioning creates.
    let config = cli.run(&["machine", "config", "m-1", "--tenant", "alpha"]);
    config.expect(3);
    assert!(config.stderr.contains("(NotFound, HTTP 404)"), "{config}");

    assert_eq!(
        cli.run(&["delete", "configpatch", "sysctls", "-t", "alpha"]).ok(),
        "configpatch/sysctls deleted\n"
    );
    assert_eq!(
        cli.run(&["delete", "nodegroup", "workers", "-t", "alpha"]).ok(),
        "nodegroup/workers deleted\n"
    );
    assert_eq!(cli.run(&["delete", "tenant", "beta"]).ok(), "tenant/beta deletion requested\n");
    let deleting = json(cli.run(&["get", "tenant", "beta", "-o", "json"]).ok());
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());
    let gone = cli.run(&["delete", "configpatch", "sysctls", "-t", "alpha"]);
    gone.expect(3);
    assert!(gone.stderr.contains("not found") && gone.stderr.contains("NotFound, HTTP 404"), "{gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_name_what_went_wrong() {
    let server = Server::start().await;
    let cli = logged_in(&server);
    // 2: usage, from clap and from the client's own checks.
    cli.run(&["get", "widgets"]).expect(2);
    let scoped = cli.run(&["get", "nodegroups"]);
    scoped.expect(2);
    assert!(scoped.stderr.contains("pass --tenant NAME"), "{scoped}");
    // 1: the server refused the content, with its message and code.
    let invalid =
        "kind: Tenant\nmetadata: {name: bad}\nspec: {kubernetesVersion: '1.31.1', podNetwork: [nope]}\n";
    let refused = cli.run_with_input(&["apply", "-f", "-"], invalid);
    refused.expect(1);
    assert!(
        refused.stderr.contains("spec.podNetwork[0]") && refused.stderr.contains("HTTP 422"),
        "{refused}"
    );
    // A typo is caught before sending, naming the field.
    let typo = cli.run_with_input(
        &["apply", "-f", "-"],
        "kind: Tenant\nmetadata: {name: t}\nspec: {kubernetesVersion: 1.31.1, cout: 1}\n",
    );
    typo.expect(1);
    assert!(typo.stderr.contains("document 1") && typo.stderr.contains("cout"), "{typo}");
    // 3: not found.
    cli.run(&["get", "tenant", "nobody"]).expect(3);
    // 4: conflict; the last admin cannot be deleted.
    let conflict = cli.run(&["users", "delete", "admin"]);
    conflict.expect(4);
    assert!(conflict.stderr.contains("(Conflict, HTTP 409)"), "{conflict}");
    // 5: no server there, and the message says which server was tried.
    let nowhere = cli.run(&["--server", "http://127.0.0.1:9", "get", "tenants"]);
    nowhere.expect(5);
    assert!(nowhere.stderr.contains("cannot reach the server at http://127.0.0.1:9"), "{nowhere}");
    // 6: a bad token; SERVICE_TOKEN wins over the saved login.
    let bad = Cli::new(&server).env("SERVICE_TOKEN", "not-a-token");
    let denied = bad.run(&["get", "tenants"]);
    denied.expect(6);
    assert!(denied.stderr.contains("HTTP 401"), "{denied}");
}

/// An editor that, the first time, changes the object behind the user's back
/// (so the save meets a conflict), and each time disables the patch.
const EDITOR: &str = r#"#!/bin/sh
if [ ! -e "$HOME/edited-once" ]; then
  touch "$HOME/edited-once"
  "$CMS_BIN" apply -f "$HOME/retarget.yaml" -t alpha >/dev/null || exit 1
fi
sed -i 's/enabled: true/enabled: false/' "$1"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_saves_and_replays_an_edit_over_a_conflict() {
    let server = Server::start().await;
    let editor = logged_in(&server);
    let path = editor.home().join("editor.sh");
    std::fs::write(&path, EDITOR).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let retarget = STACK.replace("format: strategic", "format: strategic\n  target: worker");
    std::fs::write(editor.home().join("retarget.yaml"), &retarget).unwrap();
    std::fs::write(editor.home().join("stack.yaml"), STACK).unwrap();
    editor.run(&["apply", "-f", "stack.yaml", "-t", "alpha"]).expect(0);
    let editor =
        editor.env("EDITOR", &path.to_string_lossy()).env("CMS_BIN", &cli_binary().to_string_lossy());

    let edited = editor.run(&["edit", "configpatch", "sysctls", "-t", "alpha"]);
    assert_eq!(edited.ok(), "configpatch/sysctls edited\n");
    assert!(edited.stderr.contains("changed on the server while you were editing it"), "{edited}");
    let patch = json(editor.run(&["get", "configpatch", "sysctls", "-t", "alpha", "-o", "json"]).ok());
    assert_eq!(patch["spec"]["enabled"], false, "the edit was saved");
    assert_eq!(patch["spec"]["target"], "worker", "the concurrent change was kept");

    // Saving the object unchanged changes nothing.
    let unchanged = editor.env("EDITOR", "true").run(&["edit", "tenant", "alpha"]);
    unchanged.expect(0);
    assert!(unchanged.stderr.contains("Edit cancelled, no changes made."), "{unchanged}");
}
