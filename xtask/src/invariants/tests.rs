//! Tests of the settings check, of the switched-off-tests check (each attribute form caught, mentions passed), of the pinned dependency edges, and of the deployment artifacts in `deploy/`:
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

#[test]
fn words_are_counted_as_wc_counts_them() {
    assert_eq!(word_count(""), 0);
    assert_eq!(word_count("  \n\t "), 0);
    assert_eq!(word_count("one  two\tthree\nfour\r\nfive"), 5);
    assert_eq!(word_count("**`cms-model`**: the kinds (`tenant.rs`) -> cms-store"), 6);
    assert_eq!(word_count("a\u{a0}b c"), 3);
}

#[test]
fn an_architecture_page_of_2000_words_or_more_is_refused() {
    let page = |words: usize| vec!["word"; words].join(" ");
    assert_eq!(architecture_words_broken(&page(0)), None);
    assert_eq!(architecture_words_broken(&page(MAX_ARCHITECTURE_WORDS - 1)), None);
    for words in [MAX_ARCHITECTURE_WORDS, MAX_ARCHITECTURE_WORDS + 1, 3247] {
        let broken = architecture_words_broken(&page(words)).expect("too long a page is refused");
        assert!(broken.contains(&format!("ARCHITECTURE.md has {words} words")), "{broken}");
    }
}

#[test]
fn the_architecture_page_is_short() {
    assert_eq!(architecture_is_short(&workspace_root()).unwrap(), Vec::<String>::new());
    let words = word_count(&read(ARCHITECTURE));
    assert!(words > 500, "ARCHITECTURE.md has only {words} words: is it still the map?");
}

/// A synthetic `cargo metadata` rooted at `/ws`: each package is a member
/// with its dependencies as `(name, kind)`, where the kind is `normal`,
/// `build`, `dev` or `optional`. Members live in `crates/<name>`, but for
/// `xtask` and `cms-e2e` (in `tests/`); `serde` is a registry crate.
fn metadata(packages: &[(&str, &[(&str, &str)])]) -> Value {
    let dir = |name: &str| match name {
        "xtask" => "/ws/xtask".to_string(),
        "cms-e2e" => "/ws/tests".to_string(),
        _ => format!("/ws/crates/{name}"),
    };
    let packages: Vec<Value> = packages
        .iter()
        .map(|(name, deps)| {
            let deps: Vec<Value> = deps
                .iter()
                .map(|(dep, kind)| {
                    serde_json::json!({
                        "name": dep,
                        "kind": match *kind { "build" | "dev" => Value::from(*kind), _ => Value::Null },
                        "optional": *kind == "optional",
                        "path": if *dep == "serde" { Value::Null } else { Value::from(dir(dep)) },
                    })
                })
                .collect();
            serde_json::json!({
                "id": format!("{name}-id"),
                "name": name,
                "manifest_path": format!("{}/Cargo.toml", dir(name)),
                "dependencies": deps,
            })
        })
        .collect();
    let members: Vec<Value> = packages.iter().map(|package| package["id"].clone()).collect();
    serde_json::json!({ "workspace_root": "/ws", "workspace_members": members, "packages": packages })
}

/// A workspace with an edge of every kind, and sources and targets outside `crates/`.
fn every_kind_of_edge() -> Value {
    metadata(&[
        (
            "cms-a",
            &[
                ("cms-b", "normal"),
                ("cms-c", "build"),
                ("cms-d", "dev"),
                ("cms-e", "optional"),
                ("serde", "normal"),
                ("cms-e2e", "normal"),
            ],
        ),
        ("cms-b", &[("cms-c", "dev")]),
        ("cms-c", &[]),
        ("cms-d", &[("cms-a", "dev")]),
        ("cms-e", &[]),
        ("xtask", &[("cms-a", "normal")]),
        ("cms-e2e", &[("cms-b", "normal")]),
    ])
}

fn check_edges(table: &[(&str, &str, &str)], expected: &[&str]) {
    let broken = edges::edges_are_pinned(&every_kind_of_edge(), table).unwrap();
    assert_eq!(broken.len(), expected.len(), "{broken:#?}");
    for (message, expected) in broken.iter().zip(expected) {
        assert!(message.contains(expected), "{message:?} does not say {expected:?}");
    }
}

#[test]
fn edges_are_normal_build_and_optional_dependencies_between_crates() {
    let edges = edges::workspace_edges(&every_kind_of_edge()).unwrap();
    let edges: Vec<(&str, &str)> = edges.iter().map(|(from, to)| (from.as_str(), to.as_str())).collect();
    assert_eq!(edges, [("cms-a", "cms-b"), ("cms-a", "cms-c"), ("cms-a", "cms-e")]);
}

#[test]
fn a_new_edge_and_a_stale_row_are_both_reported() {
    let why = "a reason";
    check_edges(&[("cms-a", "cms-b", why), ("cms-a", "cms-c", why), ("cms-a", "cms-e", why)], &[]);
    check_edges(
        &[("cms-a", "cms-b", why), ("cms-a", "cms-e", why), ("cms-b", "cms-c", why)],
        &[
            "cms-a -> cms-c is a new dependency edge: add it to the table in xtask/src/invariants/edges.rs with the reason, and to ARCHITECTURE.md",
            "pins cms-b -> cms-c, which no crate has any more: remove the row",
        ],
    );
}

#[test]
fn the_edge_table_is_well_formed() {
    let mut seen = BTreeSet::new();
    for (from, to, why) in edges::EDGES {
        assert!(seen.insert((from, to)), "{from} -> {to} is pinned twice");
        assert_ne!(from, to, "{from} depends on itself");
        assert!(
            why.starts_with(|c: char| c.is_lowercase()) && !why.ends_with('.'),
            "{from} -> {to}: {why:?}"
        );
        let (client, allowed) = CLIENT;
        assert!(*from != client || *to == allowed, "the table lets {client} use {to}: it speaks HTTP only");
    }
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

/// The forbidden attributes of `source`; the cases below spell them in
/// strings, which the check itself must let pass in this very file.
fn switched_off(source: &str) -> Vec<String> {
    attributes::switched_off(source).unwrap_or_else(|err| panic!("{source} does not parse: {err}"))
}

#[test]
fn every_form_of_a_switched_off_test_is_caught() {
    let cases = [
        "#[test] #[ignore] fn t() {}",
        "#[test] #[ignore = \"slow\"] fn t() {}",
        "#[test] #[should_panic] fn t() {}",
        "#[test] #[should_panic(expected = \"boom\")] fn t() {}",
        "#[test] #[cfg_attr(windows, ignore)] fn t() {}",
        "#[test] #[cfg_attr(not(feature = \"pg\"), ignore = \"needs pg\")] fn t() {}",
        "#[test] #[cfg_attr(any(unix, windows), should_panic(expected = \"x\"))] fn t() {}",
        "#[test] #[cfg_attr(all(), inline, ignore)] fn t() {}",
        "#[test] #[cfg_attr(unix, cfg_attr(target_os = \"linux\", ignore))] fn t() {}",
        "mod m { #[cfg(test)] mod tests { #[tokio::test] #[ignore] async fn t() {} } }",
        "struct S; impl S { #[ignore] fn t() {} }",
        "macro_rules! tests { () => { #[test] #[ignore] fn t() {} }; }",
        "some_macro! { #[test] #[cfg_attr(unix, should_panic)] fn t() {} }",
        "#[test] #[::core::prelude::v1::ignore] fn t() {}",
        "/// ```ignore\n/// run();\n/// ```\nfn documented() {}",
        "//! ```rust,should_panic\n//! boom();\n//! ```\n",
    ];
    for case in cases {
        let found = switched_off(case);
        assert_eq!(found.len(), 1, "{case}: {found:?}");
    }
    let found = switched_off("#[test] #[cfg_attr(unix, ignore)] fn named() {}");
    assert_eq!(found, ["#[cfg_attr(.., ignore)] on `fn named`"]);
}

#[test]
fn strings_comments_and_other_attributes_pass() {
    let cases = [
        "// #[ignore] is never used here\n#[test] fn t() {}",
        "/* #[should_panic] */ #[test] fn t() {}",
        "/// Never #[ignore] a test.\n#[test] fn t() {}",
        "#[test] fn t() { let _ = \"#[ignore]\"; let _ = r#\"#[cfg_attr(unix, should_panic)]\"#; }",
        "#[test] fn t() { assert!(true, \"#[should_panic]\"); }",
        "#[test] #[cfg_attr(unix, allow(dead_code))] fn t() {}",
        "#[test] #[cfg(unix)] fn t() {}",
        "#[derive(Default)] struct S { #[serde(skip)] a: u8 }",
        "fn ignore() {} fn t() { ignore(); let should_panic = 1; let _ = should_panic; }",
        "/// ```no_run\n/// serve();\n/// ```\n/// The words ignore and should_panic, outside a fence.\nfn documented() {}",
    ];
    for case in cases {
        assert_eq!(switched_off(case), Vec::<String>::new(), "{case}");
    }
}

#[test]
fn a_file_that_does_not_parse_is_reported() {
    assert!(attributes::switched_off("fn t( {").is_err());
}
