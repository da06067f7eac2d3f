//! The resources users write (tenants, node groups, config patches) and the
//! rules they must meet beyond `cms-model`'s: a Talos version that `cms`
//! renders configs for, and config patches that apply by Talos's merge
//! rules, so a broken one is refused on write rather than found at render
//! time. [`Writable::check`] is what the API checks, so a Rust tool that
//! writes through [`crate::Tenancy`] is refused exactly where the API
//! refuses; [`Writable::config_change`] tells the check of the cloud
//! user-data limits what the write changes.
//!
//! A replacement is checked against the resource it replaces too
//! ([`Writable::check_change`]): a tenant's `kubernetesVersion` moves one
//! minor at a time (`kubernetes_steps.rs`).
//!
//! The `service.io/*` annotations are the service's: [`service_annotations`]
//! keeps those a replacement omits and refuses any it adds or changes, but
//! for [`REMOVABLE_ANNOTATIONS`], which a replacement that omits them
//! removes.

use std::collections::BTreeMap;

use cms_model::{ConfigPatch, FieldError, Kind, NodeGroup, NodeGroupSpec, ObjectMeta, Resource, Tenant};
use cms_store::{Draft, Store};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::control_plane::MADE_ENDPOINT_ANNOTATION;
use crate::error::TenancyError;
use crate::secrets::check_talos_version;
use crate::user_data_limits::ConfigChange;

mod kubernetes_steps;

pub use kubernetes_steps::KUBERNETES_VERSION_ANNOTATION;

/// A kind of resource that users create and change, and read back from the
/// store in the same shape.
pub trait Writable: Sized + DeserializeOwned {
    /// The kind as the store keys it.
    const KIND: Kind;

    /// Normalizes the resource (defaults, version prefixes) and checks every
    /// rule, naming the field that breaks one.
    fn check(&mut self) -> Result<(), FieldError>;

    /// The resource's metadata.
    fn metadata(&self) -> &ObjectMeta;

    /// The resource's metadata, to change.
    fn metadata_mut(&mut self) -> &mut ObjectMeta;

    /// What the store writes: labels, annotations and spec. Status is never
    /// taken from a writer.
    fn draft(self) -> Result<Draft, TenancyError>;

    /// What writing the resource changes of the sources of its tenant's
    /// machine configs, for the check of the cloud user-data limits.
    fn config_change(&self) -> ConfigChange<'_>;

    /// Checks the resource's sizes: no node group's `count`, nor its metal
    /// hosts, over `max_group_count`. On a replace, `stored` is the resource
    /// replaced: a group it holds over the cap (the cap was lowered since)
    /// may stay as it is or shrink, not grow.
    fn check_sizes(&self, _max_group_count: u32, _stored: Option<&Self>) -> Result<(), FieldError> {
        Ok(())
    }

    /// Checks what a replacement changes of `stored`, the resource it
    /// replaces, with the rest of its tenant read from `store`: a tenant's
    /// `kubernetesVersion` moves one minor at a time, and not past the
    /// machines' (`status.kubernetesVersion`) by more than one.
    fn check_change(&self, _stored: &Self, _store: &dyn Store) -> Result<(), FieldError> {
        Ok(())
    }
}

impl Writable for Tenant {
    const KIND: Kind = Kind::Tenant;

    fn check(&mut self) -> Result<(), FieldError> {
        self.prepare()?;
        if let Some(version) = &self.spec.talos_version {
            check_talos_version("spec.talosVersion", version)?;
        }
        for (index, group) in self.spec.node_groups.iter().flatten().enumerate() {
            if let Some(version) = &group.talos_version {
                check_talos_version(&format!("spec.nodeGroups[{index}].talosVersion"), version)?;
            }
        }
        Ok(())
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }

    fn draft(self) -> Result<Draft, TenancyError> {
        draft(self)
    }

    fn config_change(&self) -> ConfigChange<'_> {
        ConfigChange::Tenant(self)
    }

    fn check_change(&self, stored: &Self, store: &dyn Store) -> Result<(), FieldError> {
        kubernetes_steps::check_kubernetes_step(
            &self.spec.kubernetes_version,
            &stored.spec.kubernetes_version,
            || {
                let mut observed = kubernetes_steps::observed_versions(store, &self.metadata.name);
                // The version every machine's config names, once an upgrade is done.
                if let Some(cluster) = stored.metadata.annotations.get(KUBERNETES_VERSION_ANNOTATION) {
                    observed.push(("(the cluster's configs)".to_string(), cluster.clone()));
                }
                observed
            },
        )
    }

    fn check_sizes(&self, max_group_count: u32, stored: Option<&Self>) -> Result<(), FieldError> {
        // An endpoint the service made stays: the machines' configs name it.
        let made = stored.and_then(|tenant| tenant.metadata.annotations.get(MADE_ENDPOINT_ANNOTATION));
        if let Some(made) = made
            && self.spec.control_plane_endpoint.as_ref().is_some_and(|set| set != made)
        {
            return Err(FieldError::new(
                "spec.controlPlaneEndpoint",
                format!(
                    "the control-plane endpoint is {made}, the load balancer the service made for the tenant; \
                     its machines' configs name it, so it cannot change"
                ),
            ));
        }
        let stored_groups = stored.and_then(|tenant| tenant.spec.node_groups.as_deref()).unwrap_or_default();
        for (index, group) in self.spec.node_groups.iter().flatten().enumerate() {
            let before = stored_groups.iter().find(|stored| stored.name == group.name);
            check_group_size(&format!("spec.nodeGroups[{index}]"), group, before, max_group_count)?;
        }
        Ok(())
    }
}

impl Writable for NodeGroup {
    const KIND: Kind = Kind::NodeGroup;

    fn check(&mut self) -> Result<(), FieldError> {
        self.prepare()?;
        match &self.spec.talos_version {
            Some(version) => check_talos_version("spec.talosVersion", version),
            None => Ok(()),
        }
    }

    fn config_change(&self) -> ConfigChange<'_> {
        ConfigChange::NodeGroup(&self.spec)
    }

    fn check_sizes(&self, max_group_count: u32, stored: Option<&Self>) -> Result<(), FieldError> {
        check_group_size("spec", &self.spec, stored.map(|group| &group.spec), max_group_count)
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }

    fn draft(self) -> Result<Draft, TenancyError> {
        draft(self)
    }
}

impl Writable for ConfigPatch {
    const KIND: Kind = Kind::ConfigPatch;

    fn check(&mut self) -> Result<(), FieldError> {
        self.prepare()?;
        cms_talos::check_patch(&self.spec)
    }

    fn config_change(&self) -> ConfigChange<'_> {
        ConfigChange::ConfigPatch(self)
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }

    fn draft(self) -> Result<Draft, TenancyError> {
        draft(self)
    }
}

/// The prefix of the annotations the service writes and users may not.
pub const SERVICE_ANNOTATION_PREFIX: &str = "service.io/";

/// The service annotations a user may remove, by replacing the resource
/// without them: `service.io/rollout-paused` (removing it resumes a paused
/// rollout). None may be added or changed.
pub const REMOVABLE_ANNOTATIONS: &[&str] = &["service.io/rollout-paused"];

/// The annotations a write stores: `wanted`, with the service annotations
/// of `current` (the stored object's; none on a create) that it omits kept,
/// but for [`REMOVABLE_ANNOTATIONS`]. A service annotation that `wanted`
/// adds or changes is refused, naming it.
pub fn service_annotations(
    current: &BTreeMap<String, String>,
    mut wanted: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, FieldError> {
    for (key, value) in &wanted {
        if key.starts_with(SERVICE_ANNOTATION_PREFIX) && current.get(key) != Some(value) {
            let field = format!("metadata.annotations[{key:?}]");
            let message = match current.contains_key(key) {
                true => "is written by the service and cannot be changed; leave it out to keep it",
                false => "is written by the service and cannot be added",
            };
            return Err(FieldError::new(field, message));
        }
    }
    for (key, value) in current {
        let kept =
            key.starts_with(SERVICE_ANNOTATION_PREFIX) && !REMOVABLE_ANNOTATIONS.contains(&key.as_str());
        if kept {
            wanted.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    Ok(wanted)
}

/// Checks that the node group at `path` asks for at most `max` machines (its
/// `count` and its autoscaling `maxCount`) and lists at most `max` metal
/// hosts and removed machines, so that no spec makes the reconciler
/// allocate without bound. A group that replaces `stored` (the stored group
/// of its name) may keep or shrink what it held over `max`, as the store's
/// cap on a tenant's machines refuses only growth: a cap lowered under a
/// stored group leaves its other edits (annotations, a rollout's resume)
/// possible.
fn check_group_size(
    path: &str,
    group: &NodeGroupSpec,
    stored: Option<&NodeGroupSpec>,
    max: u32,
) -> Result<(), FieldError> {
    if let Some(stored) = stored {
        check_same_cloud(path, group, stored)?;
    }
    let stored_count = stored.map_or(0, |stored| stored.count);
    if group.count > max && group.count > stored_count {
        let message = format!(
            "is {}, over the limit of {max} machines per node group{}",
            group.count,
            growth(u64::from(stored_count), max)
        );
        return Err(FieldError::new(format!("{path}.count"), message));
    }
    let max_count = |group: &NodeGroupSpec| group.autoscaling.map_or(0, |limits| limits.max_count);
    let (autoscaled, stored_max) = (max_count(group), stored.map_or(0, max_count));
    if autoscaled > max && autoscaled > stored_max {
        let message = format!(
            "is {autoscaled}, over the limit of {max} machines per node group{}",
            growth(u64::from(stored_max), max)
        );
        return Err(FieldError::new(format!("{path}.autoscaling.maxCount"), message));
    }
    let removed = group.removed_machines.len();
    let stored_removed = stored.map_or(0, |stored| stored.removed_machines.len());
    if removed > max as usize && removed > stored_removed {
        let message = format!(
            "lists {removed} machines, over the limit of {max} per node group{}",
            growth(stored_removed as u64, max)
        );
        return Err(FieldError::new(format!("{path}.removedMachines"), message));
    }
    let hosts = group.metal_hosts().len();
    let stored_hosts = stored.map_or(0, |stored| stored.metal_hosts().len());
    if hosts > max as usize && hosts > stored_hosts {
        let message = format!(
            "lists {hosts} hosts, over the limit of {max} per node group{}",
            growth(stored_hosts as u64, max)
        );
        return Err(FieldError::new(format!("{path}.providerConfig.hosts"), message));
    }
    Ok(())
}

/// Refuses a node group that moves its machines to another provider or
/// OCI region: the tool would make all of the group's instances anew at
/// once, and the old ones would go with them (control planes included).
/// A new node group in the other place, and this one scaled down, move
/// them one at a time.
fn check_same_cloud(path: &str, group: &NodeGroupSpec, stored: &NodeGroupSpec) -> Result<(), FieldError> {
    let provider = |group: &NodeGroupSpec| group.provider_class().ok().map(|class| class.provider);
    let region = |group: &NodeGroupSpec| group.provider_config.get("region").cloned();
    let (before, after) = (provider(stored), provider(group));
    let message = |what: &str| {
        format!(
            "the machines of node group {:?} cannot move to another {what}: make a new node group there \
             and scale this one down",
            group.name
        )
    };
    if before.is_some() && after.is_some() && before != after {
        return Err(FieldError::new(format!("{path}.providerClass"), message("provider")));
    }
    if after == Some(cms_model::Provider::Oci) && region(stored) != region(group) {
        return Err(FieldError::new(format!("{path}.providerConfig.region"), message("region")));
    }
    Ok(())
}

/// What a refusal adds when the stored group was over the cap already.
fn growth(stored: u64, max: u32) -> String {
    match stored > u64::from(max) {
        true => format!(" (it may stay at {stored} or shrink, not grow)"),
        false => String::new(),
    }
}

/// Turns a checked resource into what the store writes.
fn draft<Spec: Serialize, Status>(resource: Resource<Spec, Status>) -> Result<Draft, TenancyError> {
    let spec = serde_json::to_value(&resource.spec).map_err(TenancyError::corrupt("the spec"))?;
    Ok(Draft {
        labels: resource.metadata.labels,
        annotations: resource.metadata.annotations,
        spec,
        status: None,
        secrets: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_model::parse_json;

    fn tenant(json: &str) -> Tenant {
        parse_json(json.as_bytes()).expect("parses")
    }

    #[test]
    fn tenant_drafts_keep_absent_node_groups_absent() {
        let mut resource = tenant(
            r#"{"metadata":{"name":"a","labels":{"team":"x"}},"spec":{"kubernetesVersion":"1.31.0"}}"#,
        );
        resource.check().expect("valid");
        let draft = resource.draft().expect("drafts");
        assert!(draft.spec.get("nodeGroups").is_none(), "{}", draft.spec);
        assert_eq!(draft.labels.get("team").map(String::as_str), Some("x"));
        assert_eq!(draft.status, None);

        let resource =
            tenant(r#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0","nodeGroups":[]}}"#);
        assert_eq!(resource.draft().expect("drafts").spec["nodeGroups"], serde_json::json!([]));
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect()
    }

    #[test]
    fn omitted_service_annotations_are_kept_but_the_removable_ones() {
        let current = map(&[
            ("service.io/bootstrapped", "cp-0 2026-01-01T00:00:00Z"),
            ("service.io/rollout-paused", "3"),
            ("team", "x"),
        ]);
        let kept = service_annotations(&current, map(&[("owner", "y")])).expect("allowed");
        assert_eq!(kept, map(&[("owner", "y"), ("service.io/bootstrapped", "cp-0 2026-01-01T00:00:00Z")]));
        let same = service_annotations(&current, current.clone()).expect("the same values are allowed");
        assert_eq!(same, current);
    }

    #[test]
    fn a_changed_or_added_service_annotation_is_refused_naming_it() {
        let current = map(&[("service.io/bootstrapped", "cp-0 2026-01-01T00:00:00Z")]);
        let check = |wanted: &[(&str, &str)], field: &str, says: &str| {
            let err = service_annotations(&current, map(wanted)).expect_err("refused");
            assert_eq!(err.field, field);
            assert!(err.message.contains(says), "{err}");
        };
        check(
            &[("service.io/bootstrapped", "cp-1 now")],
            r#"metadata.annotations["service.io/bootstrapped"]"#,
            "cannot be changed",
        );
        check(
            &[("service.io/config-hash", "abc")],
            r#"metadata.annotations["service.io/config-hash"]"#,
            "cannot be added",
        );
        check(
            &[("service.io/rollout-paused", "1")],
            r#"metadata.annotations["service.io/rollout-paused"]"#,
            "cannot be added",
        );
        let created = service_annotations(&BTreeMap::new(), map(&[("service.io/applied-inputs", "x")]));
        assert_eq!(
            created.expect_err("a create adds none").field,
            r#"metadata.annotations["service.io/applied-inputs"]"#
        );
    }

    #[test]
    fn talos_versions_outside_the_range_name_their_field() {
        let mut resource = tenant(
            r#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0","nodeGroups":[
                {"name":"w","role":"worker","count":1,"providerClass":"metal:bare","providerConfig":{"hosts":[{"address":"10.0.0.1"}]},"talosVersion":"1.7.0"}]}}"#,
        );
        let err = resource.check().expect_err("1.7 is too old");
        assert_eq!(err.field, "spec.nodeGroups[0].talosVersion");
    }

    #[test]
    fn a_group_cannot_move_to_another_provider_or_region() {
        let stored = tenant(
            r#"{"metadata":{"name":"acme"},"spec":{"kubernetesVersion":"1.31.1","nodeGroups":[{"name":"cp","role":"controlplane","count":1,"providerClass":"oci:VM.Standard.E4.Flex","providerConfig":{"region":"eu-frankfurt-1","compartmentOcid":"c","subnetId":"s","ocpus":1,"memoryGb":2,"imageId":"i"}}]}}"#,
        );
        let mut moved = stored.clone();
        let group = &mut moved.spec.node_groups.as_mut().unwrap()[0];
        group.provider_config.insert("region".into(), serde_json::json!("us-ashburn-1"));
        let err = moved.check_sizes(100, Some(&stored)).unwrap_err();
        assert_eq!(err.field, "spec.nodeGroups[0].providerConfig.region");
        let mut moved = stored.clone();
        let group = &mut moved.spec.node_groups.as_mut().unwrap()[0];
        group.provider_class = "openstack:m1.large".into();
        let err = moved.check_sizes(100, Some(&stored)).unwrap_err();
        assert_eq!(err.field, "spec.nodeGroups[0].providerClass");
        let mut resized = stored.clone();
        resized.spec.node_groups.as_mut().unwrap()[0].count = 3;
        assert!(resized.check_sizes(100, Some(&stored)).is_ok());
    }

    #[test]
    fn a_made_endpoint_cannot_change() {
        let mut stored = tenant(r#"{"metadata":{"name":"acme"},"spec":{"kubernetesVersion":"1.31.1"}}"#);
        stored.metadata.annotations.insert(MADE_ENDPOINT_ANNOTATION.into(), "https://10.9.0.2:6443".into());
        let mut update = stored.clone();
        assert!(update.check_sizes(100, Some(&stored)).is_ok(), "unset keeps the made one");
        update.spec.control_plane_endpoint = Some("https://10.9.0.2:6443".into());
        assert!(update.check_sizes(100, Some(&stored)).is_ok(), "the same one");
        update.spec.control_plane_endpoint = Some("https://lb.example.com:6443".into());
        let err = update.check_sizes(100, Some(&stored)).unwrap_err();
        assert_eq!(err.field, "spec.controlPlaneEndpoint");
        assert!(err.message.contains("https://10.9.0.2:6443"), "{}", err.message);
    }

    #[test]
    fn sizes_over_the_cap_name_their_field() {
        let hosts = r#"{"hosts":[{"address":"10.0.0.1"},{"address":"10.0.0.2"},{"address":"10.0.0.3"}]}"#;
        let group = |count: u32| {
            format!(
                r#"{{"name":"w","role":"worker","count":{count},"providerClass":"metal:bare","providerConfig":{hosts}}}"#
            )
        };
        let inline = |count: u32| {
            tenant(&format!(
                r#"{{"metadata":{{"name":"a"}},"spec":{{"kubernetesVersion":"1.31.0","nodeGroups":[{}]}}}}"#,
                group(count)
            ))
        };
        let err = inline(3).check_sizes(2, None).expect_err("a count of 3 is over 2");
        assert_eq!(err.field, "spec.nodeGroups[0].count");
        assert!(err.message.contains("over the limit of 2"), "{err}");
        let err = inline(1).check_sizes(2, None).expect_err("three hosts are over 2");
        assert_eq!(err.field, "spec.nodeGroups[0].providerConfig.hosts");
        inline(3).check_sizes(3, None).expect("at the cap");

        let resource: NodeGroup =
            parse_json(format!(r#"{{"metadata":{{"name":"w"}},"spec":{}}}"#, group(3)).as_bytes())
                .expect("parses");
        assert_eq!(resource.check_sizes(2, None).expect_err("over").field, "spec.count");
        let one: NodeGroup =
            parse_json(format!(r#"{{"metadata":{{"name":"w"}},"spec":{}}}"#, group(1)).as_bytes())
                .expect("parses");
        assert_eq!(one.check_sizes(2, None).expect_err("over").field, "spec.providerConfig.hosts");
    }

    #[test]
    fn a_group_stored_over_the_cap_may_stay_or_shrink_but_not_grow() {
        let spec = |name: &str, count: u32, hosts: u32| {
            let hosts: Vec<String> = (1..=hosts).map(|i| format!(r#"{{"address":"10.0.0.{i}"}}"#)).collect();
            format!(
                r#"{{"name":"{name}","role":"worker","count":{count},"providerClass":"metal:bare","providerConfig":{{"hosts":[{}]}}}}"#,
                hosts.join(",")
            )
        };
        let group = |count: u32, hosts: u32| -> NodeGroup {
            let json = format!(r#"{{"metadata":{{"name":"w"}},"spec":{}}}"#, spec("w", count, hosts));
            parse_json(json.as_bytes()).expect("parses")
        };
        let stored = group(5, 5);
        group(5, 5).check_sizes(3, Some(&stored)).expect("as stored");
        group(4, 5).check_sizes(3, Some(&stored)).expect("fewer machines");
        group(4, 4).check_sizes(3, Some(&stored)).expect("fewer hosts");
        let err = group(6, 6).check_sizes(3, Some(&stored)).expect_err("grown");
        assert_eq!(err.field, "spec.count");
        assert!(
            err.message.contains("over the limit of 3") && err.message.contains("may stay at 5"),
            "{err}"
        );
        let err = group(5, 6).check_sizes(3, Some(&stored)).expect_err("a host more");
        assert_eq!(err.field, "spec.providerConfig.hosts");
        let err = group(4, 4).check_sizes(3, Some(&group(3, 3))).expect_err("past the cap from under it");
        assert_eq!(err.field, "spec.count");
        assert!(!err.message.contains("may stay"), "{err}");

        let inline = |name: &str, count: u32| {
            tenant(&format!(
                r#"{{"metadata":{{"name":"a"}},"spec":{{"kubernetesVersion":"1.31.0","nodeGroups":[{}]}}}}"#,
                spec(name, count, count)
            ))
        };
        let stored = inline("w", 5);
        inline("w", 5).check_sizes(3, Some(&stored)).expect("the stored group of that name");
        inline("w", 4).check_sizes(3, Some(&stored)).expect("shrunk");
        let err = inline("w", 6).check_sizes(3, Some(&stored)).expect_err("grown");
        assert_eq!(err.field, "spec.nodeGroups[0].count");
        let err = inline("x", 5).check_sizes(3, Some(&stored)).expect_err("another group");
        assert_eq!(err.field, "spec.nodeGroups[0].count");
    }

    #[test]
    fn autoscaling_and_removals_over_the_cap_are_refused() {
        let group = |max_count: u32, removed: u32| -> NodeGroup {
            let removed: Vec<String> = (0..removed).map(|i| format!(r#""w-{i}""#)).collect();
            let json = format!(
                r#"{{"metadata":{{"name":"w"}},"spec":{{"role":"worker","count":1,"providerClass":"openstack:m1","providerConfig":{{"imageId":"i","networkId":"n"}},"autoscaling":{{"minCount":1,"maxCount":{max_count}}},"removedMachines":[{}]}}}}"#,
                removed.join(",")
            );
            parse_json(json.as_bytes()).expect("parses")
        };
        group(3, 3).check_sizes(3, None).expect("at the cap");
        let err = group(4, 0).check_sizes(3, None).expect_err("maxCount over the cap");
        assert_eq!(err.field, "spec.autoscaling.maxCount");
        assert!(err.message.contains("over the limit of 3"), "{err}");
        group(4, 0).check_sizes(3, Some(&group(5, 0))).expect("lowered from over the cap");
        let err = group(6, 0).check_sizes(3, Some(&group(5, 0))).expect_err("grown over the cap");
        assert!(err.message.contains("may stay at 5"), "{err}");
        let err = group(3, 4).check_sizes(3, None).expect_err("too many removals");
        assert_eq!(err.field, "spec.removedMachines");
    }
}
