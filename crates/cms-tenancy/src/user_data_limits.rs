//! The user-data limits of cloud instances, checked on write.
//!
//! A cloud instance boots with its node group's rendered config as user
//! data, base64-encoded, and each cloud caps its size
//! ([`cms_model::Provider::user_data_limit`]: 32,000 bytes on `oci`, 65,535
//! on `openstack`). A write (a tenant, a node group or a config patch) after
//! which a cloud group's config would be over its cloud's limit is refused
//! ([`TenancyError::Invalid`], 422), naming the group, the size, the limit
//! and the config patch after which it is over: the config is rendered with
//! the tenant-wide patches and then the group's applied one at a time, in
//! order, and the first after which it is over is named (or none, when the
//! config is over the limit with no patch at all).
//!
//! The size is an upper bound: when the tenant has no control-plane endpoint
//! yet, the config is rendered with the longest one it can get,
//! [`STAND_IN_ENDPOINT`]. Only the groups a write changes are rendered, and
//! a group that was over the limit before the write (stored before the rule)
//! may stay as large or shrink, so a write that makes things no worse goes
//! through. A config that does not render is left to the reconciler, which
//! reports it.

use std::collections::BTreeMap;

use cms_model::{ConfigPatch, ConfigPatchSpec, FieldError, Kind, NodeGroupSpec, ProviderClass, Tenant};
use cms_store::{Key, Store};
use cms_talos::{ResolvedPatch, SecretsBundle};

use crate::control_plane::set_endpoint;
use crate::error::TenancyError;
use crate::render::render_input;
use crate::secrets::Secrets;
use crate::tenancy::Tenancy;

/// The endpoint a config is measured with when the tenant has none yet:
/// the longest form the one the service makes can take.
pub const STAND_IN_ENDPOINT: &str = "https://[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:6443";

/// What a write changes of the sources of a tenant's machine configs.
#[derive(Debug, Clone, Copy)]
pub enum ConfigChange<'a> {
    /// A tenant created or replaced; its node groups stay as they are
    /// when it lists none.
    Tenant(&'a Tenant),
    /// A node group created or replaced.
    NodeGroup(&'a NodeGroupSpec),
    /// A config patch created or replaced.
    ConfigPatch(&'a ConfigPatch),
}

/// The bytes of the base64 of `len` bytes: the size of a config as user data.
pub fn user_data_size(len: usize) -> usize {
    len.div_ceil(3) * 4
}

/// What a tenant's machine configs are rendered from: the tenant, with its
/// node groups, and the config patches its refs name that exist.
#[derive(Debug, Clone)]
struct Sources {
    tenant: Tenant,
    patches: BTreeMap<String, ConfigPatchSpec>,
}

/// Where a patch applied to a group's config comes from: the index of its
/// ref in the tenant's refs or in the group's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Tenant(usize),
    Group(usize),
}

impl Sources {
    /// The sources as stored: `tenant` and the patches of the store that its
    /// refs and its groups' refs name.
    fn stored(store: &dyn Store, tenant: Tenant) -> Result<Sources, TenancyError> {
        let mut patches = BTreeMap::new();
        let groups = tenant.spec.node_groups.iter().flatten();
        let refs = tenant.spec.config_patches.iter().chain(groups.flat_map(|group| &group.config_patches));
        for reference in refs {
            if patches.contains_key(&reference.name) {
                continue;
            }
            let key = Key::child(Kind::ConfigPatch, &tenant.metadata.name, &reference.name);
            if let Some(object) = store.get(&key) {
                let patch: ConfigPatch = object.parse().map_err(TenancyError::corrupt(&key))?;
                patches.insert(reference.name.clone(), patch.spec);
            }
        }
        Ok(Sources { tenant, patches })
    }

    /// The sources after `change`: `self` as stored, with the change made
    /// and the patches its refs name read from the store.
    fn changed(&self, store: &dyn Store, change: ConfigChange<'_>) -> Result<Sources, TenancyError> {
        let mut tenant = self.tenant.clone();
        match change {
            ConfigChange::Tenant(written) => {
                let groups = written.spec.node_groups.clone().or_else(|| tenant.spec.node_groups.take());
                tenant = written.clone();
                tenant.spec.node_groups = groups;
            }
            ConfigChange::NodeGroup(written) => {
                let groups = tenant.spec.node_groups.get_or_insert_with(Vec::new);
                groups.retain(|group| group.name != written.name);
                groups.push(written.clone());
                groups.sort_by(|a, b| a.name.cmp(&b.name));
            }
            ConfigChange::ConfigPatch(_) => {}
        }
        let mut sources = Sources::stored(store, tenant)?;
        if let ConfigChange::ConfigPatch(written) = change {
            sources.patches.insert(written.metadata.name.clone(), written.spec.clone());
        }
        Ok(sources)
    }

    fn groups(&self) -> &[NodeGroupSpec] {
        self.tenant.spec.node_groups.as_deref().unwrap_or_default()
    }

    /// The patches that apply to `group`'s config, in order, with where
    /// each comes from; refs to patches that do not exist are left out.
    fn patches_of(&self, group: &NodeGroupSpec) -> Vec<(Origin, ResolvedPatch)> {
        let tenant = self.tenant.spec.config_patches.iter().enumerate().map(|(i, r)| (Origin::Tenant(i), r));
        let own = group.config_patches.iter().enumerate().map(|(i, r)| (Origin::Group(i), r));
        tenant
            .chain(own)
            .filter_map(|(origin, reference)| {
                let spec = self.patches.get(&reference.name)?.clone();
                Some((origin, ResolvedPatch { name: reference.name.clone(), spec }))
            })
            .collect()
    }

    /// The user-data size of `group`'s config with the first `count` of
    /// `patches`; `None` when it does not render.
    fn size(
        &self,
        bundle: &SecretsBundle,
        group: &NodeGroupSpec,
        patches: &[(Origin, ResolvedPatch)],
        count: usize,
    ) -> Option<usize> {
        let endpoint = set_endpoint(&self.tenant).unwrap_or_else(|| STAND_IN_ENDPOINT.to_string());
        let applied = patches[..count].iter().map(|(_, patch)| patch.clone()).collect();
        let input =
            render_input(&self.tenant, Some(group), group.role, Some(endpoint), Vec::new(), bundle, applied);
        cms_talos::render(&input).ok().map(|config| user_data_size(config.len()))
    }

    /// The user-data size of the config of the group named `name`, with
    /// all its patches, when it exists on a cloud and renders.
    fn size_of(&self, bundle: &SecretsBundle, name: &str) -> Option<usize> {
        let group = self.groups().iter().find(|group| group.name == name)?;
        limit(group)?;
        let patches = self.patches_of(group);
        self.size(bundle, group, &patches, patches.len())
    }
}

/// The user-data limit of `group`'s cloud; `None` off the clouds.
fn limit(group: &NodeGroupSpec) -> Option<usize> {
    group.provider_class.parse::<ProviderClass>().ok()?.provider.user_data_limit()
}

/// Whether `change` can change the config of `group` in `sources`.
fn changes(change: ConfigChange<'_>, sources: &Sources, group: &NodeGroupSpec) -> bool {
    match change {
        ConfigChange::Tenant(_) => true,
        ConfigChange::NodeGroup(written) => written.name == group.name,
        ConfigChange::ConfigPatch(patch) => {
            let name = &patch.metadata.name;
            let mut refs = sources.tenant.spec.config_patches.iter().chain(&group.config_patches);
            refs.any(|reference| &reference.name == name)
        }
    }
}

/// The number of patches after which a config is first over `limit`: 0
/// when it is over with none; `None` when it never is. `size_with(k)` is
/// the config's size with the first `k` of `count` patches applied, `None`
/// when that does not render.
fn first_over(
    count: usize,
    limit: usize,
    mut size_with: impl FnMut(usize) -> Option<usize>,
) -> Option<usize> {
    (0..=count).find(|&applied| size_with(applied).is_some_and(|size| size > limit))
}

/// Checks every cloud group whose config `change` changes in `after`;
/// `before` is the tenant as stored (none on a create).
fn check(
    bundle: &SecretsBundle,
    before: Option<&Sources>,
    after: &Sources,
    change: ConfigChange<'_>,
) -> Result<(), FieldError> {
    for (index, group) in after.groups().iter().enumerate() {
        let Some(limit) = limit(group) else { continue };
        if !changes(change, after, group) {
            continue;
        }
        let patches = after.patches_of(group);
        let Some(size) = after.size(bundle, group, &patches, patches.len()) else { continue };
        if size <= limit {
            continue;
        }
        let stored = before.and_then(|before| before.size_of(bundle, &group.name));
        // Only a group that was over the limit already may stay (or shrink):
        // one that fits, moved to a cloud of a lower limit, must fit there.
        if stored.is_some_and(|stored| stored > limit && size <= stored) {
            continue;
        }
        let over = first_over(patches.len(), limit, |applied| after.size(bundle, group, &patches, applied));
        let culprit = over.filter(|applied| *applied > 0).map(|applied| &patches[applied - 1]);
        return Err(refusal(change, index, group, culprit, size, limit));
    }
    Ok(())
}

/// The refusal of a write after which `group` (at `index` of the tenant's
/// groups) is `size` bytes of user data, over `limit`, since `culprit`.
fn refusal(
    change: ConfigChange<'_>,
    index: usize,
    group: &NodeGroupSpec,
    culprit: Option<&(Origin, ResolvedPatch)>,
    size: usize,
    limit: usize,
) -> FieldError {
    let field = match (change, culprit.map(|(origin, _)| *origin)) {
        (ConfigChange::ConfigPatch(_), _) => "spec.patches".to_string(),
        (ConfigChange::Tenant(_), Some(Origin::Tenant(at))) => format!("spec.configPatches[{at}]"),
        (ConfigChange::Tenant(_), Some(Origin::Group(at))) => {
            format!("spec.nodeGroups[{index}].configPatches[{at}]")
        }
        (ConfigChange::Tenant(_), None) => format!("spec.nodeGroups[{index}]"),
        (ConfigChange::NodeGroup(_), Some(Origin::Group(at))) => format!("spec.configPatches[{at}]"),
        (ConfigChange::NodeGroup(_), _) => "spec".to_string(),
    };
    let provider = group.provider_class.split(':').next().unwrap_or_default();
    let since = match culprit {
        Some((_, patch)) => format!("config patch {:?} takes it over the limit", patch.name),
        None => "it is over the limit with no config patch applied".to_string(),
    };
    FieldError::new(
        field,
        format!(
            "the config of node group {:?} would be {size} bytes of user data (base64), over the \
             {limit} bytes an {provider} instance takes: {since} (patches apply in order, the \
             tenant's, then the group's)",
            group.name
        ),
    )
}

/// Checks the user data of a tenant about to be created, with the bundle
/// sealed for it: no config patch exists yet, so only the configs without
/// patches can be over a limit.
pub(crate) fn check_new_tenant(
    secrets: &Secrets,
    tenant: &Tenant,
    sealed: &[u8],
) -> Result<(), TenancyError> {
    let groups = tenant.spec.node_groups.iter().flatten();
    if !groups.into_iter().any(|group| limit(group).is_some()) {
        return Ok(());
    }
    let bundle = secrets.sealer().open_bundle(&tenant.metadata.name, sealed)?;
    let after = Sources { tenant: tenant.clone(), patches: BTreeMap::new() };
    Ok(check(&bundle, None, &after, ConfigChange::Tenant(tenant))?)
}

impl Tenancy {
    /// Checks the user data of the cloud groups of `tenant` that `change`
    /// changes. A tenant that does not exist or is being deleted is left to
    /// the store, which refuses the write.
    pub(crate) async fn check_user_data(
        &self,
        tenant: &str,
        change: ConfigChange<'_>,
    ) -> Result<(), TenancyError> {
        let store = self.store().as_ref();
        let key = Key::tenant(tenant);
        let Some(object) = store.get(&key) else { return Ok(()) };
        if object.deleting {
            return Ok(());
        }
        let before = Sources::stored(store, object.parse().map_err(TenancyError::corrupt(&key))?)?;
        let after = before.changed(store, change)?;
        let cloud = |group: &&NodeGroupSpec| limit(group).is_some() && changes(change, &after, group);
        if !after.groups().iter().any(|group| cloud(&group)) {
            return Ok(());
        }
        let bundle = match self.secrets().open(store, tenant).await {
            Ok(bundle) => bundle,
            Err(TenancyError::NoSecrets(_)) => return Ok(()),
            Err(err) => return Err(err),
        };
        Ok(check(&bundle, Some(&before), &after, change)?)
    }
}

#[cfg(test)]
mod tests;
