//! `cms get` and `cms delete`.

use anyhow::{Context, Result};
use cms_model::{ConfigPatch, Grant, List, Machine, NodeGroup, Projected, Tenant};
use serde::de::DeserializeOwned;

use crate::cli::{GetArgs, Output, TargetArgs};
use crate::client::Client;
use crate::failure::usage;
use crate::kinds::ResourceKind;
use crate::output::{out, show};
use crate::tables::Row;

/// The page size used to read whole lists.
const PAGE: usize = 1000;

/// `cms get KIND [NAME]`.
pub(crate) fn get(client: &Client, args: &GetArgs, format: Output) -> Result<()> {
    let selector = args.selector.as_deref();
    if selector.is_some() && args.kind == ResourceKind::Projected {
        return Err(usage("projected resources have no labels: --selector does not apply"));
    }
    if selector.is_some() && args.name.is_some() {
        return Err(usage("a NAME and --selector cannot be given together"));
    }
    if args.watch {
        return match args.kind {
            ResourceKind::Tenants => crate::watch::get_watch(client, args.name.as_deref(), selector, format),
            _ => Err(usage("only tenants can be watched")),
        };
    }
    let tenant = args.tenant.as_deref();
    let name = args.name.as_deref();
    let kind = args.kind;
    match kind {
        ResourceKind::Tenants => one_or_all::<Tenant>(client, kind, tenant, name, selector, format),
        ResourceKind::Nodegroups => one_or_all::<NodeGroup>(client, kind, tenant, name, selector, format),
        ResourceKind::Configpatches => {
            one_or_all::<ConfigPatch>(client, kind, tenant, name, selector, format)
        }
        ResourceKind::Machines => one_or_all::<Machine>(client, kind, tenant, name, selector, format),
        ResourceKind::Grants => one_or_all::<Grant>(client, kind, tenant, name, selector, format),
        ResourceKind::Projected => projected(client, tenant, name, format),
    }
}

fn one_or_all<T: Row>(
    client: &Client,
    kind: ResourceKind,
    tenant: Option<&str>,
    name: Option<&str>,
    selector: Option<&str>,
    format: Output,
) -> Result<()> {
    match name {
        Some(name) => {
            let item: T = client.get(&kind.item(tenant, name)?)?;
            show(&[item], format, true)
        }
        None => show(&list_selected::<T>(client, &kind.collection(tenant)?, selector)?, format, false),
    }
}

/// Every item of a list, page by page.
pub(crate) fn list_all<T: Row>(client: &Client, path: &str) -> Result<Vec<T>> {
    list_selected(client, path, None)
}

/// Every item of a list that `selector` (a label selector, passed as
/// `labelSelector`, which the server parses and judges) matches, page by
/// page.
pub(crate) fn list_selected<T: DeserializeOwned>(
    client: &Client,
    path: &str,
    selector: Option<&str>,
) -> Result<Vec<T>> {
    let filter = selector_query(selector);
    let mut items = Vec::new();
    loop {
        let page: List<T> = client.get(&format!("{path}?limit={PAGE}&offset={}{filter}", items.len()))?;
        let done = page.items.is_empty() || items.len() + page.items.len() >= page.total as usize;
        items.extend(page.items);
        if done {
            return Ok(items);
        }
    }
}

/// `&labelSelector=...`, encoded, or nothing without a selector.
pub(crate) fn selector_query(selector: Option<&str>) -> String {
    match selector {
        Some(selector) => format!(
            "&labelSelector={}",
            url::form_urlencoded::byte_serialize(selector.as_bytes()).collect::<String>()
        ),
        None => String::new(),
    }
}

/// `cms get projected [KIND] [--tenant T]`: projected resources have no names
/// of their own, so the optional argument is a projected kind.
fn projected(client: &Client, tenant: Option<&str>, kind: Option<&str>, format: Output) -> Result<()> {
    let path = match (tenant, kind) {
        (None, None) => "/api/v1/projected".to_string(),
        (None, Some(_)) => return Err(usage("a projected kind needs --tenant NAME")),
        (Some(tenant), None) => format!("/api/v1/tenants/{tenant}/projected"),
        (Some(tenant), Some(kind)) => format!("/api/v1/tenants/{tenant}/projected/{kind}"),
    };
    let items: Vec<Projected> = list_selected(client, &path, None)?;
    show(&items, format, false)
}

/// `cms delete KIND NAME`.
pub(crate) fn delete(client: &Client, args: &TargetArgs, format: Output) -> Result<()> {
    if args.kind == ResourceKind::Projected {
        return Err(usage("projected resources are read-only"));
    }
    let path = args.kind.item(args.tenant.as_deref(), &args.name)?;
    let reply =
        client.delete(&path).with_context(|| format!("deleting {}/{}", args.kind.singular(), args.name))?;
    let id = format!("{}/{}", args.kind.singular(), args.name);
    match (format, reply) {
        (Output::Json | Output::Yaml, Some(object)) => out(&crate::output::encode(&object, format)?),
        (Output::Name, _) => out(&format!("{id}\n")),
        // Tenants and machines are deleted asynchronously: the reply carries deletionTimestamp.
        (_, Some(_)) => out(&format!("{id} deletion requested\n")),
        (_, None) => out(&format!("{id} deleted\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_encoded_into_the_query() {
        assert_eq!(selector_query(None), "");
        assert_eq!(
            selector_query(Some("team in (a,b),env!=prod")),
            "&labelSelector=team+in+%28a%2Cb%29%2Cenv%21%3Dprod"
        );
        assert_eq!(selector_query(Some("a&b=#")), "&labelSelector=a%26b%3D%23");
    }
}
