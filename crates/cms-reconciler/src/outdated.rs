//! Instances made with another image, shape or placement than their node
//! group now asks for. The tool keeps them as they were made
//! (`ignore_changes`), so that such a change never replaces a group's
//! instances at once; new machines get the new image, shape and placement,
//! and existing ones are replaced one at a time (`replacement.rs`). The
//! tenant's [`INSTANCES_CURRENT`] condition names the machines that wait
//! for it, and [`OUTDATED_ANNOTATION`] keeps them for the passes that do
//! not run the tool.

use cms_model::Tenant;

use crate::blocker::listed;
use crate::rollout::set_annotation;
use crate::status;
use crate::{Context, ReconcileError};

/// The tenant annotation naming the outdated machines and what differs,
/// `<id>:<what>` separated by spaces (`what` without spaces).
pub const OUTDATED_ANNOTATION: &str = "service.io/outdated-instances";

/// The outdated machines of [`OUTDATED_ANNOTATION`], with what differs.
pub(crate) fn outdated_machines(tenant: &Tenant) -> Vec<(String, String)> {
    let list = tenant.metadata.annotations.get(OUTDATED_ANNOTATION);
    list.into_iter()
        .flat_map(|list| list.split_whitespace())
        .map(|entry| {
            let (id, what) = entry.split_once(':').unwrap_or((entry, ""));
            (id.to_string(), what.replace(',', ", "))
        })
        .collect()
}

/// The condition of the instances: `False` names those made with another
/// image, shape or placement than their node group asks for.
pub const INSTANCES_CURRENT: &str = "InstancesCurrent";

/// Writes [`INSTANCES_CURRENT`] from `outdated` (machine id and what
/// differs): `False` with the list, or `True` once a tenant that had the
/// condition has none.
pub(crate) async fn record(
    ctx: &Context,
    tenant: &str,
    outdated: &[(String, String)],
) -> Result<(), ReconcileError> {
    let entries: Vec<String> =
        outdated.iter().map(|(id, what)| format!("{id}:{}", what.replace(' ', ""))).collect();
    let value = (!entries.is_empty()).then(|| entries.join(" "));
    set_annotation(ctx, tenant, OUTDATED_ANNOTATION, value).await?;
    let message = message(outdated);
    status::update(ctx.store.as_ref(), tenant, |status| {
        let had = status.conditions.iter().any(|condition| condition.kind == INSTANCES_CURRENT);
        match &message {
            Some(message) => status::set_condition(status, INSTANCES_CURRENT, false, "Outdated", message),
            None if had => status::set_condition(
                status,
                INSTANCES_CURRENT,
                true,
                "Current",
                "every instance has its node group's image, shape and placement",
            ),
            None => {}
        }
    })
    .await
}

/// What the condition says of `outdated`, or `None` when it is empty.
fn message(outdated: &[(String, String)]) -> Option<String> {
    if outdated.is_empty() {
        return None;
    }
    let machines: Vec<String> = outdated.iter().map(|(id, what)| format!("{id} ({what})")).collect();
    Some(format!(
        "{} made with another image, shape or placement than the node group asks for, \
         replaced one at a time: {}",
        if outdated.len() == 1 { "1 instance was" } else { "instances were" },
        listed(&machines)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_machine_and_what_differs() {
        assert_eq!(message(&[]), None);
        let text = message(&[("cp-0".into(), "image".into()), ("w-1".into(), "shape, size".into())]).unwrap();
        assert!(text.starts_with("instances were made"), "{text}");
        assert!(text.contains("cp-0 (image), w-1 (shape, size)"), "{text}");
        assert!(text.contains("replaced one at a time"), "{text}");
    }
}
