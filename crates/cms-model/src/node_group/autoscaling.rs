//! A node group's autoscaling limits and the machines a named scale-down
//! left out of it.
//!
//! A group's machines are the first `count` indexes `i` (0, 1, ...) whose
//! id `<group>-<i>` is not in `removedMachines`: a plain scale-down drops
//! the highest, a named one lowers `count` and lists the ids it removes.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{NodeGroupSpec, Role};
use crate::validate::FieldError;

/// The most entries `removedMachines` may hold.
pub const MAX_REMOVED_MACHINES: usize = 1000;

/// Limits the cluster autoscaler keeps a node group within.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Autoscaling {
    /// The fewest machines the autoscaler shrinks the group to, at least 1.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub min_count: u32,
    /// The most machines the autoscaler grows the group to, at least `count`.
    pub max_count: u32,
    /// What an hour of one machine of the group costs, in the operator's
    /// currency: the autoscaler's `price` expander compares groups by it.
    /// Unset, the group is not priced.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000000, example = 0.12))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
}

/// The highest `pricePerHour`.
pub(crate) const MAX_PRICE_PER_HOUR: f64 = 1_000_000.0;

/// The machine id of index `index` in `group`: `<group>-<index>`.
pub fn machine_id(group: &str, index: u32) -> String {
    format!("{group}-{index}")
}

/// The index of machine `id` of `group`: `id` is `<group>-<index>`, the
/// index decimal without leading zeros. `None` for any other id.
/// The index of machine `id` of group `group`: `<group>-<index>`, the
/// index in decimal without leading zeros.
pub fn machine_index(group: &str, id: &str) -> Option<u32> {
    let digits = id.strip_prefix(group)?.strip_prefix('-')?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical {
        return None;
    }
    digits.parse().ok()
}

/// The highest index of a group of `count` machines whose removed indexes
/// are `removed` (ascending), as u64 so that it cannot overflow.
fn highest_index(count: u32, removed: &[u32]) -> u64 {
    let mut highest = u64::from(count) - 1;
    for &index in removed {
        if u64::from(index) > highest {
            break;
        }
        highest += 1;
    }
    highest
}

impl NodeGroupSpec {
    /// The indexes of the group's machines: the first `count` indexes whose
    /// id is not in `removed_machines`, ascending.
    pub fn indexes(&self) -> Vec<u32> {
        let removed: BTreeSet<u32> =
            self.removed_machines.iter().filter_map(|id| machine_index(&self.name, id)).collect();
        (0..=u32::MAX).filter(|index| !removed.contains(index)).take(self.count as usize).collect()
    }

    /// The ids of the group's machines, `<name>-<index>` for each of
    /// [`NodeGroupSpec::indexes`].
    pub fn machine_ids(&self) -> Vec<String> {
        self.indexes().into_iter().map(|index| machine_id(&self.name, index)).collect()
    }

    /// Checks `removedMachines` (at `path`, the group's) and sorts it by
    /// index. An entry stays while its writer keeps it, even past the
    /// highest index in use: its machine may still be leaving, and its id
    /// must not come back meanwhile. Returns
    /// the number of metal hosts the group's machines take: its highest
    /// index + 1. `count` must be at least 1.
    pub(super) fn normalize_removed(&mut self, path: &str) -> Result<u64, FieldError> {
        let field = format!("{path}.removedMachines");
        if self.removed_machines.len() > MAX_REMOVED_MACHINES {
            let message = format!(
                "lists {} machines, over the limit of {MAX_REMOVED_MACHINES}",
                self.removed_machines.len()
            );
            return Err(FieldError::new(field, message));
        }
        let mut removed = Vec::with_capacity(self.removed_machines.len());
        for (position, id) in self.removed_machines.iter().enumerate() {
            let index = machine_index(&self.name, id).ok_or_else(|| {
                let message = format!(
                    "must be a machine id of this group: {:?} followed by a decimal index without \
                     leading zeros",
                    format!("{}-", self.name)
                );
                FieldError::new(format!("{field}[{position}]"), message)
            })?;
            removed.push(index);
        }
        removed.sort_unstable();
        if let Some(pair) = removed.windows(2).find(|pair| pair[0] == pair[1]) {
            let message = format!("lists {:?} twice", machine_id(&self.name, pair[0]));
            return Err(FieldError::new(field, message));
        }
        let highest = highest_index(self.count, &removed);
        if highest > u64::from(u32::MAX) {
            let message = "with the removed machines, the group's indexes would pass the largest index";
            return Err(FieldError::new(format!("{path}.count"), message));
        }
        self.removed_machines = removed.into_iter().map(|index| machine_id(&self.name, index)).collect();
        Ok(highest + 1)
    }

    /// Checks `autoscaling`: `1 <= minCount <= count <= maxCount`, never
    /// on a control-plane group.
    pub(super) fn check_autoscaling(&self, path: &str) -> Result<(), FieldError> {
        let Some(limits) = self.autoscaling else { return Ok(()) };
        let field = format!("{path}.autoscaling");
        if self.role == Role::ControlPlane {
            return Err(FieldError::new(field, "control-plane groups are never autoscaled"));
        }
        if limits.min_count < 1 {
            return Err(FieldError::new(format!("{field}.minCount"), "must be at least 1"));
        }
        if limits.min_count > self.count {
            let message = format!("is {}, over the group's count of {}", limits.min_count, self.count);
            return Err(FieldError::new(format!("{field}.minCount"), message));
        }
        if limits.max_count < self.count {
            let message = format!("is {}, under the group's count of {}", limits.max_count, self.count);
            return Err(FieldError::new(format!("{field}.maxCount"), message));
        }
        if let Some(price) = limits.price_per_hour
            && !(price.is_finite() && (0.0..=MAX_PRICE_PER_HOUR).contains(&price))
        {
            let message = format!("must be a number from 0 to {MAX_PRICE_PER_HOUR}");
            return Err(FieldError::new(format!("{field}.pricePerHour"), message));
        }
        Ok(())
    }

    /// Checks that a metal group's autoscaler cannot grow it past its
    /// `hosts` listed hosts.
    pub(super) fn check_autoscaling_hosts(&self, path: &str, hosts: usize) -> Result<(), FieldError> {
        match self.autoscaling {
            Some(limits) if limits.max_count as usize > hosts => {
                let message = format!(
                    "is {}, over the {hosts} hosts of providerConfig.hosts: the autoscaler cannot grow \
                     a metal group past its hosts",
                    limits.max_count
                );
                Err(FieldError::new(format!("{path}.autoscaling.maxCount"), message))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
