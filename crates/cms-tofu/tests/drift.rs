//! Drift plans against the real engine: a metal workspace applied, then its
//! state edited behind the driver's back, is planned as drift naming the
//! resource and the attribute; an apply puts it back.

use std::time::Duration;

use cms_tofu::Tofu;
use serde_json::Value;

use common::{metal_plan, tofu};

mod common;

/// Every string `from` in `value` becomes `to`.
fn replace_strings(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(text) if text == from => *text = to.to_string(),
        Value::Array(items) => items.iter_mut().for_each(|item| replace_strings(item, from, to)),
        Value::Object(fields) => fields.values_mut().for_each(|field| replace_strings(field, from, to)),
        _ => {}
    }
}

/// Edits the local state: `edit` gets its `resources`.
fn edit_state(tofu: &Tofu, edit: impl FnOnce(&mut Vec<Value>)) {
    let path = tofu.workspace_dir("acme").join("terraform.tfstate");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(state["resources"].as_array_mut().unwrap());
    state["serial"] = Value::from(state["serial"].as_u64().unwrap() + 1);
    std::fs::write(&path, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
}

#[tokio::test]
async fn a_state_edited_behind_the_drivers_back_is_drift_until_applied_again() {
    let root = tempfile::tempdir().unwrap();
    let tofu = tofu(root.path(), Duration::from_secs(60));
    let workspace = metal_plan("acme", 3);
    tofu.apply(&workspace, &[]).await.unwrap();
    let clean = tofu.plan(&workspace).await.unwrap().expect("planned");
    assert!(clean.is_empty(), "{clean:?}");

    edit_state(&tofu, |resources| {
        let edited = resources.iter_mut().find(|r| r["name"] == "cp-1").unwrap();
        replace_strings(edited, "bare", "edited-by-hand");
        // cp-2 is gone from the infrastructure.
        resources.retain(|r| r["name"] != "cp-2");
    });
    let drift = tofu.plan(&workspace).await.unwrap().expect("planned");
    let found: Vec<(&str, &str, Vec<String>)> = drift
        .resources
        .iter()
        .map(|r| (r.address.as_str(), r.action.as_str(), r.attributes.clone()))
        .collect();
    assert_eq!(
        found,
        vec![
            ("terraform_data.cp-1", "update", vec!["input.shape".to_string()]),
            ("terraform_data.cp-2", "create", vec![]),
        ]
    );
    assert!(!format!("{drift:?}").contains("edited-by-hand"), "no value is named: {drift:?}");
    let files: Vec<String> = std::fs::read_dir(tofu.workspace_dir("acme"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!files.iter().any(|name| name.ends_with(".tfplan")), "no plan file is left: {files:?}");
    assert!(!files.iter().any(|name| name.contains(".lock.info")), "no state lock is left: {files:?}");

    tofu.apply(&workspace, &[]).await.unwrap();
    let corrected = tofu.plan(&workspace).await.unwrap().expect("planned");
    assert!(corrected.is_empty(), "{corrected:?}");
}
