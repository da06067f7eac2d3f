//! One module per provider: each turns a [`crate::MachinePlan`] into the
//! resource that stands for the machine, and adds the provider's setup to a
//! [`Setup`]: its provider blocks, and for the clouds the network the
//! service makes around the machines (`oci_network.rs`,
//! `openstack_network.rs`, with the ports of `ports.rs`). Every block is a
//! [`crate::template::Block`]: user strings go in its plain part, which
//! rendering escapes; the service's own expressions are set apart
//! (`template.rs`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::template::Block;

pub(crate) mod metal;
pub(crate) mod oci;
pub(crate) mod oci_network;
pub(crate) mod openstack;
pub(crate) mod openstack_network;
pub(crate) mod ports;

/// What the providers add beside their instances.
#[derive(Debug, Default)]
pub(crate) struct Setup {
    /// Provider blocks by provider name, then by alias (`""` for the
    /// default one).
    pub(crate) providers: BTreeMap<&'static str, BTreeMap<String, Block>>,
    /// `required_providers`: fixed names and sources only.
    pub(crate) required: Map<String, Value>,
    /// Variable declarations: fixed names and types only.
    pub(crate) variables: Map<String, Value>,
    /// Local values by name: user strings that expressions compare with.
    pub(crate) locals: Map<String, Value>,
    /// Data sources by type, then by name.
    pub(crate) data: BTreeMap<&'static str, BTreeMap<String, Block>>,
    /// Resources beside the instances, by type, then by name.
    pub(crate) resources: BTreeMap<&'static str, BTreeMap<String, Block>>,
}

impl Setup {
    /// Adds resource `name` of type `kind`.
    pub(crate) fn resource(&mut self, kind: &'static str, name: impl Into<String>, block: Block) {
        self.resources.entry(kind).or_default().insert(name.into(), block);
    }

    /// Adds data source `name` of type `kind`, unless it is there.
    pub(crate) fn data_source(&mut self, kind: &'static str, name: impl Into<String>, block: Block) {
        self.data.entry(kind).or_default().entry(name.into()).or_insert(block);
    }
}
