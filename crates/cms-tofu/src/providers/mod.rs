//! One module per provider: each turns a [`crate::MachinePlan`] into the
//! resource that stands for the machine, and adds the provider's setup to a
//! [`Setup`]. Every block is a [`crate::template::Block`]: user strings go
//! in its plain part, which rendering escapes; the service's own
//! expressions are set apart (`template.rs`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::template::Block;

pub(crate) mod metal;
pub(crate) mod oci;
pub(crate) mod openstack;

/// What the providers add beside their instances.
#[derive(Debug, Default)]
pub(crate) struct Setup {
    /// Provider blocks by provider name.
    pub(crate) providers: BTreeMap<&'static str, Block>,
    /// `required_providers`: fixed names and sources only.
    pub(crate) required: Map<String, Value>,
    /// Variable declarations: fixed names and types only.
    pub(crate) variables: Map<String, Value>,
    /// Data sources by type, then by name.
    pub(crate) data: BTreeMap<&'static str, BTreeMap<String, Block>>,
}
