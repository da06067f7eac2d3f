//! The kinds of resource the commands name, and their API paths.

use anyhow::Result;
use clap::ValueEnum;

use crate::failure::usage;

/// A kind as typed on the command line; singular and plural both work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ResourceKind {
    #[value(alias = "tenant")]
    Tenants,
    #[value(alias = "nodegroup", alias = "node-groups", alias = "node-group", alias = "ng")]
    Nodegroups,
    #[value(alias = "configpatch", alias = "config-patches", alias = "config-patch", alias = "cp")]
    Configpatches,
    #[value(alias = "machine")]
    Machines,
    Projected,
    /// Grants: roles on chosen tenants (admins only).
    #[value(alias = "grant")]
    Grants,
}

impl ResourceKind {
    /// The singular name used in `kind/name` output.
    pub(crate) fn singular(self) -> &'static str {
        match self {
            ResourceKind::Tenants => "tenant",
            ResourceKind::Nodegroups => "nodegroup",
            ResourceKind::Configpatches => "configpatch",
            ResourceKind::Machines => "machine",
            ResourceKind::Projected => "projected",
            ResourceKind::Grants => "grant",
        }
    }

    /// The path segment of the collection.
    fn segment(self) -> &'static str {
        match self {
            ResourceKind::Tenants => "tenants",
            ResourceKind::Nodegroups => "node-groups",
            ResourceKind::Configpatches => "configpatches",
            ResourceKind::Machines => "machines",
            ResourceKind::Projected => "projected",
            ResourceKind::Grants => "grants",
        }
    }

    /// The kind named in an applied document's `kind` field.
    pub(crate) fn from_document_kind(kind: &str) -> Option<ResourceKind> {
        match kind.to_ascii_lowercase().as_str() {
            "tenant" => Some(ResourceKind::Tenants),
            "nodegroup" => Some(ResourceKind::Nodegroups),
            "configpatch" => Some(ResourceKind::Configpatches),
            "machine" => Some(ResourceKind::Machines),
            "grant" => Some(ResourceKind::Grants),
            _ => None,
        }
    }

    /// The collection's path: tenants and grants at the root, the rest in a
    /// tenant (machines and projected resources also across all tenants).
    pub(crate) fn collection(self, tenant: Option<&str>) -> Result<String> {
        match (self, tenant) {
            (ResourceKind::Tenants | ResourceKind::Grants, _) => Ok(format!("/api/v1/{}", self.segment())),
            (ResourceKind::Machines | ResourceKind::Projected, None) => {
                Ok(format!("/api/v1/{}", self.segment()))
            }
            (_, Some(tenant)) => Ok(format!("/api/v1/tenants/{tenant}/{}", self.segment())),
            (_, None) => Err(usage(format!("{}s live in a tenant: pass --tenant NAME", self.singular()))),
        }
    }

    /// One object's path.
    pub(crate) fn item(self, tenant: Option<&str>, name: &str) -> Result<String> {
        match self {
            ResourceKind::Tenants | ResourceKind::Grants => Ok(format!("/api/v1/{}/{name}", self.segment())),
            _ if tenant.is_none() => {
                Err(usage(format!("{}s live in a tenant: pass --tenant NAME", self.singular())))
            }
            _ => Ok(format!("{}/{name}", self.collection(tenant)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let kind = ResourceKind::Nodegroups;
        assert_eq!(kind.item(Some("t"), "w").unwrap(), "/api/v1/tenants/t/node-groups/w");
        assert!(kind.collection(None).is_err());
        assert_eq!(ResourceKind::Machines.collection(None).unwrap(), "/api/v1/machines");
        assert_eq!(ResourceKind::Tenants.item(None, "demo").unwrap(), "/api/v1/tenants/demo");
        assert_eq!(ResourceKind::from_document_kind("ConfigPatch"), Some(ResourceKind::Configpatches));
        assert_eq!(ResourceKind::Grants.item(Some("ignored"), "a-devs").unwrap(), "/api/v1/grants/a-devs");
        assert_eq!(ResourceKind::Grants.collection(None).unwrap(), "/api/v1/grants");
        assert_eq!(ResourceKind::from_document_kind("Grant"), Some(ResourceKind::Grants));
    }
}
