//! What the live updates show a caller whose grants give it some tenants:
//! its tenants only. A tenant it stops seeing (its labels moved out of the
//! caller's grants) is sent as `DELETED`, one it starts seeing as `ADDED`;
//! a machine's change is sent only for a tenant it sees. The grants are the
//! caller's when the stream opened; the stream ends with its session.

use std::collections::HashSet;

use cms_auth::{Caller, Permission};
use cms_model::Kind;
use cms_store::{EventType, Object, Store};

/// The tenants a stream has shown its caller, who does not see them all.
pub(super) struct Visible {
    caller: Caller,
    shown: HashSet<String>,
}

impl Visible {
    /// The memory of a stream for `caller`, starting from the tenants it
    /// sees now; `None` when it sees every tenant.
    pub(super) fn new(store: &dyn Store, caller: &Caller) -> Option<Visible> {
        let tenants = store.all(Kind::Tenant, None);
        let shown = caller.tenants_holding(Permission::Read, tenants.iter().map(|tenant| tenant.as_ref()))?;
        Some(Visible { caller: caller.clone(), shown })
    }

    /// The type to send for `event_type` of `tenant`, if anything.
    pub(super) fn tenant(&mut self, event_type: EventType, tenant: &Object) -> Option<&'static str> {
        let name = &tenant.key.name;
        let was = self.shown.contains(name);
        let now = event_type != EventType::Deleted && self.caller.holds_on(Permission::Read, tenant);
        match (was, now) {
            (true, true) => Some(event_type.as_str()),
            (false, true) => {
                self.shown.insert(name.clone());
                Some(EventType::Added.as_str())
            }
            (true, false) => {
                self.shown.remove(name);
                Some(EventType::Deleted.as_str())
            }
            (false, false) => None,
        }
    }

    /// Whether a change of a machine of tenant `tenant` is shown.
    pub(super) fn machine(&self, tenant: &str) -> bool {
        self.shown.contains(tenant)
    }
}
