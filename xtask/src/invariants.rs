//! `cargo xtask invariants`: the architecture's rules, checked rather than hoped for.
//!
//! - `cms-model` does no IO: nothing in its normal dependency tree is a
//!   database, HTTP or async-runtime crate.
//! - Only `cms-service` depends on actix, and only `cms-store` on sea-orm or sqlx,
//!   except the one dev-dependency of [`BASELINES`]: the write bench's
//!   baseline example, a bare actix-web handler inserting with sqlx.
//! - Only `cms-tofu` spawns processes for the service: no crate source
//!   outside its `process.rs` makes a `Command`, except the client CLI
//!   (`cms edit` runs the user's editor) and test support (`cms-pgtest`
//!   runs a throwaway PostgreSQL server).
//! - Test support never ships: the server binary's normal dependency tree,
//!   with the features it builds with, holds no test-support crate.
//! - No test is switched off with an ignore attribute, and none expects a panic:
//!   the source is parsed (`invariants/attributes.rs`), so each form counts,
//!   under a `cfg_attr` or in a macro body too, and a mention in a string or
//!   a comment does not.
//! - The client CLI speaks HTTP only: of the workspace's crates it uses
//!   `cms-model` alone.
//! - Every dependency edge is pinned: each normal or build dependency of a
//!   crate under `crates/` on another, optional ones included, is a row of the
//!   table in `invariants/edges.rs` with the reason it exists, and each row is
//!   still an edge. A new arrow fails until the table and `ARCHITECTURE.md`
//!   say why.
//! - The operator guide documents every setting: each `CMS_*` variable that
//!   the server's `settings.rs` names appears in `docs/operations.md`.
//! - `ARCHITECTURE.md` stays a map one reads in ten minutes: fewer than
//!   [`MAX_ARCHITECTURE_WORDS`] words, counted as `wc -w` counts them. The
//!   details belong in the `//!` comments and `docs/` pages it points to.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::shell::{cargo, output, workspace_root};

/// Crates whose presence means IO, which `cms-model` must never pull in.
const IO_CRATES: [&str; 7] = ["sea-orm", "sqlx", "actix-web", "actix-http", "tokio", "reqwest", "hyper"];

/// Which workspace crate alone may depend directly on crates of a family.
const OWNERS: [(&str, &[&str]); 2] =
    [("cms-service", &["actix"]), ("cms-store", &["sea-orm", "sea-query", "sqlx"])];

/// Dev-dependencies exempt from [`OWNERS`], with why: never in a normal
/// dependency tree, so never in what ships.
const BASELINES: [(&str, &str, &str); 1] = [(
    "cms-service",
    "sea-orm",
    "examples/durable_insert.rs, the write bench's baseline, inserts with the store's sqlx",
)];

/// Runs the checks and reports success.
pub(crate) fn run() -> Result<()> {
    check()?;
    println!("invariants hold");
    Ok(())
}

/// Runs every check and fails with every broken rule listed.
pub(crate) fn check() -> Result<()> {
    let metadata = cargo_metadata()?;
    let graph = Graph::new(&metadata)?;
    let mut broken = settings_are_documented(&workspace_root())?;
    broken.extend(architecture_is_short(&workspace_root())?);
    broken.extend(model_does_no_io(&graph));
    broken.extend(owned_families(&graph));
    broken.extend(client_speaks_http_only(&graph));
    broken.extend(edges::edges_are_pinned(&metadata, edges::EDGES)?);
    broken.extend(tests_are_not_switched_off(&workspace_root())?);
    broken.extend(only_the_driver_spawns(&workspace_root())?);
    broken.extend(test_support_stays_out_of_the_server()?);
    if !broken.is_empty() {
        bail!("{} invariant(s) broken:\n  - {}", broken.len(), broken.join("\n  - "));
    }
    Ok(())
}

fn cargo_metadata() -> Result<Value> {
    let text = output(&mut cargo(["metadata", "--format-version", "1"]), Duration::from_secs(300))?;
    serde_json::from_str(&text).context("cargo metadata printed something that is not JSON")
}

/// The resolved dependency graph: package names and normal or build edges.
struct Graph {
    names: BTreeMap<String, String>,
    members: Vec<String>,
    /// For each package id, its direct dependencies of every kind, by name.
    direct: BTreeMap<String, BTreeSet<String>>,
    /// For each package id, the ids of its normal (non-dev, non-build) dependencies.
    normal: BTreeMap<String, Vec<String>>,
}

impl Graph {
    fn new(metadata: &Value) -> Result<Graph> {
        let mut names = BTreeMap::new();
        for package in array(&metadata["packages"])? {
            names.insert(string(&package["id"])?, string(&package["name"])?);
        }
        let members =
            array(&metadata["workspace_members"])?.iter().map(string).collect::<Result<Vec<_>>>()?;
        let mut direct = BTreeMap::new();
        let mut normal = BTreeMap::new();
        for node in array(&metadata["resolve"]["nodes"])? {
            let id = string(&node["id"])?;
            let mut all = BTreeSet::new();
            let mut normal_ids = Vec::new();
            for dep in array(&node["deps"])? {
                let dep_id = string(&dep["pkg"])?;
                all.insert(names.get(&dep_id).cloned().unwrap_or_default());
                if array(&dep["dep_kinds"])?.iter().any(|kind| kind["kind"].is_null()) {
                    normal_ids.push(dep_id);
                }
            }
            direct.insert(id.clone(), all);
            normal.insert(id, normal_ids);
        }
        Ok(Graph { names, members, direct, normal })
    }

    fn member(&self, name: &str) -> Option<&String> {
        self.members.iter().find(|id| self.names.get(*id).is_some_and(|n| n == name))
    }

    /// The names of every package reachable from `id` through normal edges.
    fn normal_closure(&self, id: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![id.to_string()];
        while let Some(next) = stack.pop() {
            for dep in self.normal.get(&next).into_iter().flatten() {
                if seen.insert(dep.clone()) {
                    stack.push(dep.clone());
                }
            }
        }
        seen.iter().filter_map(|dep| self.names.get(dep).cloned()).collect()
    }
}

fn model_does_no_io(graph: &Graph) -> Vec<String> {
    let Some(model) = graph.member("cms-model") else {
        return vec!["the workspace has no cms-model crate".to_string()];
    };
    let closure = graph.normal_closure(model);
    IO_CRATES
        .iter()
        .filter(|io| closure.iter().any(|name| name == *io || name.starts_with(&format!("{io}-"))))
        .map(|io| {
            format!("cms-model must do no IO, yet it depends on {io} (see `cargo tree -p cms-model -i {io}`)")
        })
        .collect()
}

fn owned_families(graph: &Graph) -> Vec<String> {
    let mut broken = Vec::new();
    for member in &graph.members {
        let name = &graph.names[member];
        for dep in graph.direct.get(member).into_iter().flatten() {
            for (owner, families) in OWNERS {
                let in_family =
                    families.iter().any(|family| dep == family || dep.starts_with(&format!("{family}-")));
                let exempt =
                    BASELINES.iter().any(|(crate_name, exempt, _)| crate_name == name && exempt == dep)
                        && !graph
                            .normal
                            .get(member)
                            .into_iter()
                            .flatten()
                            .any(|id| graph.names.get(id) == Some(dep));
                if in_family && name != owner && !exempt {
                    broken.push(format!("only {owner} may depend on {dep}, yet {name} does"));
                }
            }
        }
    }
    broken
}

/// The client CLI and the only workspace crate it may use: the wire types.
const CLIENT: (&str, &str) = ("cms-cli", "cms-model");

fn client_speaks_http_only(graph: &Graph) -> Vec<String> {
    let (client, allowed) = CLIENT;
    let Some(id) = graph.member(client) else { return Vec::new() };
    let workspace: BTreeSet<&String> = graph.members.iter().filter_map(|m| graph.names.get(m)).collect();
    graph
        .normal
        .get(id)
        .into_iter()
        .flatten()
        .filter_map(|dep| graph.names.get(dep))
        .filter(|name| workspace.contains(name) && name.as_str() != allowed)
        .map(|name| {
            format!("{client} speaks HTTP only and may use {allowed} alone, yet it depends on {name}")
        })
        .collect()
}

/// Tests are fixed or removed, never switched off: no Rust file under
/// `crates/`, `tests/` or `xtask/` holds an ignore or panic-expecting
/// attribute in any form (`attributes.rs` parses them out), and each parses.
fn tests_are_not_switched_off(root: &Path) -> Result<Vec<String>> {
    let mut broken = Vec::new();
    for folder in ["crates", "tests", "xtask"] {
        let mut files = Vec::new();
        rust_files(&root.join(folder), &mut files)?;
        for file in files {
            let text =
                std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let shown = file.strip_prefix(root).unwrap_or(&file).display();
            match attributes::switched_off(&text) {
                Ok(found) => broken.extend(found.into_iter().map(|attribute| {
                    format!("{shown} uses {attribute}: tests are fixed or removed, never switched off")
                })),
                Err(err) => broken
                    .push(format!("{shown} does not parse as Rust, so its tests cannot be checked: {err}")),
            }
        }
    }
    Ok(broken)
}

/// The one library file that may make a `Command`; spelled in parts so that
/// this file does not match itself.
const SPAWNER: &str = "crates/cms-tofu/src/process.rs";
/// Crates outside the service that may spawn: the client CLI runs an editor,
/// and the test support runs PostgreSQL servers for tests.
const CLIENT_CRATES: [&str; 2] = ["cms-cli", "cms-pgtest"];

/// Crates that exist for tests only, which the server must never link.
const TEST_SUPPORT: [&str; 3] = ["cms-pgtest", "cms-fake-node", "mockall"];

/// `cargo tree` resolves features for the server alone, as its build does
/// (metadata unifies the whole workspace's, test features included).
fn test_support_stays_out_of_the_server() -> Result<Vec<String>> {
    let tree = output(
        &mut cargo(["tree", "-p", "cms-server", "-e", "normal,build", "--prefix", "none"]),
        Duration::from_secs(300),
    )?;
    Ok(TEST_SUPPORT
        .iter()
        .filter(|name| tree.lines().any(|line| line.split_whitespace().next() == Some(**name)))
        .map(|name| format!("cms-server must not link test support, yet it depends on {name} (see `cargo tree -p cms-server -i {name}`)"))
        .collect())
}

fn only_the_driver_spawns(root: &Path) -> Result<Vec<String>> {
    let needle = format!("Command::{}", "new");
    let mut broken = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).context("listing crates")? {
        let dir = entry?.path();
        if CLIENT_CRATES.iter().any(|name| dir.ends_with(name)) {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files)?;
        for file in files {
            let shown = file.strip_prefix(root).unwrap_or(&file).display().to_string();
            let text =
                std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            if shown != SPAWNER && text.contains(&needle) {
                broken.push(format!("{shown} makes a process; only {SPAWNER} may (see clippy.toml)"));
            }
        }
    }
    Ok(broken)
}

fn rust_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

fn array(value: &Value) -> Result<&Vec<Value>> {
    value.as_array().with_context(|| format!("cargo metadata: expected an array, got {value}"))
}

fn string(value: &Value) -> Result<String> {
    value
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("cargo metadata: expected a string, got {value}"))
}

/// The server's settings, and the operator guide that must name each of them.
const SETTINGS: &str = "crates/cms-server/src/settings.rs";
const OPERATIONS_GUIDE: &str = "docs/operations.md";

fn settings_are_documented(root: &Path) -> Result<Vec<String>> {
    let read =
        |path: &str| std::fs::read_to_string(root.join(path)).with_context(|| format!("reading {path}"));
    let Some(variables) = settings_variables(&read(SETTINGS)?) else {
        return Ok(vec![format!("{SETTINGS} has no `const KEYS` table to read the settings from")]);
    };
    let documented = cms_names(&read(OPERATIONS_GUIDE)?);
    let missing: Vec<String> = variables.difference(&documented).cloned().collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![format!("{OPERATIONS_GUIDE} does not document {}, which {SETTINGS} reads", missing.join(", "))])
}

/// Every variable the settings name: each key of the `KEYS` table as
/// `CMS_<KEY>`, and every `CMS_*` name spelled out in the source. `None`
/// when the table is missing, so that a rename cannot pass unnoticed.
fn settings_variables(source: &str) -> Option<BTreeSet<String>> {
    let (_, rest) = source.split_once("const KEYS: &[&str] = &[")?;
    let (table, _) = rest.split_once("];")?;
    let keys = table.split('"').skip(1).step_by(2).map(|key| format!("CMS_{}", key.to_ascii_uppercase()));
    Some(keys.chain(cms_names(source)).collect())
}

/// The whole words of `text` that are `CMS_` and an upper-case name.
fn cms_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| {
            word.strip_prefix("CMS_").is_some_and(|name| {
                !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            })
        })
        .map(str::to_string)
        .collect()
}

/// The architecture page, and the words it must stay under.
const ARCHITECTURE: &str = "ARCHITECTURE.md";
const MAX_ARCHITECTURE_WORDS: usize = 2000;

fn architecture_is_short(root: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(root.join(ARCHITECTURE))
        .with_context(|| format!("reading {ARCHITECTURE}"))?;
    Ok(architecture_words_broken(&text).into_iter().collect())
}

/// What is wrong with an architecture page of `text`: `None` when it has
/// fewer than [`MAX_ARCHITECTURE_WORDS`] words.
fn architecture_words_broken(text: &str) -> Option<String> {
    let words = word_count(text);
    (words >= MAX_ARCHITECTURE_WORDS).then(|| {
        format!(
            "{ARCHITECTURE} has {words} words (`wc -w`), not fewer than {MAX_ARCHITECTURE_WORDS}: \
             move details into the crates' `//!` comments or docs/, and keep the map"
        )
    })
}

/// The words of `text` as `wc -w` counts them: runs of characters between
/// whitespace, punctuation and Markdown included.
fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

mod attributes;
mod edges;

#[cfg(test)]
mod tests;
