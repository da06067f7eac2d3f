//! Tests of the settings check, and of the deployment artifacts in `deploy/`:
//! they parse as YAML and hold the facts the operator guide promises.

use serde_json::Value;

use super::*;

fn read(path: &str) -> String {
    let path = workspace_root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|err| panic!("{path} is not YAML: {err}"))
}

fn check_names(text: &str, expected: &[&str]) {
    assert_eq!(cms_names(text).iter().map(String::as_str).collect::<Vec<_>>(), expected);
}

#[test]
fn names_are_whole_words() {
    check_names(
        "`CMS_SECRETS_KEY_ID` and CMS_SECRETS_KEY, not CMS_ or xCMS_LOG",
        &["CMS_SECRETS_KEY", "CMS_SECRETS_KEY_ID"],
    );
    check_names("starts_with(\"CMS_\"), CMS_lower, CMS_LOG.", &["CMS_LOG"]);
}

#[test]
fn settings_variables_come_from_the_key_table_and_the_source() {
    let source = "const KEYS: &[&str] = &[\n    \"listen\",\n    \"tofu_binary\",\n];\nbail!(\"CMS_EXTRA\")";
    let variables = settings_variables(source).unwrap();
    assert_eq!(variables.into_iter().collect::<Vec<_>>(), ["CMS_EXTRA", "CMS_LISTEN", "CMS_TOFU_BINARY"]);
    assert!(settings_variables("const OTHER: &[&str] = &[];").is_none());
}

#[test]
fn the_guide_documents_every_setting() {
    assert_eq!(settings_are_documented(&workspace_root()).unwrap(), Vec::<String>::new());
    let variables = settings_variables(&read(SETTINGS)).unwrap();
    assert!(variables.len() >= 25 && variables.contains("CMS_RECONCILE_CONCURRENCY"), "{variables:?}");
}

/// The lines of the Dockerfile's last stage, the runtime image.
fn runtime_stage(dockerfile: &str) -> Vec<&str> {
    let lines: Vec<&str> = dockerfile.lines().map(str::trim).collect();
    let start = lines.iter().rposition(|line| line.starts_with("FROM ")).expect("the Dockerfile has a FROM");
    lines[start..].to_vec()
}

#[test]
fn the_image_runs_as_a_user_that_is_not_root() {
    let dockerfile = read("deploy/Dockerfile");
    let runtime = runtime_stage(&dockerfile);
    let user = runtime.iter().rev().find_map(|line| line.strip_prefix("USER ")).expect("a USER line");
    let name = user.trim().split(':').next().unwrap_or_default();
    assert!(!matches!(name, "" | "root" | "0"), "the image runs as {user}");
    assert!(runtime.contains(&"EXPOSE 8080"));
    assert!(runtime.iter().any(|line| line.contains("CMS_DATA_DIR=/var/lib/cms")));
    assert!(runtime.contains(&"VOLUME [\"/var/lib/cms\"]"));
    assert!(runtime.iter().any(|line| line.starts_with("ENTRYPOINT") && line.contains("cms-server")));
    assert!(runtime.iter().any(|line| line.contains("util-linux")), "setpriv comes from util-linux");
}

#[test]
fn the_image_builds_with_the_pinned_toolchain() {
    let toolchain = read("rust-toolchain.toml");
    let channel = toolchain
        .lines()
        .find_map(|line| line.trim().strip_prefix("channel = "))
        .expect("rust-toolchain.toml names a channel")
        .trim_matches('"');
    let dockerfile = read("deploy/Dockerfile");
    assert!(dockerfile.lines().any(|line| line == format!("ARG RUST_VERSION={channel}")), "{channel}");
    assert!(dockerfile.contains("cargo build --release --locked -p cms-server -p cms-cli"));
    assert!(dockerfile.contains("ARG TOFU_VERSION=") && dockerfile.contains("sha256sum -c"));
}

#[test]
fn compose_runs_the_server_on_postgres() {
    let compose = yaml("deploy/compose.yaml");
    let postgres = &compose["services"]["postgres"];
    assert!(postgres["image"].as_str().is_some_and(|image| image.starts_with("postgres:15")), "{postgres}");
    assert!(postgres["healthcheck"]["test"].is_array());
    assert!(postgres["volumes"].is_array());
    let server = &compose["services"]["cms-server"];
    let url = server["environment"]["CMS_DATABASE_URL"].as_str().unwrap_or_default();
    assert!(url.starts_with("postgres://"), "{url}");
    assert_eq!(server["depends_on"]["postgres"]["condition"], "service_healthy");
    assert_eq!(server["env_file"], ".env");
    assert!(read("deploy/compose.env.example").contains("POSTGRES_PASSWORD="));
}

#[test]
fn the_chart_is_secure_by_default() {
    let chart = yaml("deploy/helm/cms/Chart.yaml");
    assert_eq!((chart["apiVersion"].as_str(), chart["name"].as_str()), (Some("v2"), Some("cms")));
    let values = yaml("deploy/helm/cms/values.yaml");
    assert_eq!(values["replicaCount"], 1);
    assert_eq!(values["podSecurityContext"]["runAsNonRoot"], true);
    assert_eq!(values["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(values["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(values["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(values["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(values["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(values["database"]["url"], "");
}

#[test]
fn the_chart_refuses_replicas_without_postgres() {
    let helpers = read("deploy/helm/cms/templates/_helpers.tpl");
    assert!(helpers.contains("more than one replica requires PostgreSQL"));
    assert!(helpers.contains("(gt $replicas 1) (not (include \"cms.postgres\" .))"));
    let deployment = read("deploy/helm/cms/templates/deployment.yaml");
    assert!(deployment.starts_with("{{- include \"cms.validate\" . }}"));
    let secret = read("deploy/helm/cms/templates/secret.yaml");
    for key in ["CMS_SECRETS_KEY", "CMS_BOOTSTRAP_ADMIN_PASSWORD", "CMS_DATABASE_URL", "cloudCredentials"] {
        assert!(secret.contains(key), "the chart's Secret lacks {key}");
    }
}

#[test]
fn the_systemd_unit_is_hardened() {
    let unit = read("deploy/systemd/cms.service");
    for line in [
        "DynamicUser=yes",
        "StateDirectory=cms",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "SystemCallFilter=@system-service",
        "EnvironmentFile=/etc/cms/cms.env",
        "Restart=on-failure",
        "KillMode=mixed",
    ] {
        assert!(unit.lines().any(|l| l == line), "cms.service lacks {line}");
    }
}
