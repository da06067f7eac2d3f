//! `cms rotate-ca TENANT [--os] [--kubernetes]`: asks for a tenant's
//! certificate authorities to be rotated (admins only); neither flag rotates
//! both. The server seals the new CAs and answers at once; the replica
//! reconciling the tenant carries the rotation through its phases, node by
//! node, and `cms get tenant NAME -o yaml` shows `status.caRotation` as it
//! goes (`docs/ca-rotation.md`).

use anyhow::{Context, Result};
use clap::Args;
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::Output;
use crate::client::Client;
use crate::output::{encode, out};

#[derive(Debug, Args)]
pub(crate) struct RotateCaArgs {
    /// The tenant
    pub(crate) tenant: String,
    /// Rotate the OS CA (the Talos API's)
    #[arg(long)]
    pub(crate) os: bool,
    /// Rotate the Kubernetes CA
    #[arg(long)]
    pub(crate) kubernetes: bool,
}

/// The path of the request, for a tenant name that is one.
fn path(tenant: &str) -> Result<String> {
    cms_model::validate_name("TENANT", tenant).map_err(|err| crate::failure::usage(err.to_string()))?;
    Ok(format!("/api/v1/tenants/{tenant}/rotate-ca"))
}

/// The request's body: the authorities the flags name, both when none does.
fn body(args: &RotateCaArgs) -> Value {
    let both = !args.os && !args.kubernetes;
    let mut authorities = Vec::new();
    if args.os || both {
        authorities.push("os");
    }
    if args.kubernetes || both {
        authorities.push("kubernetes");
    }
    json!({ "authorities": authorities })
}

/// One line on what the server answered.
fn summary(tenant: &str, reply: &Value) -> String {
    let authorities: Vec<&str> = reply["authorities"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!(
        "tenant/{tenant} CA rotation begun ({}): phase {} since {}\n",
        authorities.join(", "),
        reply["phase"].as_str().unwrap_or("?"),
        reply["since"].as_str().unwrap_or("?")
    )
}

pub(crate) fn rotate_ca(client: &Client, args: &RotateCaArgs, format: Output) -> Result<()> {
    let path = path(&args.tenant)?;
    let reply: Value = client
        .write(Method::POST, &path, &body(args))
        .with_context(|| format!("rotating the CAs of tenant/{}", args.tenant))?;
    match format {
        Output::Json | Output::Yaml => out(&encode(&reply, format)?),
        _ => out(&summary(&args.tenant, &reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(os: bool, kubernetes: bool) -> RotateCaArgs {
        RotateCaArgs { tenant: "acme".into(), os, kubernetes }
    }

    #[test]
    fn the_flags_name_the_authorities_and_neither_names_both() {
        assert_eq!(body(&args(false, false)), json!({"authorities": ["os", "kubernetes"]}));
        assert_eq!(body(&args(true, true)), json!({"authorities": ["os", "kubernetes"]}));
        assert_eq!(body(&args(true, false)), json!({"authorities": ["os"]}));
        assert_eq!(body(&args(false, true)), json!({"authorities": ["kubernetes"]}));
    }

    #[test]
    fn the_path_names_a_tenant_and_nothing_else() {
        assert_eq!(path("acme").unwrap(), "/api/v1/tenants/acme/rotate-ca");
        for hostile in ["../users", "a/b", "", "acme?x=1", "ACME"] {
            assert!(path(hostile).is_err(), "{hostile}");
        }
    }

    #[test]
    fn the_summary_shows_the_phase_the_server_answered() {
        let reply = json!({"authorities": ["os"], "phase": "generated", "since": "2026-01-01T00:00:00Z"});
        assert_eq!(
            summary("acme", &reply),
            "tenant/acme CA rotation begun (os): phase generated since 2026-01-01T00:00:00Z\n"
        );
    }
}
