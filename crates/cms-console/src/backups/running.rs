//! The backups and restores started from this console that are still
//! running, at most one per tenant. The backups page shows them in
//! progress; a form posted for a tenant that has one running is refused at
//! once, so however often it is posted, a tenant has at most one task of
//! the console's. (`cms_backup::Backups` refuses a second backup or restore
//! of a tenant too, whoever started the first; this bound is the console's
//! own, on the tasks it spawns.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};

/// What runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Work {
    /// A backup being taken.
    Take,
    /// The backup of this id being restored.
    Restore(String),
}

/// One operation started from the console, by whom and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operation {
    pub(crate) work: Work,
    pub(crate) user: String,
    pub(crate) since: DateTime<Utc>,
}

/// The operations running, by tenant. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Running {
    operations: Arc<Mutex<HashMap<String, Operation>>>,
}

impl Running {
    /// The operation running for `tenant`, if any.
    pub(crate) fn get(&self, tenant: &str) -> Option<Operation> {
        self.lock().get(tenant).cloned()
    }

    /// Marks `work` running for `tenant` until the guard drops; gives the
    /// operation already running instead, when there is one.
    pub(crate) fn start(&self, tenant: &str, work: Work, user: &str) -> Result<Guard, Operation> {
        let mut operations = self.lock();
        if let Some(running) = operations.get(tenant) {
            return Err(running.clone());
        }
        let operation = Operation { work, user: user.to_string(), since: Utc::now() };
        operations.insert(tenant.to_string(), operation);
        Ok(Guard { running: self.clone(), tenant: tenant.to_string() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Operation>> {
        self.operations.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An operation marked running, until dropped.
#[derive(Debug)]
pub(crate) struct Guard {
    running: Running,
    tenant: String,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.running.lock().remove(&self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_operation_per_tenant_until_it_ends() {
        let running = Running::default();
        let guard = running.start("acme", Work::Take, "admin").expect("the first starts");
        let refused = running.start("acme", Work::Restore("b".into()), "other").expect_err("a second waits");
        assert_eq!((refused.work, refused.user.as_str()), (Work::Take, "admin"));
        let other =
            running.start("beta", Work::Restore("b".into()), "admin").expect("another tenant's starts");
        assert_eq!(running.get("beta").map(|operation| operation.work), Some(Work::Restore("b".into())));
        drop(guard);
        assert_eq!(running.get("acme"), None);
        assert!(running.start("acme", Work::Take, "admin").is_ok());
        drop(other);
        assert_eq!(running.get("beta"), None);
    }
}
