//! `cms edit KIND NAME`: the object as YAML in `$VISUAL` or `$EDITOR`, saved
//! back with the `resourceVersion` it was read at.
//!
//! When the object changed on the server meanwhile (409), the edit is
//! replayed as a JSON patch onto the current version, which opens again in
//! the editor with a note saying so; the user checks it and saves again.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, anyhow, bail};
use reqwest::Method;
use serde_json::Value;

use crate::cli::{Output, TargetArgs};
use crate::client::Client;
use crate::failure::{ApiError, usage};
use crate::kinds::ResourceKind;
use crate::output::{encode, out};

/// How many conflicts in a row are replayed before giving up.
const ATTEMPTS: usize = 3;

const HEADER: &str = "\
# Edit the object below, then save and close the editor to apply it.
# Leave it unchanged to cancel. Only metadata.labels, metadata.annotations
# and spec are applied; the server sets the rest.
";

/// `cms edit`.
pub(crate) fn edit(client: &Client, args: &TargetArgs, format: Output) -> Result<()> {
    if matches!(args.kind, ResourceKind::Machines | ResourceKind::Projected) {
        return Err(usage(format!(
            "{}s are written by the provisioning pipeline, not edited",
            args.kind.singular()
        )));
    }
    let path = args.kind.item(args.tenant.as_deref(), &args.name)?;
    let id = format!("{}/{}", args.kind.singular(), args.name);
    let file = tempfile::Builder::new()
        .prefix(&format!("cms-edit-{}-", args.name))
        .suffix(".yaml")
        .tempfile()
        .context("creating a temporary file")?;
    let mut original: Value = client.get(&path)?;
    let mut shown = original.clone();
    let mut note = String::new();
    for _ in 0..ATTEMPTS {
        std::fs::write(file.path(), format!("{HEADER}{note}{}", encode(&shown, Output::Yaml)?))?;
        run_editor(file.path())?;
        let text = std::fs::read_to_string(file.path())?;
        let edited: Value = serde_saphyr::from_str(&text)
            .with_context(|| format!("reading the edited {id}; nothing was saved"))?;
        if edited == original {
            eprintln!("Edit cancelled, no changes made.");
            return Ok(());
        }
        match client.write::<_, Value>(Method::PUT, &path, &edited) {
            Ok(saved) => {
                return match format {
                    Output::Json | Output::Yaml => out(&encode(&saved, format)?),
                    _ => out(&format!("{id} edited\n")),
                };
            }
            Err(err) if is_conflict(&err) => {
                let current: Value = client.get(&path)?;
                eprintln!(
                    "{id} changed on the server while you were editing it (resourceVersion {} is now {}); \
                     your changes were reapplied to the current version: check them and save again",
                    original["metadata"]["resourceVersion"], current["metadata"]["resourceVersion"]
                );
                let changes = json_patch::diff(&original, &edited);
                let mut merged = current.clone();
                note = match json_patch::patch(&mut merged, &changes) {
                    Ok(()) => {
                        format!("# CONFLICT: {id} changed on the server; your changes are reapplied below.\n")
                    }
                    Err(err) => {
                        merged = current.clone();
                        format!(
                            "# CONFLICT: {id} changed on the server and your changes no longer apply ({err});\n# this is the current version: edit it again.\n"
                        )
                    }
                };
                merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
                original = current;
                shown = merged;
            }
            Err(err) => {
                let (_, kept) = file.keep().context("keeping the edited file")?;
                return Err(err)
                    .with_context(|| format!("saving {id}; your edit is kept in {}", kept.display()));
            }
        }
    }
    bail!("{id} kept changing on the server; gave up after {ATTEMPTS} conflicts")
}

fn is_conflict(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.downcast_ref::<ApiError>().is_some_and(|api| api.status == 409))
}

/// Runs the user's editor on `file` through `sh`, so that `EDITOR="code -w"`
/// works as it does for git.
fn run_editor(file: &Path) -> Result<()> {
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|value| !value.trim().is_empty()))
        .unwrap_or_else(|| "vi".to_string());
    #[allow(clippy::disallowed_methods, reason = "cms edit runs the user's editor, as kubectl and git do")]
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file)
        .status()
        .with_context(|| format!("starting the editor {editor:?}"))?;
    if !status.success() {
        return Err(anyhow!("the editor {editor:?} failed ({status}); nothing was saved"));
    }
    Ok(())
}
