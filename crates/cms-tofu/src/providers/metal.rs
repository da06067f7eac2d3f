//! `metal`: existing hosts, recorded with the built-in `terraform_data`
//! resource only, so that a run needs no provider download. A host boots
//! no user data: the reconciler hands it its config over the node API, so
//! neither the configuration nor the state (which keeps `input` in the
//! clear) holds any machine config, nor a hash of one.

use serde_json::json;

use crate::template::Block;
use crate::{MachinePlan, TofuError};

/// The `terraform_data` resource of one host: plain values only.
pub(crate) fn instance(machine: &MachinePlan) -> Result<Block, TofuError> {
    let host = machine
        .host
        .as_ref()
        .ok_or_else(|| TofuError::Invalid(format!("machine {} has no metal host", machine.id)))?;
    let provider_id = host.provider_id.clone().unwrap_or_else(|| format!("metal://{}", host.address));
    Ok(Block::plain(json!({
        "input": {
            "address": host.address,
            "providerId": provider_id,
            "shape": machine.shape,
            "group": machine.group,
            "role": machine.role.as_str(),
        }
    })))
}
