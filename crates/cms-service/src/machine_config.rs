//! `GET /api/v1/tenants/{tenant}/machines/{id}/config`: the machine's
//! complete Talos config, rendered for its node group's role and Talos
//! version from the tenant's secrets bundle, with the tenant's config patch
//! refs and then the group's applied in order (decisions §4).
//!
//! A machine whose group is gone, a ref to a missing patch, or a patch that
//! does not apply is a conflict with the stored state (409, naming it); a
//! tenant with no control-plane endpoint yet is 503.

use std::collections::BTreeMap;

use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{ConfigPatch, ConfigPatchSpec, Kind, Machine, Tenant};
use cms_store::Key;
use cms_talos::RenderInput;

use crate::auth::caller;
use crate::control_plane::{self, list_all, machine_role};
use crate::error::ApiError;
use crate::lookup::find;
use crate::reply::yaml_download;
use crate::state::AppState;

/// `GET /tenants/{tenant}/machines/{id}/config`.
pub(crate) async fn get(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let (tenant_name, id) = path.into_inner();
    let store = state.store.as_ref();
    let machine: Machine = find(store, &Key::child(Kind::Machine, &tenant_name, &id))?
        .parse()
        .map_err(|e| ApiError::internal(&e))?;
    let tenant: Tenant =
        find(store, &Key::tenant(&tenant_name))?.parse().map_err(|e| ApiError::internal(&e))?;
    let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
    let group = match &machine.spec.node_group {
        Some(name) => Some(groups.iter().find(|group| group.name == *name).ok_or_else(|| {
            ApiError::Conflict(format!("machine {id:?} belongs to node group {name:?}, which does not exist"))
        })?),
        None => None,
    };
    let role = machine_role(&machine, groups).ok_or_else(|| {
        ApiError::Conflict(format!("machine {id:?} names no node group and reports no role"))
    })?;
    let yaml = render(store, &state.secrets, &tenant, group, role).await?;
    tracing::info!(
        user = %caller.user,
        role = caller.role.as_str(),
        tenant = %tenant_name,
        machine = %id,
        machine_role = role.as_str(),
        "read a machine config"
    );
    Ok(yaml_download(yaml, &format!("{tenant_name}-{id}.yaml")))
}

/// The complete config of a machine of `role` in `group` of `tenant`: the
/// generated base, then the tenant's and the group's config patches.
pub(crate) async fn render(
    store: &dyn cms_store::Store,
    secrets: &crate::Secrets,
    tenant: &Tenant,
    group: Option<&cms_model::NodeGroupSpec>,
    role: cms_model::Role,
) -> Result<String, ApiError> {
    let tenant_name = tenant.metadata.name.clone();
    let addresses = control_plane::addresses(store, tenant)?;
    control_plane::endpoint(tenant, &addresses)?;

    let available: BTreeMap<String, ConfigPatchSpec> = list_all(store, Kind::ConfigPatch, &tenant_name)
        .iter()
        .map(|object| Ok((object.key.name.clone(), object.parse::<ConfigPatch>()?.spec)))
        .collect::<Result<_, serde_json::Error>>()
        .map_err(|err| ApiError::internal(&err))?;
    let group_refs = group.map(|group| group.config_patches.as_slice()).unwrap_or_default();
    let resolution = cms_talos::resolve_patches(&tenant.spec.config_patches, group_refs, &available);
    if !resolution.missing.is_empty() {
        return Err(ApiError::Conflict(format!(
            "the config of a {} machine refers to config patches that do not exist: {}",
            role.as_str(),
            resolution.missing.iter().map(|name| format!("{name:?}")).collect::<Vec<_>>().join(", ")
        )));
    }

    let bundle = secrets.open(store, &tenant_name).await?;
    let talos_version = group
        .and_then(|group| group.talos_version.clone())
        .or_else(|| tenant.spec.talos_version.clone())
        .unwrap_or_else(|| bundle.talos_version().to_string());
    let input = RenderInput {
        cluster_name: tenant_name.clone(),
        role,
        talos_version,
        kubernetes_version: tenant.spec.kubernetes_version.clone(),
        control_plane_endpoint: tenant.spec.control_plane_endpoint.clone(),
        control_plane_addresses: addresses,
        pod_networks: tenant.spec.pod_network.clone(),
        service_networks: tenant.spec.service_network.clone(),
        cert_sans: Vec::new(),
        install_image: None,
        bundle: &bundle,
        patches: resolution.patches,
    };
    Ok(cms_talos::render(&input)?)
}
