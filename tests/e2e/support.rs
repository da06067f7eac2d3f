//! Support bundles against the real server, engine and fake nodes: a
//! converged 3-machine metal tenant whose drift was checked once, its
//! bundle downloaded with `cms support`, holds every part (the resources,
//! each machine's version, services, logs and dmesg, the cluster's Nodes
//! and events, the tool's last apply and plan) and none of the keys,
//! certificates and tokens of the tenant's secrets bundle, nor the registry
//! password a config patch holds. Viewers may not read it, and every read
//! is on the audit log.

use std::collections::BTreeMap;
use std::io::Read;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cms_e2e::Api;
use cms_e2e::cli::Cli;
use cms_e2e::cluster::FakeCluster;
use cms_e2e::nodes::StoreWriter;
use serde_json::{Value, json};

use crate::provisioning::cluster::fake_hosts;
use crate::provisioning::{CONVERGE, Engine, converged, eventually, metal_tenant};

const TENANT: &str = "helpdesk";

/// A registry password a config patch of the tenant holds.
const REGISTRY_PASSWORD: &str = "e2e-registry-pa55word-9f3c";

/// Every file of the bundle at `path`, by name.
fn unzip(path: &std::path::Path) -> BTreeMap<String, String> {
    let file = std::fs::File::open(path).expect("the bundle was written");
    let mut zip = zip::ZipArchive::new(file).expect("a whole zip");
    let mut files = BTreeMap::new();
    for index in 0..zip.len() {
        let mut entry = zip.by_index(index).expect("an entry");
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).expect("the entry inflates");
        let name = entry.name().expect("a UTF-8 name").to_string();
        files.insert(name, String::from_utf8_lossy(&bytes).into_owned());
    }
    files
}

/// Every secret of the tenant's bundle as the admin's export gives it: each
/// value, and of each PEM block it encodes the body whole and line by line.
async fn secrets(api: &Api) -> Vec<String> {
    let reply = api.get(&format!("/api/v1/tenants/{TENANT}/secrets")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let bundle: Value = serde_saphyr::from_str(&reply.body).expect("the secrets YAML");
    let mut strings = Vec::new();
    leaves(&bundle, &mut strings);
    let mut secrets = Vec::new();
    for value in strings.into_iter().filter(|value| value.len() >= 16) {
        if let Ok(decoded) = STANDARD.decode(&value) {
            let text = String::from_utf8_lossy(&decoded).into_owned();
            for block in text.split("-----BEGIN ").skip(1) {
                let body: Vec<&str> = block
                    .lines()
                    .skip(1)
                    .take_while(|line| !line.starts_with("-----END "))
                    .filter(|line| !line.contains(':') && !line.trim().is_empty())
                    .collect();
                secrets.extend(body.iter().filter(|line| line.len() >= 16).map(|line| line.to_string()));
                secrets.push(body.concat());
            }
        }
        secrets.push(value);
    }
    assert!(secrets.len() > 20, "the bundle holds keys, certificates and tokens: {}", secrets.len());
    secrets
}

fn leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| leaves(item, out)),
        Value::Object(fields) => fields.values().for_each(|field| leaves(field, out)),
        _ => {}
    }
}

fn json_of(files: &BTreeMap<String, String>, name: &str) -> Value {
    let text = files.get(name).unwrap_or_else(|| panic!("{name} is in the bundle: {:?}", files.keys()));
    serde_json::from_str(text).unwrap_or_else(|err| panic!("{name} is JSON: {err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_of_three_machines_holds_every_part_and_no_secret() {
    let engine = Engine::new();
    let server = engine.options().env("CMS_DRIFT_INTERVAL", "2s").start().await;
    let api = server.api();
    api.post("/api/v1/tenants", &metal_tenant(TENANT, 1, 2)).await.expect(201);
    let bundle = StoreWriter::open(server.data_dir()).await.bundle(TENANT).await;
    let _cluster = FakeCluster::start(&bundle, &fake_hosts(1, 2), |_, base| base).await;
    converged(&api, TENANT).await;
    let patch = json!({"metadata": {"name": "motd"}, "spec": {"format": "strategic",
        "patches": [{"machine": {"sysctls": {"vm.swappiness": "10"}}}]}});
    api.post(&format!("/api/v1/tenants/{TENANT}/configpatches"), &patch).await.expect(201);
    let auth = json!({"username": "robot", "password": REGISTRY_PASSWORD});
    let registry = json!({"metadata": {"name": "registry"}, "spec": {"format": "strategic", "target": "worker",
        "patches": [{"machine": {"registries": {"config": {"registry.example.com": {"auth": auth}}}}}]}});
    api.post(&format!("/api/v1/tenants/{TENANT}/configpatches"), &registry).await.expect(201);
    // The drift check's plan runs every 2 s once the tenant is applied.
    eventually("a drift check", CONVERGE, || async {
        let tenant = api.get(&format!("/api/v1/tenants/{TENANT}")).await.expect(200);
        let conditions = tenant["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.iter().any(|condition| condition["type"] == "Drifted").then_some(())
    })
    .await;

    let cli = Cli::new(&server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);
    let target = cli.home().join("bundle.zip");
    let run = cli.run(&["support", TENANT, "-f", target.to_str().expect("a UTF-8 path")]);
    let stdout = run.ok();
    assert!(stdout.starts_with(&format!("wrote {}", target.display())), "{run}");
    assert!(run.stderr.contains("received ") && run.stderr.contains(" entries"), "progress on stderr: {run}");
    let files = unzip(&target);
    assert!(stdout.contains(&format!("({} entries,", files.len())), "{run}");

    assert_eq!(json_of(&files, "tenant.json")["metadata"]["name"], TENANT);
    assert!(json_of(&files, "tenant.json")["status"]["conditions"].is_array(), "with its conditions");
    assert_eq!(json_of(&files, "configpatches/motd.json")["metadata"]["name"], "motd");
    let patch = json_of(&files, "configpatches/registry.json");
    assert_eq!(
        (&patch["metadata"]["name"], &patch["spec"]["target"]),
        (&json!("registry"), &json!("worker"))
    );
    let concealed = json!({"username": "[REDACTED]", "password": "[REDACTED]"});
    assert_eq!(
        patch["spec"]["patches"][0]["machine"]["registries"]["config"]["registry.example.com"]["auth"],
        concealed,
        "the patch keeps its shape, not its strings"
    );
    let groups: Vec<&String> = files.keys().filter(|name| name.starts_with("node-groups/")).collect();
    assert_eq!(groups.len(), 2, "{groups:?}");
    let machines = api.get(&format!("/api/v1/tenants/{TENANT}/machines")).await.expect(200);
    let ids: Vec<&str> = machines["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{machines}");
    for id in ids {
        let folder = format!("machines/{id}");
        assert_eq!(json_of(&files, &format!("{folder}/machine.json"))["status"]["ready"], true);
        let version = &files[&format!("{folder}/version.txt")];
        assert!(version.trim().starts_with('v') || version.trim().starts_with('1'), "{id}: {version}");
        let services = json_of(&files, &format!("{folder}/services.json"));
        let services = services.as_array().expect("a list of services");
        assert!(services.iter().any(|service| service["id"] == "machined"), "{id}: {services:?}");
        for service in services {
            let log = format!("{folder}/logs/{}.log", service["id"].as_str().unwrap());
            assert!(files.contains_key(&log), "{log} is in the bundle");
        }
        let logs = files
            .iter()
            .filter(|(name, text)| name.starts_with(&format!("{folder}/logs/")) && !text.is_empty());
        assert!(logs.count() >= 1, "{id} has a log with lines");
        assert!(!files[&format!("{folder}/dmesg.log")].is_empty(), "{id} has its kernel's log");
    }
    let nodes = json_of(&files, "kubernetes/nodes.json");
    assert_eq!(nodes.as_array().map(Vec::len), Some(3), "{nodes}");
    let events = json_of(&files, "kubernetes/events.json");
    let events = events.as_array().expect("a list of events");
    assert!(events.iter().any(|event| event["reason"] == "RegisteredNode"), "{events:?}");
    assert!(
        files["tool/apply.log"].starts_with("command: apply\nstatus: exit code 0\nsucceeded: true\n"),
        "{}",
        files["tool/apply.log"]
    );
    assert!(files["tool/plan.log"].starts_with("command: plan\n"), "{}", files["tool/plan.log"]);
    assert_eq!(files["errors.txt"], "every part was read\n");
    assert!(!files.contains_key("TRUNCATED.txt"));

    let secrets = secrets(&api).await;
    for (name, text) in &files {
        assert!(!text.contains(REGISTRY_PASSWORD), "{name} holds the registry password of a config patch");
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{name} holds a secret of the tenant's bundle");
        }
        assert!(!text.contains("PRIVATE KEY"), "{name} holds a private key");
    }

    let raw = api.get(&format!("/api/v1/tenants/{TENANT}/support")).await;
    assert_eq!(raw.status, 200);
    assert_eq!(raw.header("content-type").as_deref(), Some("application/zip"));
    let disposition = raw.header("content-disposition").expect("a file name");
    assert!(disposition.starts_with(&format!("attachment; filename=\"{TENANT}-support-")), "{disposition}");
    let viewer = json!({"metadata": {"name": "vic"}, "spec": {"role": "view", "password": "vic-password"}});
    api.post("/api/v1/users", &viewer).await.expect(201);
    let as_viewer = Api::new(server.addr()).login("vic", "vic-password").await;
    as_viewer.get(&format!("/api/v1/tenants/{TENANT}/support")).await.expect_error(403, "Forbidden");
    api.get("/api/v1/tenants/nobody/support").await.expect_error(404, "NotFound");
    let audit = api.get("/api/v1/audit").await.expect(200);
    let reads = audit["items"].as_array().unwrap().iter().filter(|record| {
        record["method"] == "GET"
            && record["path"] == format!("/api/v1/tenants/{TENANT}/support")
            && record["actor"] == "admin"
    });
    assert!(reads.count() >= 2, "both reads are on the audit log: {audit}");
}
