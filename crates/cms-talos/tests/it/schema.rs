//! Every rendered config against the official Talos schema of its minor version.
//!
//! The schemas are read from `CMS_TALOS_SCHEMAS`, else from
//! `../shared/talos/schemas` beside the repository. A missing folder fails
//! the test, under CI and everywhere else: these checks are never skipped.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use cms_model::Role;
use cms_talos::render_documents;
use jsonschema::Validator;
use serde_json::{Value, json};

use crate::patches::sets;
use crate::{VERSIONS, input};

fn schema_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CMS_TALOS_SCHEMAS") {
        return PathBuf::from(dir);
    }
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../../../shared/talos/schemas")
}

fn schema(minor: &str) -> Value {
    let path = schema_dir().join(format!("config-v{minor}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "the Talos schema {} is missing ({err}); set CMS_TALOS_SCHEMAS or check out shared/ beside the \
             repository{}",
            path.display(),
            if std::env::var_os("CI").is_some() { " (CI is set: the schemas are required)" } else { "" }
        )
    });
    serde_json::from_str(&text).expect("schema JSON")
}

fn minor(talos_version: &str) -> String {
    talos_version.rsplit_once('.').expect("MAJOR.MINOR.PATCH").0.to_string()
}

/// One compiled validator per minor version, built once per test binary.
fn validators() -> &'static HashMap<String, (Value, Validator)> {
    static VALIDATORS: OnceLock<HashMap<String, (Value, Validator)>> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        VERSIONS
            .iter()
            .map(|version| {
                let minor = minor(version);
                let schema = schema(&minor);
                let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
                (minor, (schema, validator))
            })
            .collect()
    })
}

/// The schema definition of one document, for precise error messages.
fn definition(schema: &Value, document: &Value) -> Option<String> {
    let Some(kind) = document.get("kind").and_then(Value::as_str) else {
        return Some("v1alpha1.Config".into());
    };
    schema["$defs"].as_object()?.iter().find_map(|(name, def)| {
        let kinds = def.pointer("/properties/kind/enum")?.as_array()?;
        kinds.contains(&json!(kind)).then(|| name.clone())
    })
}

/// Validates each document of a config; returns the errors, empty when valid.
pub(crate) fn validate(talos_version: &str, documents: &[Value]) -> Vec<String> {
    let (schema, validator) = &validators()[&minor(talos_version)];
    let mut errors = Vec::new();
    for document in documents {
        if validator.is_valid(document) {
            continue;
        }
        let kind = document.get("kind").and_then(Value::as_str).unwrap_or("v1alpha1");
        let Some(definition) = definition(schema, document) else {
            errors.push(format!("{kind}: no such document kind in the schema"));
            continue;
        };
        let mut narrowed = schema.clone();
        narrowed["oneOf"] = json!([{"$ref": format!("#/$defs/{definition}")}]);
        let narrowed = jsonschema::validator_for(&narrowed).expect("the narrowed schema compiles");
        errors.extend(
            narrowed.iter_errors(document).map(|err| format!("{kind}: {}: {err}", err.instance_path())),
        );
        if errors.is_empty() {
            errors.push(format!("{kind}: invalid"));
        }
    }
    errors
}

#[test]
fn every_config_validates_against_its_schema() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for version in VERSIONS {
        for role in [Role::ControlPlane, Role::Worker] {
            for set in sets(version) {
                let mut input = input(version, role);
                input.patches = set.patches;
                let label = format!("Talos {version} {} with {} patches", role.as_str(), set.name);
                match (render_documents(&input), set.refused_with) {
                    (Ok(documents), None) => {
                        checked += 1;
                        for error in validate(version, &documents) {
                            failures.push(format!("{label}: {error}"));
                        }
                    }
                    (Err(err), Some(expected)) if err.to_string().contains(expected) => {}
                    (Ok(_), Some(expected)) => {
                        failures.push(format!("{label}: expected a refusal ({expected})"))
                    }
                    (Err(err), _) => failures.push(format!("{label}: {err}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(checked >= VERSIONS.len() * 2 * 4, "only {checked} configs were validated");
}

#[test]
fn the_validator_catches_what_a_schema_forbids() {
    let mut input = input("1.14.0", Role::Worker);
    input.patches = vec![crate::patches::patch(
        "legacy-field",
        cms_model::PatchFormat::Strategic,
        vec![json!({"cluster": {"clusterName": "not-in-1.14"}})],
    )];
    let documents = render_documents(&input).unwrap();
    let errors = validate("1.14.0", &documents);
    assert!(errors.iter().any(|e| e.contains("clusterName")), "{errors:?}");
    let legacy = render_documents(&crate::input("1.11.6", Role::Worker)).unwrap();
    assert!(!validate("1.12.11", &legacy).is_empty(), "1.11 fields are not all valid in 1.12");
}
