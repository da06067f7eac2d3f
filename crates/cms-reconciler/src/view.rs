//! The tenant's machines as one pass sees them: read from the store once
//! at the start of the pass and handed to each phase, which puts back every
//! machine it writes (as the store answered the write), so that a later
//! phase writes over the current resource version without reading again.

use std::collections::BTreeMap;
use std::ops::Deref;

use cms_model::{Kind, Machine};
use cms_store::Store;

use crate::ReconcileError;

/// The machines of one tenant, by id.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    machines: BTreeMap<String, Machine>,
}

impl View {
    /// The machines of `tenant` in the store.
    pub(crate) fn read(store: &dyn Store, tenant: &str) -> Result<View, ReconcileError> {
        let mut machines = BTreeMap::new();
        for object in store.all(Kind::Machine, Some(tenant.to_string())) {
            let machine: Machine = object
                .parse()
                .map_err(|source| ReconcileError::Corrupt { what: object.key.to_string(), source })?;
            machines.insert(object.key.name.clone(), machine);
        }
        Ok(View { machines })
    }

    /// Puts back a machine as it was written.
    pub(crate) fn put(&mut self, machine: Machine) {
        self.machines.insert(machine.metadata.name.clone(), machine);
    }

    /// Puts back what a write gave, if it wrote.
    pub(crate) fn put_written(&mut self, written: Option<Machine>) {
        if let Some(machine) = written {
            self.put(machine);
        }
    }

    /// Drops a machine that is gone from the store.
    pub(crate) fn remove(&mut self, id: &str) {
        self.machines.remove(id);
    }

    /// The machines that are neither deleted nor on their way out.
    pub(crate) fn live(&self) -> impl Iterator<Item = &Machine> {
        self.machines
            .values()
            .filter(|machine| machine.metadata.deletion_timestamp.is_none())
            .filter(|machine| !crate::leaving::is_leaving(machine))
    }
}

impl Deref for View {
    type Target = BTreeMap<String, Machine>;

    fn deref(&self) -> &Self::Target {
        &self.machines
    }
}
