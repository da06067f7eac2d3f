//! `cms version`: this client's version and the server's `/version`.

use anyhow::Result;
use serde_json::{Value, json};

use crate::cli::Output;
use crate::client::Client;
use crate::output::{encode, out};

fn client_version() -> Value {
    json!({"version": env!("CARGO_PKG_VERSION")})
}

/// Only the client's version, without asking the server.
pub(crate) fn client_only(format: Output) -> Result<()> {
    match format {
        Output::Json | Output::Yaml => out(&encode(&json!({"client": client_version()}), format)?),
        _ => out(&format!("Client: cms {}\n", env!("CARGO_PKG_VERSION"))),
    }
}

/// The client's version, then the server's; an unreachable server is an error.
pub(crate) fn both(client: &Client, format: Output) -> Result<()> {
    if matches!(format, Output::Table | Output::Name) {
        client_only(format)?;
    }
    let server: Value = client.get("/version")?;
    match format {
        Output::Json | Output::Yaml => {
            out(&encode(&json!({"client": client_version(), "server": server}), format)?)
        }
        _ => {
            let field =
                |name: &str| server.get(name).and_then(Value::as_str).unwrap_or("unknown").to_string();
            out(&format!(
                "Server: {} {} (commit {}, built {})\n",
                client.server(),
                field("version"),
                field("gitCommit"),
                field("buildTime")
            ))
        }
    }
}
