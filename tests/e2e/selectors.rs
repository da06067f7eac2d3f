//! Label selectors on every list, through the API and `cms get -l`, checked
//! against a filter the test computes from the labels it wrote; and the
//! projected lists paged as every list is, after a real apply.

use std::collections::BTreeMap;
use std::time::Duration;

use cms_e2e::cli::Cli;
use cms_e2e::fixtures::{
    TENANTS, config_patch, config_patches_path, item_names, node_group, node_groups_path, tenant, total,
    worker_group,
};
use cms_e2e::{Api, Server, Watch};
use serde_json::{Value, json};

use crate::provisioning::{CONVERGE, Engine, eventually, metal_tenant};

type Labels = BTreeMap<String, String>;

/// The selector of the main checks.
const SELECTOR: &str = "team in (a,b),env!=prod";

/// What [`SELECTOR`] means, written out.
fn team_a_or_b_not_prod(labels: &Labels) -> bool {
    matches!(labels.get("team").map(String::as_str), Some("a" | "b"))
        && labels.get("env").map(String::as_str) != Some("prod")
}

/// A selector's meaning, written out.
type Rule = fn(&Labels) -> bool;

fn team(labels: &Labels) -> Option<&str> {
    labels.get("team").map(String::as_str)
}

fn env(labels: &Labels) -> Option<&str> {
    labels.get("env").map(String::as_str)
}

/// `labelSelector=...`, encoded for a query string.
fn query(selector: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(selector.as_bytes()).collect();
    format!("labelSelector={encoded}")
}

/// Every combination of `team` (a, b, c or none) and `env` (prod, dev or
/// none): twelve tenants, created in reverse so only sorting orders them.
async fn labelled_tenants(api: &Api) -> BTreeMap<String, Labels> {
    let mut tenants = BTreeMap::new();
    let mut index = 0;
    for team in [Some("a"), Some("b"), Some("c"), None] {
        for env in [Some("prod"), Some("dev"), None] {
            let mut labels = Labels::new();
            if let Some(team) = team {
                labels.insert("team".into(), team.into());
            }
            if let Some(env) = env {
                labels.insert("env".into(), env.into());
            }
            tenants.insert(format!("sel-{index:02}"), labels);
            index += 1;
        }
    }
    for (name, labels) in tenants.iter().rev() {
        let mut body = tenant(name);
        body["metadata"]["labels"] = json!(labels);
        api.post(TENANTS, &body).await.expect(201);
    }
    tenants
}

/// The names of `tenants` whose labels `rule` accepts, sorted.
fn expected(tenants: &BTreeMap<String, Labels>, rule: impl Fn(&Labels) -> bool) -> Vec<String> {
    tenants.iter().filter(|(_, labels)| rule(labels)).map(|(name, _)| name.clone()).collect()
}

fn logged_in(server: &Server) -> Cli {
    let cli = Cli::new(server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);
    cli
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_filter_count_and_page_every_list() {
    let server = Server::start().await;
    let api = server.api();
    let cli = logged_in(&server);
    let tenants = labelled_tenants(&api).await;
    let wanted = expected(&tenants, team_a_or_b_not_prod);
    assert_eq!(wanted, ["sel-01", "sel-02", "sel-04", "sel-05"], "the test's own filter");

    // The API, the CLI (names, JSON and table) and the test's filter agree.
    let listed = api.get(&format!("{TENANTS}?{}", query(SELECTOR))).await.expect(200);
    assert_eq!(item_names(&listed), wanted);
    assert_eq!(total(&listed), wanted.len() as u64, "total counts the matches");
    let names = cli.run(&["get", "tenants", "-l", SELECTOR, "-o", "name"]);
    let names: Vec<&str> = names.ok().lines().map(|line| line.trim_start_matches("tenant/")).collect();
    assert_eq!(names, wanted);
    let json: Value =
        serde_json::from_str(cli.run(&["get", "tenants", "--selector", SELECTOR, "-o", "json"]).ok())
            .expect("JSON");
    assert_eq!(item_names(&json), wanted, "{json}");
    let table = cli.run(&["get", "tenants", "-l", SELECTOR]);
    let rows: Vec<&str> =
        table.ok().lines().skip(1).filter_map(|line| line.split_whitespace().next()).collect();
    assert_eq!(rows, wanted, "{table}");

    // `limit` and `offset` page over the matches; `total` stays their count.
    for (page, range) in [("limit=2", 0..2), ("limit=2&offset=1", 1..3), ("limit=3&offset=3", 3..4)] {
        let listed = api.get(&format!("{TENANTS}?{page}&{}", query(SELECTOR))).await.expect(200);
        assert_eq!(item_names(&listed), wanted[range], "{page}");
        assert_eq!(total(&listed), 4, "{page}");
    }
    let past = api.get(&format!("{TENANTS}?offset=9&{}", query(SELECTOR))).await.expect(200);
    assert_eq!((item_names(&past).len(), total(&past)), (0, 4));

    // More selectors, each against the rule it means.
    let cases: [(&str, Rule); 8] = [
        ("", |_| true),
        ("team", |l| team(l).is_some()),
        ("!team", |l| team(l).is_none()),
        ("team=c", |l| team(l) == Some("c")),
        ("team==c,env", |l| team(l) == Some("c") && env(l).is_some()),
        ("team notin (a,b)", |l| !matches!(team(l), Some("a" | "b"))),
        (" env in ( dev , ) ", |l| matches!(env(l), Some("dev" | ""))),
        ("env!=dev,!team", |l| env(l) != Some("dev") && team(l).is_none()),
    ];
    for (selector, rule) in cases {
        let listed = api.get(&format!("{TENANTS}?{}", query(selector))).await.expect(200);
        let wanted = expected(&tenants, rule);
        assert_eq!(item_names(&listed), wanted, "{selector:?}");
        assert_eq!(total(&listed), wanted.len() as u64, "{selector:?}");
    }

    // A malformed selector is 400, naming it and what is wrong, for the CLI too.
    for selector in ["team in (a", "!team=a", "team=a=b", "team in (a b)", "Team/x=1", "team=-a"] {
        let message =
            api.get(&format!("{TENANTS}?{}", query(selector))).await.expect_error(400, "BadRequest");
        assert!(message.starts_with(&format!("labelSelector {selector:?} is not valid: ")), "{message}");
        let refused = cli.run(&["get", "tenants", "-l", selector]);
        refused.expect(1);
        assert!(refused.stderr.contains(&format!("{selector:?}")), "{refused}");
        assert!(refused.stderr.contains("(BadRequest, HTTP 400)"), "{refused}");
    }
    cli.run(&["get", "tenants", "sel-01", "-l", "team=a"]).expect(2);

    // Node groups, config patches and machines take it too.
    let owner = "sel-01";
    for (name, role, subnet) in [("g1", "edge", 51), ("g2", "core", 52), ("g3", "edge", 53)] {
        let mut group = node_group(worker_group(name, 1, subnet));
        group["metadata"]["labels"] = json!({"role": role});
        api.post(&node_groups_path(owner), &group).await.expect(201);
        let mut patch = config_patch(&format!("p-{name}"));
        patch["metadata"]["labels"] = json!({"role": role});
        api.post(&config_patches_path(owner), &patch).await.expect(201);
    }
    let edge = query("role=edge");
    let groups = api.get(&format!("{}?{edge}", node_groups_path(owner))).await.expect(200);
    assert_eq!((item_names(&groups), total(&groups)), (vec!["g1".into(), "g3".into()], 2));
    let patches =
        api.get(&format!("{}?{edge}&limit=1&offset=1", config_patches_path(owner))).await.expect(200);
    assert_eq!((item_names(&patches), total(&patches)), (vec!["p-g3".into()], 2));
    let cli_groups = cli.run(&["get", "nodegroups", "-t", owner, "-l", "role notin (edge)", "-o", "name"]);
    assert_eq!(cli_groups.ok(), "nodegroup/g2\n");
    for path in [format!("/api/v1/tenants/{owner}/machines"), "/api/v1/machines".to_string()] {
        let machines = api.get(&format!("{path}?{edge}")).await.expect(200);
        assert_eq!(total(&machines), 0, "{path}");
        api.get(&format!("{path}?{}", query("!role=edge"))).await.expect_error(400, "BadRequest");
    }

    // A selector does not make the tenant watch 400.
    let mut watch = Watch::open(&api, &format!("&{}", query(SELECTOR)), &[]).await;
    let (burst, _) = watch.initial_burst(Duration::from_secs(30)).await;
    for name in &wanted {
        assert!(burst.contains(name), "{name} is in the burst {burst:?}");
    }
}

/// The names of a projected list's items, in order.
fn projected_names(list: &Value) -> Vec<String> {
    let items = list["items"].as_array().unwrap_or_else(|| panic!("a list has items: {list}"));
    items.iter().map(|item| item["name"].as_str().expect("a name").to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projected_lists_page_after_an_apply() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let cli = logged_in(&server);
    api.post(TENANTS, &metal_tenant("acme", 3, 2)).await.expect(201);
    let path = "/api/v1/tenants/acme/projected";
    let whole = eventually("the first apply's projection", CONVERGE, || {
        let api = api.clone();
        async move {
            let reply = api.get(path).await;
            (reply.status == 200).then(|| reply.json())
        }
    })
    .await;
    let all = ["cp-0", "cp-1", "cp-2", "workers-0", "workers-1"];
    assert_eq!(projected_names(&whole), all, "sorted by name: {whole}");
    assert_eq!(total(&whole), 5);

    for base in [path, "/api/v1/projected", "/api/v1/tenants/acme/projected/MACHINE"] {
        let mut pages = Vec::new();
        for offset in [0, 2, 4] {
            let page = api.get(&format!("{base}?limit=2&offset={offset}")).await.expect(200);
            assert_eq!(total(&page), 5, "{base} at {offset}");
            pages.extend(projected_names(&page));
        }
        assert_eq!(pages, all, "{base}: the pages make the whole list");
        let past = api.get(&format!("{base}?offset=5")).await.expect(200);
        assert_eq!((projected_names(&past).len(), total(&past)), (0, 5));
        for bad in ["limit=abc", "limit=-1", "limit=0", "limit=1001", "offset=-1", "offset=1.5"] {
            let message = api.get(&format!("{base}?{bad}")).await.expect_error(400, "BadRequest");
            let parameter = bad.split('=').next().unwrap_or_default();
            assert!(message.contains(parameter), "{base}?{bad}: {message}");
        }
        let message = api.get(&format!("{base}?{}", query("x"))).await.expect_error(400, "BadRequest");
        assert!(message.contains("no labels"), "{message}");
    }
    let listed = cli.run(&["get", "projected", "-t", "acme", "-o", "json"]);
    let listed: Value = serde_json::from_str(listed.ok()).expect("JSON");
    assert_eq!(projected_names(&listed), all, "the CLI reads every page: {listed}");
    cli.run(&["get", "projected", "-l", "x"]).expect(2);
}
