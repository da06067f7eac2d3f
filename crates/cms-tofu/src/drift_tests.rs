//! Drift plans against a mock runner: the exit codes, the plan JSON, what
//! is named and what never is.

use std::sync::{Arc, Mutex};

use base64::Engine as _;

use cms_model::{MetalHost, Provider, Role};
use serde_json::{Map, json};

use super::{PLAN_FILE, parse_plan};
use crate::{
    Credentials, Invocation, MachinePlan, MockRunner, Output, Tofu, TofuError, TofuOptions, WorkspacePlan,
};

fn options(root: &std::path::Path) -> TofuOptions {
    TofuOptions { plugin_dir: None, ..crate::tests::options(root) }
}

fn machine(provider: Provider, user_data: Option<&str>) -> MachinePlan {
    MachinePlan {
        id: "cp-0".into(),
        group: "cp".into(),
        index: 0,
        role: Role::ControlPlane,
        provider,
        shape: "bare".into(),
        provider_config: Map::new(),
        host: (provider == Provider::Metal)
            .then(|| MetalHost { address: "10.0.0.1".into(), provider_id: None }),
        user_data: user_data.map(str::to_string),
    }
}

fn metal() -> WorkspacePlan {
    WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![machine(Provider::Metal, None)],
        ..Default::default()
    }
}

fn output(code: i32, stdout: &str, stderr: &str) -> Output {
    Output { code: Some(code), stdout: stdout.as_bytes().to_vec(), stderr: stderr.as_bytes().to_vec() }
}

/// A runner answering each verb with its output, recording every
/// invocation.
fn runner(answers: Vec<(&'static str, Output)>, seen: Arc<Mutex<Vec<Invocation>>>) -> MockRunner {
    let mut runner = MockRunner::new();
    runner.expect_run().returning(move |invocation: Invocation| {
        seen.lock().unwrap().push(invocation.clone());
        let verb = invocation.args[0].clone();
        let answer = answers.iter().find(|(name, _)| *name == verb).map(|(_, output)| output.clone());
        Ok(answer.unwrap_or_else(|| output(0, "", "")))
    });
    runner
}

const UPDATE: &str = r#"{"format_version":"1.2","resource_changes":[
  {"address":"terraform_data.cp-0","mode":"managed","type":"terraform_data","name":"cp-0","change":{"actions":["update"],
   "before":{"id":"x","input":{"address":"10.0.0.1","providerId":"metal://10.0.0.1","shape":"edited-behind-our-back","group":"cp","role":"controlplane"},"output":{"shape":"edited-behind-our-back"},"triggers_replace":null},
   "after":{"id":"x","input":{"address":"10.0.0.1","providerId":"metal://10.0.0.1","shape":"bare","group":"cp","role":"controlplane"},"triggers_replace":null},
   "after_unknown":{"output":true},"before_sensitive":{},"after_sensitive":{}}},
  {"address":"data.oci_identity_availability_domains.r","mode":"data","type":"oci_identity_availability_domains","name":"r","change":{"actions":["read"],"before":null,"after":{}}},
  {"address":"terraform_data.cp-1","mode":"managed","type":"terraform_data","name":"cp-1","change":{"actions":["no-op"],"before":{},"after":{}}}
]}"#;

#[test]
fn an_edited_resource_is_named_with_the_attributes_that_differ() {
    let drift = parse_plan(UPDATE.as_bytes()).unwrap();
    assert_eq!(drift.resources.len(), 1, "{drift:?}");
    let resource = &drift.resources[0];
    assert_eq!(resource.address, "terraform_data.cp-0");
    assert_eq!(resource.action, "update");
    // The known difference, not the output it recomputes; no value.
    assert_eq!(resource.attributes, vec!["input.shape"]);
    assert!(!format!("{drift:?}").contains("edited-behind-our-back"));
}

#[test]
fn created_deleted_and_replaced_resources_are_drift_reads_and_no_ops_are_not() {
    let plan = json!({"resource_changes": [
        {"address": "a.gone", "mode": "managed", "change": {"actions": ["create"], "before": null, "after": {"x": 1}}},
        {"address": "a.extra", "mode": "managed", "change": {"actions": ["delete"], "before": {"x": 1}, "after": null}},
        {"address": "a.new", "mode": "managed", "change": {"actions": ["delete", "create"],
            "before": {"image": "old", "id": "1"}, "after": {"image": "new"}, "after_unknown": {"id": true}}},
        {"address": "a.same", "mode": "managed", "change": {"actions": ["no-op"], "before": {}, "after": {}}},
        {"address": "a.moved", "mode": "managed", "change": {"actions": ["forget"], "before": {}, "after": null}},
    ]});
    let drift = parse_plan(plan.to_string().as_bytes()).unwrap();
    let seen: Vec<(&str, &str, Vec<String>)> = drift
        .resources
        .iter()
        .map(|r| (r.address.as_str(), r.action.as_str(), r.attributes.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("a.gone", "create", vec![]),
            ("a.extra", "delete", vec![]),
            ("a.new", "replace", vec!["image".to_string()]),
        ]
    );
}

#[test]
fn user_data_is_no_drift_and_sensitive_values_are_never_named() {
    let secret = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t";
    let plan = json!({"resource_changes": [
        {"address": "openstack_compute_instance_v2.cp-0", "mode": "managed", "change": {"actions": ["update"],
            "before": {"user_data": "old-hash", "name": "cp-0"}, "after": {"user_data": secret, "name": "cp-0"},
            "before_sensitive": {"user_data": true}, "after_sensitive": {"user_data": true}}},
        {"address": "oci_core_instance.cp-0", "mode": "managed", "change": {"actions": ["update"],
            "before": {"metadata": {"user_data": "a"}, "admin_password": "hunter2", "display_name": "x"},
            "after": {"metadata": {"user_data": secret}, "admin_password": "correct horse", "display_name": "x"},
            "after_sensitive": {"admin_password": true}}},
    ]});
    let drift = parse_plan(plan.to_string().as_bytes()).unwrap();
    assert_eq!(drift.resources.len(), 1, "{drift:?}");
    assert_eq!(drift.resources[0].address, "oci_core_instance.cp-0");
    assert_eq!(drift.resources[0].attributes, vec!["admin_password"]);
    let shown = format!("{drift:?}");
    for value in [secret, "hunter2", "correct horse", "old-hash"] {
        assert!(!shown.contains(value), "{shown}");
    }
}

#[test]
fn hostile_attribute_names_are_bounded_and_plain() {
    let key = format!("${{file(\"/etc/passwd\")}}{}", "k".repeat(500));
    let plan = json!({"resource_changes": [{"address": "a.b", "mode": "managed", "change": {"actions": ["update"],
        "before": {"tags": {key.clone(): "1"}}, "after": {"tags": {key: "2"}}}}]});
    let drift = parse_plan(plan.to_string().as_bytes()).unwrap();
    let name = &drift.resources[0].attributes[0];
    assert!(name.starts_with("tags.??file"), "{name}");
    assert!(name.len() <= "tags.".len() + 64, "{name}");
    assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || "._-?".contains(c)), "{name}");
}

#[test]
fn garbage_is_an_error() {
    assert!(parse_plan(b"not json").is_err());
    assert!(parse_plan(b"[1]").is_err());
}

#[tokio::test]
async fn exit_0_is_no_drift_without_a_show() {
    let root = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runner = runner(vec![("plan", output(0, "No changes.", ""))], seen.clone());
    let tofu = Tofu::new(options(root.path()), Credentials::default(), Arc::new(runner));
    let drift = tofu.plan(&metal()).await.unwrap().unwrap();
    assert!(drift.is_empty());
    let verbs: Vec<String> = seen.lock().unwrap().iter().map(|i| i.args[0].clone()).collect();
    assert_eq!(verbs, ["init", "plan"]);
    let plan = &seen.lock().unwrap()[1];
    assert_eq!(
        plan.args,
        ["plan", "-input=false", "-no-color", "-detailed-exitcode", "-lock=false", "-out=drift.tfplan"]
    );
    assert!(!tofu.workspace_dir("acme").join(PLAN_FILE).exists());
}

#[tokio::test]
async fn exit_2_shows_the_plan_file_and_removes_it() {
    let root = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dir = root.path().join("acme");
    std::fs::create_dir_all(dir.join(".terraform")).unwrap();
    let runner = runner(vec![("plan", output(2, "", "")), ("show", output(0, UPDATE, ""))], seen.clone());
    let tofu = Tofu::new(options(root.path()), Credentials::default(), Arc::new(runner));
    std::fs::write(dir.join(PLAN_FILE), "a plan").unwrap();
    let drift = tofu.plan(&metal()).await.unwrap().unwrap();
    assert_eq!(drift.resources[0].attributes, ["input.shape"]);
    let verbs: Vec<Vec<String>> = seen.lock().unwrap().iter().map(|i| i.args.clone()).collect();
    assert_eq!(verbs[0][0], "plan", "no init: the workspace has one");
    assert_eq!(verbs[1], ["show", "-json", "-no-color", PLAN_FILE]);
    assert!(!dir.join(PLAN_FILE).exists(), "the plan file is removed");
}

#[tokio::test]
async fn exit_1_is_a_redacted_error_and_leaves_no_plan_file() {
    let root = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let password = "s3cr3t-password";
    let runner = runner(vec![("plan", output(1, "", &format!("Error: auth failed with {password}")))], seen);
    let credentials = Credentials::from_vars([("OS_PASSWORD".to_string(), password.to_string())]);
    let tofu = Tofu::new(options(root.path()), credentials, Arc::new(runner));
    let err = tofu.plan(&metal()).await.unwrap_err();
    assert!(matches!(err, TofuError::Failed { .. }), "{err}");
    assert!(!err.to_string().contains(password), "{err}");
    assert!(err.to_string().contains("exit code 1"), "{err}");
    assert!(!tofu.workspace_dir("acme").join(PLAN_FILE).exists());
}

#[tokio::test]
async fn the_plan_gets_a_stand_in_for_the_user_data_and_never_the_config() {
    let root = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runner = runner(vec![("plan", output(2, "", "")), ("show", output(0, UPDATE, ""))], seen.clone());
    let tofu = Tofu::new(options(root.path()), Credentials::default(), Arc::new(runner));
    let config = "machine:\n  ca:\n    key: the-tenants-ca-private-key\n";
    let mut oci = machine(Provider::Oci, Some(config));
    oci.provider_config = serde_json::from_value(
        json!({"region": "r", "compartmentOcid": "c", "subnetId": "s", "ocpus": 1, "memoryGb": 2, "imageId": "i"}),
    )
    .unwrap();
    let plan = WorkspacePlan { tenant: "acme".into(), machines: vec![oci], ..Default::default() };
    tofu.plan(&plan).await.unwrap().unwrap();
    let seen = seen.lock().unwrap();
    let encoded = base64::engine::general_purpose::STANDARD.encode(config);
    let stand_in = base64::engine::general_purpose::STANDARD.encode(super::USER_DATA_STAND_IN);
    for invocation in seen.iter() {
        let user_data: Vec<&String> = invocation
            .env
            .iter()
            .filter(|(name, _)| name.starts_with("TF_VAR_machine_user_data_"))
            .map(|(_, value)| value)
            .collect();
        match invocation.args[0].as_str() {
            "plan" => assert_eq!(user_data, [&stand_in], "the preconditions get a value"),
            _ => assert!(user_data.is_empty(), "{invocation:?}"),
        }
        assert!(!invocation.env.iter().any(|(_, value)| value.contains(&encoded) || value.contains(config)));
    }
}

#[tokio::test]
async fn a_busy_workspace_is_not_planned() {
    let root = tempfile::tempdir().unwrap();
    let mut runner = MockRunner::new();
    runner.expect_run().never();
    let tofu = Tofu::new(options(root.path()), Credentials::default(), Arc::new(runner));
    let lock = tofu.lock("acme");
    let _apply = lock.lock().await;
    assert_eq!(tofu.plan(&metal()).await.unwrap(), None);
}

/// A runner recording, for each verb, whether the workspace had a plan
/// file as it ran.
fn watching_plan_files(seen: Arc<Mutex<Vec<(String, bool)>>>, plan: Output) -> MockRunner {
    let mut runner = MockRunner::new();
    runner.expect_run().returning(move |invocation: Invocation| {
        let verb = invocation.args[0].clone();
        seen.lock().unwrap().push((verb.clone(), invocation.dir.join(PLAN_FILE).exists()));
        Ok(match verb.as_str() {
            "plan" => plan.clone(),
            "show" => output(0, r#"{"values":{"root_module":{}}}"#, ""),
            _ => output(0, "", ""),
        })
    });
    runner
}

#[tokio::test]
async fn a_plan_file_a_killed_run_left_is_gone_before_the_next_plan_and_the_next_apply() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("acme");
    std::fs::create_dir_all(dir.join(".terraform")).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runner = watching_plan_files(seen.clone(), output(1, "", "Error: refused"));
    let tofu = Tofu::new(options(root.path()), Credentials::default(), Arc::new(runner));
    std::fs::write(dir.join(PLAN_FILE), "a plan with sensitive values").unwrap();
    tofu.plan(&metal()).await.unwrap_err();
    assert_eq!(seen.lock().unwrap()[0], ("plan".to_string(), false), "removed before planning");

    std::fs::write(dir.join(PLAN_FILE), "a plan with sensitive values").unwrap();
    seen.lock().unwrap().clear();
    tofu.apply(&metal(), &[]).await.unwrap();
    assert!(!dir.join(PLAN_FILE).exists(), "the apply's workspace keeps no plan file");
    assert!(seen.lock().unwrap().iter().all(|(_, had)| !had), "{:?}", seen.lock().unwrap());
}
