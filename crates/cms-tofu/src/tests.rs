//! Unit tests of the driver against a mock runner.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cms_model::{MetalHost, Provider, Role};
use serde_json::Map;

use crate::{
    Credentials, Invocation, MachinePlan, MockRunner, Output, Runner, Tofu, TofuError, TofuOptions,
    WorkspacePlan,
};

const SHOW: &str = r#"{"format_version":"1.0","values":{"root_module":{"resources":[{"address":"terraform_data.cp-0","mode":"managed","type":"terraform_data","name":"cp-0","values":{"output":{"address":"10.0.0.1","providerId":"p","shape":"bare"}}}]}}}"#;

pub(crate) fn options(root: &std::path::Path) -> TofuOptions {
    TofuOptions {
        binary: "tofu".into(),
        root: root.to_path_buf(),
        timeout: Duration::from_secs(5),
        grace: Duration::from_millis(100),
        plugin_dir: Some("/mirror".into()),
        cli_config: None,
        state_key: None,
        backend: crate::StateBackend::Local,
    }
}

pub(crate) fn credentials() -> Credentials {
    Credentials::from_vars([("OS_PASSWORD".to_string(), "s3cr3t-password".to_string())])
}

pub(crate) fn plan() -> WorkspacePlan {
    WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![MachinePlan {
            id: "cp-0".into(),
            group: "cp".into(),
            index: 0,
            role: Role::ControlPlane,
            provider: Provider::Metal,
            shape: "bare".into(),
            provider_config: Map::new(),
            host: Some(MetalHost { address: "10.0.0.1".into(), provider_id: None }),
            user_data: None,
        }],
        ..Default::default()
    }
}

fn ok(stdout: &str) -> Output {
    Output { code: Some(0), stdout: stdout.as_bytes().to_vec(), stderr: Vec::new() }
}

/// The names in a tenant's workspace, in no particular order.
fn workspace_files(tofu: &Tofu, tenant: &str) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(tofu.workspace_dir(tenant)).unwrap().map(|entry| entry.unwrap().file_name()).collect()
}

fn expect_sequence(runner: &mut MockRunner, stages: Vec<(&'static str, Output)>) {
    let mut sequence = mockall::Sequence::new();
    for (verb, output) in stages {
        runner
            .expect_run()
            .withf(move |invocation: &Invocation| invocation.args[0] == verb)
            .times(1)
            .in_sequence(&mut sequence)
            .return_once(move |_| Ok(output));
    }
}

#[tokio::test]
async fn apply_runs_init_apply_show_and_returns_the_inputs_hash() {
    let root = tempfile::tempdir().unwrap();
    let mut runner = MockRunner::new();
    expect_sequence(
        &mut runner,
        vec![("version", ok("Terraform v1.15.5")), ("init", ok("")), ("apply", ok("")), ("show", ok(SHOW))],
    );
    let mut options = options(root.path());
    options.state_key = Some("k".repeat(32).into());
    let tofu = Tofu::new(options, credentials(), Arc::new(runner));
    let applied = tofu.apply(&plan(), &[]).await.unwrap();
    assert_eq!(applied.resources.len(), 1);
    assert_eq!(tofu.inputs_hash(&plan()).unwrap(), applied.hash);
    assert_eq!(applied.hash.len(), 64, "a hex SHA-256: {}", applied.hash);
    assert_eq!(workspace_files(&tofu, "acme"), [crate::MAIN_FILE], "the driver keeps no record of its own");
    assert_eq!(tofu.runs(), 4);
    let dir = tofu.workspace_dir("acme");
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    let main = dir.join(crate::MAIN_FILE);
    assert_eq!(std::fs::metadata(&main).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!std::fs::read_to_string(main).unwrap().contains("s3cr3t"));
}

#[tokio::test]
async fn credentials_reach_the_child_environment_only() {
    let root = tempfile::tempdir().unwrap();
    let mut runner = MockRunner::new();
    runner.expect_run().returning(|invocation| {
        assert!(
            invocation.env.contains(&("OS_PASSWORD".to_string(), "s3cr3t-password".to_string())),
            "{:?}",
            invocation.env.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()
        );
        assert!(!format!("{invocation:?}").contains("s3cr3t"));
        if invocation.args[0] == "init" {
            Ok(ok(""))
        } else {
            Ok(Output {
                code: Some(1),
                stdout: Vec::new(),
                stderr: b"auth failed for s3cr3t-password".to_vec(),
            })
        }
    });
    let tofu = Tofu::new(options(root.path()), credentials(), Arc::new(runner));
    let err = tofu.apply(&plan(), &[]).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, TofuError::Failed { .. }), "{message}");
    assert!(!message.contains("s3cr3t"), "{message}");
    assert!(message.contains("<redacted>"), "{message}");
    assert_eq!(workspace_files(&tofu, "acme"), [crate::MAIN_FILE]);
    let main = std::fs::read_to_string(tofu.workspace_dir("acme").join(crate::MAIN_FILE)).unwrap();
    assert!(!main.contains("s3cr3t"), "{main}");
}

#[tokio::test]
async fn replace_and_garbage() {
    let root = tempfile::tempdir().unwrap();
    let mut runner = MockRunner::new();
    runner.expect_run().returning(|invocation| match invocation.args[0].as_str() {
        "apply" => {
            assert!(invocation.args.contains(&"-replace=terraform_data.cp-0".to_string()));
            Ok(ok(""))
        }
        "show" => Ok(ok("\u{1b}[31mnot json at all")),
        _ => Ok(ok("")),
    });
    let tofu = Tofu::new(options(root.path()), credentials(), Arc::new(runner));
    let err = tofu.apply(&plan(), &["terraform_data.cp-0".to_string()]).await.unwrap_err();
    assert!(matches!(err, TofuError::Garbage { .. }), "{err}");
    assert_eq!(workspace_files(&tofu, "acme"), [crate::MAIN_FILE], "a failed apply leaves only its input");
}

#[tokio::test]
async fn destroy_without_workspace_runs_nothing() {
    let root = tempfile::tempdir().unwrap();
    let tofu = Tofu::new(options(root.path()), credentials(), Arc::new(MockRunner::new()));
    tofu.destroy("never").await.unwrap();
    assert_eq!(tofu.runs(), 0);
}

/// Counts how many runs are in flight at once.
#[derive(Default)]
struct Overlap {
    running: AtomicUsize,
    most: AtomicUsize,
}

#[async_trait]
impl Runner for Overlap {
    async fn run(&self, invocation: Invocation) -> Result<Output, TofuError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(ok(if invocation.args[0] == "show" { SHOW } else { "" }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_never_overlap_for_one_tenant() {
    let root = tempfile::tempdir().unwrap();
    let runner = Arc::new(Overlap::default());
    let tofu = Arc::new(Tofu::new(options(root.path()), credentials(), runner.clone()));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let tofu = tofu.clone();
            tokio::spawn(async move { tofu.apply(&plan(), &[]).await.map(|_| ()) })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(runner.most.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn postgres_state_names_a_schema_per_tenant_and_keeps_the_connection_out_of_files() {
    let root = tempfile::tempdir().unwrap();
    let url = "postgres://cms:pg-pass-1234@db.internal:5432/cms";
    let mut runner = MockRunner::new();
    runner.expect_run().returning(move |invocation| {
        assert!(invocation.env.contains(&("PG_CONN_STR".to_string(), url.to_string())));
        if invocation.args[0] == "show" { Ok(ok(SHOW)) } else { Ok(ok("")) }
    });
    let mut options = options(root.path());
    options.backend = crate::StateBackend::Postgres;
    let credentials = credentials().with_state_connection(secrecy::SecretString::from(url));
    let tofu = Tofu::new(options, credentials, Arc::new(runner));
    let mut plan = plan();
    plan.tenant = "acme-prod".into();
    tofu.apply(&plan, &[]).await.unwrap();
    let main = std::fs::read_to_string(tofu.workspace_dir("acme-prod").join(crate::MAIN_FILE)).unwrap();
    let main: serde_json::Value = serde_json::from_str(&main).unwrap();
    assert_eq!(
        main["terraform"]["backend"],
        serde_json::json!({"pg": {"schema_name": crate::state_schema("acme-prod")}})
    );
    for entry in std::fs::read_dir(tofu.workspace_dir("acme-prod")).unwrap().flatten() {
        if entry.path().is_file() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            assert!(!text.contains("pg-pass-1234"), "{}", entry.path().display());
        }
    }
}

#[test]
fn state_schemas_are_short_distinct_and_stable() {
    let long = "a".repeat(60);
    let (first, second) = (format!("{long}-x1"), format!("{long}-x2"));
    assert_eq!(
        crate::legacy_state_schema(&first),
        crate::legacy_state_schema(&second),
        "the old names collide"
    );
    assert_eq!(crate::legacy_state_schema(&first).len(), 63);
    assert_eq!(crate::legacy_state_schema("acme-prod"), "cms_tofu_acme_prod");
    assert_ne!(crate::state_schema(&first), crate::state_schema(&second));
    for tenant in [first.as_str(), "a", "acme-prod"] {
        let schema = crate::state_schema(tenant);
        assert_eq!(schema.len(), 41, "{schema}");
        assert!(schema.starts_with("cms_tofu_"), "{schema}");
        assert!(
            schema.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
        );
    }
    // Pinned: a new name would lose every tenant's state.
    assert_eq!(crate::state_schema("acme-prod"), "cms_tofu_d2836b7de9447c4aa93c2d1dc4328c15");
}

/// A machine config with the shape of a real one: CA keys as base64 PEM.
const MACHINE_CONFIG: &str = "version: v1alpha1\nmachine:\n  ca:\n    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJQekNCOHFBREFnRUNBaEVB\n    key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0KTUM0Q0FRQXdCUVlESzJWd0JDSUVJQQ==\n";

/// A tenant with one `oci` and one `openstack` machine, each with its own
/// machine config.
fn cloud_plan() -> WorkspacePlan {
    let oci = serde_json::json!({"region": "r", "compartmentOcid": "c", "subnetId": "s", "ocpus": 1, "memoryGb": 2, "imageId": "i"});
    let openstack = serde_json::json!({"imageId": "img", "networkId": "net"});
    let machine = |group: &str, provider, config: serde_json::Value| MachinePlan {
        id: format!("{group}-0"),
        group: group.into(),
        index: 0,
        role: Role::ControlPlane,
        provider,
        shape: "s".into(),
        provider_config: config.as_object().cloned().unwrap_or_default(),
        host: None,
        user_data: Some(format!("# {group}\n{MACHINE_CONFIG}")),
    };
    WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![machine("cp", Provider::Oci, oci), machine("os", Provider::OpenStack, openstack)],
        ..Default::default()
    }
}

/// What must never be in a file or an error: the configs and their base64.
fn user_data_forms(plan: &WorkspacePlan) -> Vec<String> {
    use base64::Engine;
    let mut forms: Vec<String> = crate::PEM_BASE64_MARKERS.iter().map(|marker| marker.to_string()).collect();
    forms.push("-----BEGIN".into());
    for machine in &plan.machines {
        let config = machine.user_data.clone().unwrap();
        forms.push(base64::engine::general_purpose::STANDARD.encode(&config)[..40].to_string());
        forms.push(config);
    }
    forms
}

#[tokio::test]
async fn user_data_reaches_the_apply_environment_only() {
    use base64::Engine;
    let root = tempfile::tempdir().unwrap();
    let plan = cloud_plan();
    let forms = user_data_forms(&plan);
    let mut runner = MockRunner::new();
    let expected: Vec<(String, String)> = plan
        .machines
        .iter()
        .map(|machine| {
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(machine.user_data.as_deref().unwrap());
            (format!("TF_VAR_machine_user_data_{}", machine.group), encoded)
        })
        .collect();
    let checked = forms.clone();
    runner.expect_run().returning(move |invocation| {
        let variables: Vec<(String, String)> = invocation
            .env
            .iter()
            .filter(|(name, _)| name.starts_with("TF_VAR_machine_user_data"))
            .cloned()
            .collect();
        let debug = format!("{invocation:?}");
        assert!(checked.iter().all(|form| !debug.contains(form.as_str())), "{debug}");
        match invocation.args[0].as_str() {
            "apply" => {
                assert_eq!(variables, expected, "apply gets one variable per node group");
                // A failing tool that echoes what it was given.
                let echo = format!("Error: 400 bad metadata {} for\n{MACHINE_CONFIG}", variables[0].1);
                Ok(Output { code: Some(1), stdout: Vec::new(), stderr: echo.into_bytes() })
            }
            verb => {
                assert!(variables.is_empty(), "{verb} gets no user data");
                Ok(ok(""))
            }
        }
    });
    let tofu = Tofu::new(options(root.path()), credentials(), Arc::new(runner));
    let err = tofu.apply(&plan, &[]).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, TofuError::Failed { .. }), "{message}");
    for form in &forms {
        assert!(!message.contains(form.as_str()), "the error holds {form}: {message}");
    }
    assert!(message.contains("bad metadata <redacted> for <redacted>"), "{message}");

    let main = std::fs::read_to_string(tofu.workspace_dir("acme").join(crate::MAIN_FILE)).unwrap();
    for form in &forms {
        assert!(!main.contains(form.as_str()), "main.tf.json holds {form}: {main}");
    }
    let main: serde_json::Value = serde_json::from_str(&main).unwrap();
    let oci = &main["resource"]["oci_core_instance"]["cp-0"];
    assert_eq!(oci["metadata"]["user_data"], "${var.machine_user_data_cp}");
    assert_eq!(oci["lifecycle"]["precondition"][0]["condition"], "${var.machine_user_data_cp != null}");
    let openstack = &main["resource"]["openstack_compute_instance_v2"]["os-0"];
    assert_eq!(openstack["user_data"], "${try(base64decode(var.machine_user_data_os), null)}");
    for group in ["cp", "os"] {
        let declaration = &main["variable"][format!("machine_user_data_{group}")];
        assert_eq!(declaration["sensitive"], true, "{main}");
        assert_eq!(declaration["default"], serde_json::Value::Null, "{main}");
    }
    assert!(!format!("{plan:?}").contains("LS0t"), "a plan's Debug leaves user data out");
}

#[tokio::test]
async fn the_inputs_hash_follows_the_user_data_and_destroy_passes_none() {
    let root = tempfile::tempdir().unwrap();
    let mut runner = MockRunner::new();
    runner.expect_run().returning(|invocation| {
        let has = invocation.env.iter().any(|(name, _)| name.starts_with("TF_VAR_machine_user_data_"));
        assert_eq!(has, invocation.args[0] == "apply", "{:?}", invocation.args);
        Ok(ok(if invocation.args[0] == "show" { "{}" } else { "" }))
    });
    let tofu = Tofu::new(options(root.path()), credentials(), Arc::new(runner));
    let plan = cloud_plan();
    let mut changed = cloud_plan();
    changed.machines[1].user_data = Some("another config".into());
    assert_ne!(tofu.inputs_hash(&plan).unwrap(), tofu.inputs_hash(&changed).unwrap());
    assert_eq!(tofu.apply(&plan, &[]).await.unwrap().hash, tofu.inputs_hash(&plan).unwrap());
    let mut missing = cloud_plan();
    missing.machines[0].user_data = None;
    assert!(matches!(tofu.apply(&missing, &[]).await, Err(TofuError::Invalid(_))));
    tofu.destroy("acme").await.unwrap();
    assert!(!tofu.workspace_dir("acme").exists());
}
