//! Drift: `plan -detailed-exitcode` of a tenant's workspace with refresh
//! on, and what differs between the infrastructure and its configuration,
//! by name only.
//!
//! [`Tofu::plan`] writes the workspace as an apply does (on PostgreSQL
//! another replica may have applied it), runs `init` when needed, then
//! `plan -input=false -detailed-exitcode -lock=false -out=drift.tfplan`
//! (exit 0: no changes, 2: changes, 1: an error) with a stand-in for the
//! machines' user data in its environment (the instances' preconditions
//! want a value; user data is in their `ignore_changes`, so the plan is the
//! same, and no machine config reaches the plan file), then, only on 2,
//! `show -json drift.tfplan`; the plan file is removed at once, whatever
//! happened. It runs under the tenant's lock, and not at all while another
//! run holds it: a plan never runs beside an apply.
//!
//! From the plan's `resource_changes`, every managed resource whose actions
//! are not `no-op` is drift: its address, its action and the names of the
//! attributes that differ (`input.shape`), never their values, sensitive or
//! not. What the node API owns is no drift: user data is in the instances'
//! `ignore_changes` already, and any attribute path through `user_data`
//! is dropped besides, with a resource whose only difference it was.

use serde_json::{Map, Value};

use crate::driver::{create_private_dir, providers, rendered, write_private};
use crate::user_data::UserData;
use crate::workspace::{MAIN_FILE, WorkspacePlan};
use crate::{Tofu, TofuError};

/// The plan file, in the workspace, between `plan` and `show`.
pub const PLAN_FILE: &str = "drift.tfplan";

/// How deep attribute paths go into nested objects (`input.shape`).
const DEPTH: usize = 3;
/// The longest attribute name segment kept; longer ones are cut.
const SEGMENT: usize = 64;
/// The most attributes named per resource.
const ATTRIBUTES: usize = 16;

/// What a drift plan's cloud instances boot with instead of their machine
/// config: user data is in every instance's `ignore_changes`, so the plan
/// is the same, and neither the tool's environment nor the plan file (which
/// keeps the variables' values) holds a config.
pub const USER_DATA_STAND_IN: &str = "# a drift plan: the machine config is not passed\n";

/// `plan` with [`USER_DATA_STAND_IN`] as every cloud machine's config; the
/// preconditions that want a value are met.
fn stand_in(plan: &WorkspacePlan) -> WorkspacePlan {
    let mut plan = plan.clone();
    for machine in plan.machines.iter_mut().filter(|machine| machine.provider != cms_model::Provider::Metal) {
        machine.user_data = Some(USER_DATA_STAND_IN.to_string());
    }
    plan
}

/// What a plan found: the resources that differ, in the plan's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    pub resources: Vec<DriftedResource>,
}

impl Drift {
    /// No resource differs.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }
}

/// One resource the plan would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftedResource {
    /// `terraform_data.cp-0`.
    pub address: String,
    /// `create`, `update`, `delete` or `replace`.
    pub action: String,
    /// The attributes that differ, by name (`input.shape`); empty when the
    /// whole resource is created or deleted.
    pub attributes: Vec<String>,
}

impl Tofu {
    /// Plans the tenant's workspace with refresh on and tells what differs;
    /// `None` when the tenant's workspace is busy with another run (an
    /// apply), so nothing was planned. The caller plans only a tenant whose
    /// last apply had the inputs of `plan`.
    pub async fn plan(&self, plan: &WorkspacePlan) -> Result<Option<Drift>, TofuError> {
        let lock = self.lock(&plan.tenant);
        let Ok(_guard) = lock.try_lock() else { return Ok(None) };
        let tenant = plan.tenant.as_str();
        let dir = self.workspace_dir(tenant);
        let rendered = rendered(plan, self.options.backend)?;
        let user_data = UserData::of(&stand_in(plan))?;
        create_private_dir(&dir).await?;
        // A plan file a run killed midway left holds variable values.
        remove_plan_file(&dir).await;
        write_private(&dir.join(MAIN_FILE), &rendered).await?;
        let lock_file = tokio::fs::read_to_string(dir.join(".terraform.lock.hcl")).await.unwrap_or_default();
        let missing = providers(plan).into_iter().any(|source| !lock_file.contains(&format!("/{source}\"")));
        if !dir.join(".terraform").exists() || missing {
            let mut args = vec!["init".to_string(), "-input=false".into(), "-no-color".into()];
            if let Some(plugins) = &self.options.plugin_dir {
                args.push(format!("-plugin-dir={}", plugins.display()));
            }
            self.checked(tenant, args, &UserData::default()).await?;
        }
        let result = self.plan_and_show(tenant, &user_data).await;
        remove_plan_file(&dir).await;
        result.map(Some)
    }

    async fn plan_and_show(&self, tenant: &str, user_data: &UserData) -> Result<Drift, TofuError> {
        let args = vec![
            "plan".to_string(),
            "-input=false".into(),
            "-no-color".into(),
            "-detailed-exitcode".into(),
            // Read-only: the tenant's lock in the process and its lease
            // across replicas keep other runs away, and a plan stopped
            // midway leaves no lock behind for the next apply.
            "-lock=false".into(),
            format!("-out={PLAN_FILE}"),
        ];
        let output = self.checked(tenant, args, user_data).await?;
        if output.code != Some(2) {
            return Ok(Drift::default());
        }
        let show = vec!["show".into(), "-json".into(), "-no-color".into(), PLAN_FILE.into()];
        let output = self.checked(tenant, show, &UserData::default()).await?;
        parse_plan(&output.stdout)
            .map_err(|reason| TofuError::Garbage { command: "show -json".into(), reason })
    }
}

/// Removes the workspace `dir`'s plan file, if any: it holds the
/// variables' values, sensitive ones too.
pub(crate) async fn remove_plan_file(dir: &std::path::Path) {
    match tokio::fs::remove_file(dir.join(PLAN_FILE)).await {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(dir = %dir.display(), "could not remove a drift plan file: {err}");
        }
        _ => {}
    }
}

/// The drift in the output of `show -json <planfile>`.
pub fn parse_plan(stdout: &[u8]) -> Result<Drift, String> {
    let document: Value = serde_json::from_slice(stdout).map_err(|err| err.to_string())?;
    let Some(document) = document.as_object() else { return Err("the plan is not a JSON object".into()) };
    let mut resources = Vec::new();
    for change in document.get("resource_changes").and_then(Value::as_array).into_iter().flatten() {
        if change.get("mode").and_then(Value::as_str) != Some("managed") {
            continue;
        }
        let address = change
            .get("address")
            .and_then(Value::as_str)
            .ok_or_else(|| "a resource change has no address".to_string())?;
        let body = change.get("change").cloned().unwrap_or(Value::Null);
        let actions: Vec<&str> = body
            .get("actions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let Some(action) = action(&actions) else { continue };
        let attributes = match action {
            "update" | "replace" => differing(&body),
            _ => Vec::new(),
        };
        // Only what the node API owns differs (user data): no drift.
        if action == "update" && attributes.is_empty() {
            continue;
        }
        resources.push(DriftedResource {
            address: address.to_string(),
            action: action.to_string(),
            attributes,
        });
    }
    Ok(Drift { resources })
}

/// The action of a change, `None` for one that is no drift (`no-op`, a
/// data source's `read`, a `forget`).
fn action(actions: &[&str]) -> Option<&'static str> {
    match actions {
        ["create"] => Some("create"),
        ["update"] => Some("update"),
        ["delete"] => Some("delete"),
        ["delete", "create"] | ["create", "delete"] => Some("replace"),
        _ => None,
    }
}

/// The names of the attributes that differ: those whose known value
/// changes, else those that become unknown (values computed again).
fn differing(change: &Value) -> Vec<String> {
    let null = Value::Null;
    let before = change.get("before").unwrap_or(&null);
    let after = change.get("after").unwrap_or(&null);
    let unknown = change.get("after_unknown").unwrap_or(&null);
    let mut known = Vec::new();
    let mut computed = Vec::new();
    walk(before, after, unknown, "", 0, (&mut known, &mut computed));
    let mut names = if known.is_empty() { computed } else { known };
    names.retain(|name| !name.split('.').any(|segment| segment == "user_data"));
    names.sort();
    names.dedup();
    names.truncate(ATTRIBUTES);
    names
}

fn walk(
    before: &Value,
    after: &Value,
    unknown: &Value,
    path: &str,
    depth: usize,
    (known, computed): (&mut Vec<String>, &mut Vec<String>),
) {
    // The root is the resource's object; every other call names a path.
    if path.is_empty() && !(before.is_object() && after.is_object()) {
        return;
    }
    if unknown == &Value::Bool(true) {
        computed.push(path.to_string());
        return;
    }
    match (before, after) {
        (Value::Object(left), Value::Object(right)) if depth < DEPTH => {
            let empty = Map::new();
            let unknown = unknown.as_object().unwrap_or(&empty);
            let mut keys: Vec<&String> = left.keys().chain(right.keys()).chain(unknown.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = match path {
                    "" => segment(key),
                    _ => format!("{path}.{}", segment(key)),
                };
                let null = Value::Null;
                walk(
                    left.get(key).unwrap_or(&null),
                    right.get(key).unwrap_or(&null),
                    unknown.get(key).unwrap_or(&null),
                    &child,
                    depth + 1,
                    (known, computed),
                );
            }
        }
        _ if before != after => known.push(path.to_string()),
        // A list or a set that becomes partly unknown.
        _ if unknown.as_array().is_some_and(|items| items.iter().any(|item| item != &Value::Bool(false)))
            || unknown.as_object().is_some_and(|fields| !fields.is_empty()) =>
        {
            computed.push(path.to_string())
        }
        _ => {}
    }
}

/// An attribute name as it is shown: letters, digits, `_` and `-`, at most
/// [`SEGMENT`] characters; anything else becomes `?`.
fn segment(key: &str) -> String {
    key.chars()
        .take(SEGMENT)
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '?' })
        .collect()
}

#[cfg(test)]
#[path = "drift_tests.rs"]
mod tests;
