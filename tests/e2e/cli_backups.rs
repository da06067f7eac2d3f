//! `cms backup ...` against the real server, its reconciler and the engine,
//! over fake nodes (the setup of `backups.rs`): a backup taken and listed as
//! a table and as JSON, downloaded to a file equal to the node's snapshot, a
//! corrupted backup whose download fails and leaves no file, and a restore
//! that asks for `--yes` without a terminal, is refused while the backup is
//! corrupt, and names the machine once every control plane was replaced; and
//! a backup deleted.

use cms_e2e::cli::Cli;
use cms_fake_node::snapshot_bytes;
use serde_json::Value;

use crate::backups::{SNAPSHOT_SIZE, converged_tenant, replace_control_planes};
use crate::provisioning::Engine;

/// The names in the client's folder, hidden ones included, but its config.
fn files(cli: &Cli) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(cli.home())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "config")
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_are_taken_listed_downloaded_verified_and_restored() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let (bundle, cluster) = converged_tenant(&server).await;
    let cli = Cli::new(&server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);

    // Taken: the new backup as a table.
    let created = cli.run(&["backup", "create", "acme"]);
    let lines: Vec<&str> = created.ok().lines().collect();
    assert_eq!(lines.len(), 2, "{created}");
    let headers: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(headers, ["ID", "TIME", "AGE", "SIZE", "MACHINE", "TALOS", "ETCD"], "{created}");
    let id = lines[1].split_whitespace().next().unwrap().to_string();
    assert!(lines[1].contains("   256.00 KiB   cp-0   "), "{created}");

    // Listed: a second one, oldest first, as a table and as JSON.
    let second: Value =
        serde_json::from_str(cli.run(&["backup", "create", "acme", "-o", "json"]).ok()).unwrap();
    let table = cli.run(&["backup", "list", "acme"]);
    let rows: Vec<&str> = table.ok().lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(rows[0].starts_with(&format!("{id}   ")), "{table}");
    assert!(rows[1].starts_with(&format!("{}   ", second["id"].as_str().unwrap())), "{table}");
    let list: Value = serde_json::from_str(cli.run(&["backup", "list", "acme", "-o", "json"]).ok()).unwrap();
    assert_eq!(list["total"], 2, "{list}");
    assert_eq!(list["items"][0]["id"], id.as_str(), "{list}");
    assert_eq!(list["items"][0]["size"], SNAPSHOT_SIZE, "{list}");
    assert_eq!(list["items"][1], second, "{list}");
    let one = cli.run(&["backup", "get", "acme", &id, "-o", "yaml"]);
    assert!(one.ok().contains(&format!("id: {id}\n")), "{one}");
    let missing = cli.run(&["backup", "get", "acme", "20000101t000000000z-0000"]);
    missing.expect(3);
    assert!(missing.stderr.contains("(NotFound, HTTP 404)"), "{missing}");

    // Downloaded: the node's snapshot byte for byte, with no progress on a
    // standard error that is not a terminal.
    let downloaded = cli.run(&["backup", "download", "acme", &id]);
    let file = format!("acme-{id}.db");
    assert_eq!(downloaded.ok(), format!("wrote {file} (256.00 KiB, SHA-256 verified)\n"), "{downloaded}");
    assert_eq!(downloaded.stderr, "", "{downloaded}");
    let bytes = std::fs::read(cli.home().join(&file)).unwrap();
    assert!(bytes == snapshot_bytes(SNAPSHOT_SIZE), "the download differs from the snapshot");
    let forced = cli.run(&["backup", "download", "acme", &id, "-f", "copies/forced.db", "--progress"]);
    assert_eq!(forced.ok(), "wrote copies/forced.db (256.00 KiB, SHA-256 verified)\n", "{forced}");
    assert!(forced.stderr.contains("/256.00 KiB (") && forced.stderr.contains("%) at "), "{forced}");
    assert!(std::fs::read(cli.home().join("copies/forced.db")).unwrap() == bytes);
    std::fs::remove_dir_all(cli.home().join("copies")).unwrap();

    // A corrupted backup: the download fails and leaves no file, and the
    // server refuses to restore it.
    let stored = server.data_dir().path().join("backups").join("acme").join(format!("{id}.etcd"));
    let good = std::fs::read(&stored).unwrap();
    let mut corrupt = good.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0x40;
    std::fs::write(&stored, &corrupt).unwrap();
    let before = files(&cli);
    let failed = cli.run(&["backup", "download", "acme", &id, "-f", "corrupt.db"]);
    failed.expect(1);
    assert!(failed.stderr.contains("the transfer stopped before the end"), "{failed}");
    assert!(failed.stderr.starts_with(&format!("error: downloading backup/{id}: ")), "{failed}");
    assert_eq!(files(&cli), before, "{failed}");
    let refused = cli.run(&["backup", "restore", "acme", &id, "--yes"]);
    refused.expect(4);
    assert!(
        refused.stderr.contains("does not verify") && refused.stderr.contains("(Conflict, HTTP 409)"),
        "{refused}"
    );
    std::fs::write(&stored, &good).unwrap();

    // Without a terminal, a restore needs --yes.
    let unconfirmed = cli.run_with_input(&["backup", "restore", "acme", &id], "y\n");
    unconfirmed.expect(2);
    assert!(unconfirmed.stderr.contains("pass --yes"), "{unconfirmed}");

    // Every control plane lost and replaced (as in `backups.rs`): the
    // restore starts etcd from the backup and names the machine.
    let cluster = replace_control_planes(&api, &bundle, cluster).await;
    let restored = cli.run(&["backup", "restore", "acme", &id, "--yes"]);
    assert_eq!(
        restored.ok(),
        format!("backup/{id} restored: etcd of tenant acme started from it on machine cp-0\n"),
        "{restored}"
    );
    let expected = list["items"][0]["sha256"].as_str().unwrap();
    assert_eq!(cluster.node("cp-0").node.recovered_sha256().as_deref(), Some(expected));

    // Deleted: gone from the list, and a second delete finds nothing.
    let other = second["id"].as_str().unwrap();
    assert_eq!(cli.run(&["backup", "delete", "acme", other]).ok(), format!("backup/{other} deleted\n"));
    let list: Value = serde_json::from_str(cli.run(&["backup", "list", "acme", "-o", "json"]).ok()).unwrap();
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(list["items"][0]["id"], id.as_str(), "{list}");
    cli.run(&["backup", "delete", "acme", other]).expect(3);
}
