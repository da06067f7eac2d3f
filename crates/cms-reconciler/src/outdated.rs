//! Instances made with another image, shape or placement than their node
//! group now asks for. The tool keeps them as they were made
//! (`ignore_changes`), so that such a change never replaces a group's
//! instances at once; new machines get the new image, shape and placement,
//! and an existing one changes when it is replaced: an operator's
//! `DELETE .../machines/{id}`, one machine at a time. The tenant's
//! [`INSTANCES_CURRENT`] condition names the machines that wait for it.

use cms_store::Store;

use crate::ReconcileError;
use crate::status;

/// The condition of the instances: `False` names those made with another
/// image, shape or placement than their node group asks for.
pub const INSTANCES_CURRENT: &str = "InstancesCurrent";

/// Writes [`INSTANCES_CURRENT`] from `outdated` (machine id and what
/// differs): `False` with the list, or `True` once a tenant that had the
/// condition has none.
pub(crate) async fn record(
    store: &dyn Store,
    tenant: &str,
    outdated: &[(String, String)],
) -> Result<(), ReconcileError> {
    let message = message(tenant, outdated);
    status::update(store, tenant, |status| {
        let had = status.conditions.iter().any(|condition| condition.kind == INSTANCES_CURRENT);
        match &message {
            Some(message) => status.set_condition(INSTANCES_CURRENT, false, "Outdated", message),
            None if had => status.set_condition(
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
fn message(tenant: &str, outdated: &[(String, String)]) -> Option<String> {
    if outdated.is_empty() {
        return None;
    }
    let machines: Vec<String> = outdated.iter().map(|(id, what)| format!("{id} ({what})")).collect();
    Some(format!(
        "{} made with another image, shape or placement than the node group asks for: {}; \
         replace them one at a time with DELETE /api/v1/tenants/{tenant}/machines/<id>",
        if outdated.len() == 1 { "1 instance was" } else { "instances were" },
        machines.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_machine_and_what_differs() {
        assert_eq!(message("acme", &[]), None);
        let text = message("acme", &[("cp-0".into(), "image".into()), ("w-1".into(), "shape, size".into())])
            .unwrap();
        assert!(text.starts_with("instances were made"), "{text}");
        assert!(text.contains("cp-0 (image), w-1 (shape, size)"), "{text}");
        assert!(text.contains("DELETE /api/v1/tenants/acme/machines/<id>"), "{text}");
    }
}
