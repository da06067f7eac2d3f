//! One module per provider: each turns a [`crate::MachinePlan`] into the
//! resource that stands for the machine, and adds the provider's setup.

pub(crate) mod metal;
pub(crate) mod oci;
pub(crate) mod openstack;
