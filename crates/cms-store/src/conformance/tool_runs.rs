//! The provisioning tool's last runs: one per command and tenant, bounded,
//! and gone with their tenant.

use chrono::{TimeZone, Utc};
use cms_model::{TOOL_OUTPUT_LIMIT, ToolCommand, ToolRun};

use super::{open, tenant_draft};
use crate::api::{Key, Store};
use crate::error::StoreError;
use crate::{FINALIZER_MACHINES, FINALIZER_SECRETS};

fn run(command: ToolCommand, output: &str, succeeded: bool) -> ToolRun {
    ToolRun {
        command,
        succeeded,
        status: if succeeded { "exit code 0".into() } else { "exit code 1".into() },
        finished_at: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        output: output.into(),
        truncated: false,
    }
}

pub async fn tool_runs_are_the_last_of_each_command(url: &str) {
    let store = open(url).await;
    let missing = store.set_tool_run("a".into(), run(ToolCommand::Apply, "x", true)).await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))), "{missing:?}");
    store.create(Key::tenant("a"), tenant_draft("1.31.0", None)).await.expect("a");
    store.create(Key::tenant("b"), tenant_draft("1.31.0", None)).await.expect("b");
    assert_eq!(store.tool_runs("a".into()).await.expect("read"), Vec::new());
    store.set_tool_run("a".into(), run(ToolCommand::Destroy, "gone", false)).await.expect("destroy");
    store.set_tool_run("a".into(), run(ToolCommand::Apply, "first", false)).await.expect("apply");
    store.set_tool_run("a".into(), run(ToolCommand::Apply, "second", true)).await.expect("apply again");
    store.set_tool_run("b".into(), run(ToolCommand::Plan, "b's", true)).await.expect("b's plan");
    let runs = store.tool_runs("a".into()).await.expect("read");
    assert_eq!(runs, vec![run(ToolCommand::Apply, "second", true), run(ToolCommand::Destroy, "gone", false)]);

    let long = format!("{}end", "x".repeat(TOOL_OUTPUT_LIMIT));
    store.set_tool_run("b".into(), run(ToolCommand::Plan, &long, true)).await.expect("long");
    let [kept] = store.tool_runs("b".into()).await.expect("read").try_into().expect("one run");
    assert!(kept.truncated && kept.output.len() <= TOOL_OUTPUT_LIMIT && kept.output.ends_with("end"));

    let again = open(url).await;
    assert_eq!(again.tool_runs("a".into()).await.expect("reopened").len(), 2, "kept in the database");
    store.delete(Key::tenant("a")).await.expect("delete");
    for finalizer in [FINALIZER_MACHINES, FINALIZER_SECRETS] {
        store.remove_finalizer(Key::tenant("a"), finalizer.into()).await.expect("finalizer");
    }
    assert_eq!(store.tool_runs("a".into()).await.expect("read"), Vec::new(), "gone with the tenant");
    assert_eq!(store.tool_runs("b".into()).await.expect("read").len(), 1);
}
