//! The tenant page's health line, and `POST /tenants/{name}/probe`.
//!
//! The page shows the prober's last result for the tenant, however old,
//! without probing: rendering a page never waits on the network. The
//! "Probe now" button asks the prober to probe at once, past its cache
//! (`cms_prober::Prober::probe_now`), then shows the page again. Reading
//! health needs `Read`, as `GET /api/v1/tenants/{name}/health` does; the
//! button is still a form with the form token, because it makes the
//! service reach out to the tenant's machines.

use cms_auth::Permission;
use cms_prober::Health;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::{Console, Request, layout};

/// The health line with the button that probes now.
pub(crate) fn section(session: &Session, name: &str, health: Option<&Health>) -> Markup {
    html! {
        div #health .health {
            p #health-result {
                "Health: "
                @match health {
                    None => span .unknown { "not probed yet" },
                    Some(health) if health.reachable => span .reachable {
                        "reachable, Talos " (health.talos_version.as_deref().unwrap_or("unknown"))
                    },
                    Some(health) => span .unreachable {
                        "unreachable (" (health.error.as_deref().unwrap_or("no machine answered")) ")"
                    },
                }
                @if let Some(at) = health.and_then(|health| health.probed_at.as_deref()) {
                    ", probed at " time datetime=(at) { (at) }
                }
            }
            form #probe method="post" action={ "/tenants/" (name) "/probe" } {
                (layout::csrf_field(session))
                button type="submit" { "Probe now" }
            }
        }
    }
}

/// Probes tenant `name` now and shows its page with the result.
pub(crate) async fn probe(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, _) = session::posted(console, request, Permission::Read).await?;
    let health = console
        .prober
        .probe_now(name)
        .await
        .map_err(|err| Failure::new(http::StatusCode::NOT_FOUND, err.to_string()).page(Some(&session)))?;
    tracing::info!(user = %session.caller.user, tenant = name, reachable = health.reachable, "probed a tenant");
    Ok(session.mark(reply::redirect(&format!("/tenants/{name}#health"))))
}
