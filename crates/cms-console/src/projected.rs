//! The tenant page's projected state: what the provisioning tool created
//! for the tenant, as `GET /api/v1/tenants/{name}/projected` lists it.

use cms_model::Projected;
use maud::{Markup, html};

use crate::Console;

/// The tenant's projected resources: `None` before the first provisioning
/// run has completed. A store that cannot be read is logged and shown as
/// not available.
pub(crate) async fn read(console: &Console, name: &str) -> Option<Vec<Projected>> {
    match console.store().projection(Some(name.to_string())).await {
        Ok(items) => items,
        Err(err) => {
            tracing::error!(tenant = name, error = %err, "cannot read the projected state");
            None
        }
    }
}

/// The section: one row per resource, with a machine's address, provider
/// id and shape.
pub(crate) fn section(items: Option<&[Projected]>) -> Markup {
    html! {
        h2 #projected-heading { "Projected state" }
        @match items {
            None => p #no-projected { "Not available yet: no provisioning run has completed." },
            Some([]) => p #no-projected { "The last provisioning run created nothing for this tenant." },
            Some(items) => table #projected aria-labelledby="projected-heading" {
                thead {
                    tr {
                        th scope="col" { "Kind" }
                        th scope="col" { "Name" }
                        th scope="col" { "Type" }
                        th scope="col" { "Address" }
                        th scope="col" { "Provider ID" }
                        th scope="col" { "Shape" }
                    }
                }
                tbody {
                    @for item in items {
                        tr data-projected=(item.name) {
                            td .kind { (item.kind) }
                            th scope="row" .name { (item.name) }
                            td .type { (item.tf_type) }
                            td .address { (field(item, "address")) }
                            td .provider-id { (field(item, "providerId")) }
                            td .shape { (field(item, "shape")) }
                        }
                    }
                }
            },
        }
    }
}

fn field<'a>(item: &'a Projected, name: &str) -> &'a str {
    item.spec.get(name).and_then(|value| value.as_str()).unwrap_or("")
}
