//! `cms unlock TENANT [--force]`: asks for a tenant's tool state lock to be
//! released (admins only). The replica reconciling the tenant carries it
//! out within seconds; `cms get tenant NAME -o yaml` shows `stateLock`
//! until it is gone.

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

use crate::cli::Output;
use crate::client::Client;
use crate::output::{encode, out};

#[derive(Debug, Args)]
pub(crate) struct UnlockArgs {
    /// The tenant
    pub(crate) tenant: String,
    /// Ask with force=true (recorded); a holder that is alive is never overridden
    #[arg(long)]
    pub(crate) force: bool,
}

/// The path of the release.
fn path(args: &UnlockArgs) -> String {
    let force = if args.force { "?force=true" } else { "" };
    format!("/api/v1/tenants/{}/state-lock{force}", args.tenant)
}

/// One line on what was asked.
fn summary(tenant: &str, reply: &Value) -> String {
    let lock = &reply["lock"];
    let text = |value: &Value| value.as_str().unwrap_or("?").to_string();
    format!(
        "tenant/{tenant} state lock release requested (held by {} for {} since {})\n",
        text(&lock["holder"]),
        text(&lock["operation"]),
        text(&lock["since"])
    )
}

pub(crate) fn unlock(client: &Client, args: &UnlockArgs, format: Output) -> Result<()> {
    let reply = client
        .delete(&path(args))
        .with_context(|| format!("releasing the state lock of tenant/{}", args.tenant))?
        .unwrap_or(Value::Null);
    match format {
        Output::Json | Output::Yaml => out(&encode(&reply, format)?),
        _ => out(&summary(&args.tenant, &reply)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_release_names_the_lock_and_forces_only_when_asked() {
        let args = UnlockArgs { tenant: "acme".into(), force: false };
        assert_eq!(path(&args), "/api/v1/tenants/acme/state-lock");
        assert_eq!(path(&UnlockArgs { force: true, ..args }), "/api/v1/tenants/acme/state-lock?force=true");
        let reply =
            json!({"lock": {"holder": "h/1/x", "operation": "apply", "since": "2026-01-01T00:00:00Z"}});
        assert_eq!(
            summary("acme", &reply),
            "tenant/acme state lock release requested (held by h/1/x for apply since 2026-01-01T00:00:00Z)\n"
        );
    }
}
