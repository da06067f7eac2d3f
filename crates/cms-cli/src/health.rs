//! `cms health [TENANT]`: the prober's health results, one row per tenant.
//!
//! The health result is not a resource of cms-model (the prober owns it); the
//! client reads the fields the spec documents (`tenant`, `reachable`,
//! `talosVersion`, `machineCount`, `probedAt`, `error`) by name and passes
//! everything through unchanged for `-o json|yaml`.

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::cli::Output;
use crate::client::Client;
use crate::output::{encode, out, table};
use crate::tables::span;

const HEADERS: &[&str] = &["TENANT", "REACHABLE", "TALOS", "MACHINES", "PROBED", "ERROR"];

/// `cms health [TENANT]`.
pub(crate) fn health(client: &Client, tenant: Option<&str>, format: Output) -> Result<()> {
    let (results, reply) = match tenant {
        Some(tenant) => {
            let result: Value = client.get(&format!("/api/v1/tenants/{tenant}/health"))?;
            (vec![result.clone()], result)
        }
        None => {
            let reply: Value = client.get("/api/v1/health")?;
            let results = reply.get("tenants").and_then(Value::as_array).cloned().unwrap_or_default();
            (results, reply)
        }
    };
    match format {
        Output::Json | Output::Yaml => out(&encode(&reply, format)?),
        Output::Name => {
            out(&results.iter().map(|r| format!("tenant/{}\n", text(r, "tenant"))).collect::<String>())
        }
        Output::Table if results.is_empty() => {
            eprintln!("No tenants found.");
            Ok(())
        }
        Output::Table => out(&render(&results, Utc::now())),
    }
}

/// The table of health results.
pub(crate) fn render(results: &[Value], now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = results.iter().map(|result| row(result, now)).collect();
    table(HEADERS, &rows)
}

fn row(result: &Value, now: DateTime<Utc>) -> Vec<String> {
    let probed = result
        .get("probedAt")
        .and_then(Value::as_str)
        .and_then(|at| at.parse::<DateTime<Utc>>().ok())
        .map_or_else(|| "-".to_string(), |at| format!("{} ago", span(now - at)));
    let machines =
        result.get("machineCount").and_then(Value::as_u64).map_or_else(|| "-".into(), |n| n.to_string());
    let reachable = result.get("reachable").and_then(Value::as_bool).unwrap_or(false);
    vec![
        text(result, "tenant"),
        reachable.to_string(),
        text(result, "talosVersion"),
        machines,
        probed,
        text(result, "error"),
    ]
}

fn text(result: &Value, key: &str) -> String {
    result.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or("-").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn health_table() {
        let now = "2026-01-10T12:00:00Z".parse().unwrap();
        let results = [
            json!({"tenant": "demo", "reachable": true, "talosVersion": "1.9.6", "machineCount": 3,
                   "probedAt": "2026-01-10T11:59:52.000Z"}),
            json!({"tenant": "empty", "reachable": false, "machineCount": 0, "error": "no reachable machines"}),
        ];
        insta::assert_snapshot!(render(&results, now));
    }
}
