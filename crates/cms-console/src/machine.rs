//! `GET /tenants/{name}/machines/{id}`: one machine: what the tenant page's
//! machines table says of it, and its logs panel.
//!
//! The panel shows one of the machine's logs (a Talos service's, or the
//! kernel's) as it follows it live, through `logs.rs`'s stream; the page's
//! own script, `assets/logs.js`, opens it and appends each line with
//! `textContent`, keeping the last [`SHOWN_LINES`]. Logs can hold secrets,
//! so the panel shows only to roles with `ReadLogs` on the tenant (editors
//! and admins, and grants that give it); others see a note saying so, and
//! the stream refuses them too.

use cms_auth::Permission;
use cms_model::{Kind, Machine, NodeGroup, NodeGroupSpec};
use cms_store::Key;
use http::StatusCode;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::logs::{DEFAULT_TAIL, DMESG, MAX_TAIL, SERVICES};
use crate::reply::Outcome;
use crate::session::{self, Session};
use crate::summary::yes_no;
use crate::{Console, Request, assets, layout};

/// The most lines the panel keeps on the page; older ones are dropped.
pub(crate) const SHOWN_LINES: u32 = 2_000;

/// The machine page.
pub(crate) async fn page(console: &Console, request: &Request, name: &str, id: &str) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::Read)?;
    let object = console
        .tenancy
        .find(&Key::child(Kind::Machine, name, id))
        .map_err(|err| Failure::from(err).page(Some(&session)))?;
    let machine: Machine = object.parse().map_err(|err| Failure::internal(&err).page(Some(&session)))?;
    let groups: Vec<NodeGroupSpec> = console
        .store()
        .all(Kind::NodeGroup, Some(name.to_string()))
        .iter()
        .filter_map(|object| object.parse::<NodeGroup>().ok())
        .map(|group| group.spec)
        .collect();
    let role = machine.role(&groups).map(|role| role.as_str()).unwrap_or("");
    let content = html! {
        section #machine data-tenant=(name) data-machine=(id) {
            h1 { "Machine " (id) }
            p { a #back-to-tenant href={ "/tenants/" (name) "#machines-heading" } { "Back to tenant " (name) } }
            dl #machine-facts .facts {
                dt { "Group" } dd .group { (machine.spec.node_group.as_deref().unwrap_or("")) }
                dt { "Role" } dd .role { (role) }
                dt { "Stage" } dd .stage data-stage=(machine.status.stage) { (machine.status.stage) }
                dt { "Ready" } dd .ready data-ready=(yes_no(machine.status.ready)) { (yes_no(machine.status.ready)) }
                dt { "Address" } dd .address { (machine.spec.management_address.as_deref().unwrap_or("none yet")) }
                dt { "Talos version" } dd .talos { (machine.status.talos_version.as_deref().unwrap_or("")) }
                dt { "Kubernetes version" } dd .kubernetes { (machine.status.kubernetes_version.as_deref().unwrap_or("")) }
                dt { "Message" } dd .message { (machine.status.message.as_deref().unwrap_or("none")) }
            }
            (panel(console, &session, name, id))
        }
    };
    let head = html! { script src=(assets::logs_script_path()) defer {} };
    let title = format!("{id} · {name}");
    Ok(layout::respond_with_head(StatusCode::OK, &title, Some(&session), head, content))
}

/// The logs panel, or why the caller does not see it.
fn panel(console: &Console, session: &Session, name: &str, id: &str) -> Markup {
    let role = session.role_shown();
    html! {
        section #logs aria-labelledby="logs-heading" {
            h2 #logs-heading { "Logs" }
            @if !session.may(Permission::ReadLogs) {
                p #logs-refused .hint {
                    "Logs can hold secrets, so only editors and admins read them; your role on this \
                     tenant is " (role) "."
                }
            } @else if console.nodes.is_none() {
                p #logs-unavailable .notice { "This server reads no machine logs: it has no node API client." }
            } @else {
                p .hint {
                    "Logs can hold secrets: every read is on the audit log. The page keeps the last "
                    (SHOWN_LINES) " lines."
                }
                form #logs-form .inline method="get" action={ "/tenants/" (name) "/machines/" (id) "/logs" }
                    data-lines=(SHOWN_LINES) {
                    div .field {
                        label for="logs-service" { "Log" }
                        select #logs-service name="service" {
                            @for service in SERVICES { option value=(service) { (service) } }
                            option value=(DMESG) { "dmesg (the kernel)" }
                        }
                    }
                    div .field {
                        label for="logs-tail" { "Earlier lines" }
                        input #logs-tail name="tail" type="number" min="0" max=(MAX_TAIL) value=(DEFAULT_TAIL)
                            aria-describedby="logs-tail-hint";
                        p .hint #logs-tail-hint {
                            "0 to " (MAX_TAIL) "; dmesg starts with the whole buffer"
                        }
                    }
                    div .field .check {
                        input #logs-follow name="follow" type="checkbox" value="true" checked;
                        label for="logs-follow" { "Follow new lines" }
                    }
                    button #logs-start type="submit" { "Show the log" }
                    button #logs-stop type="button" disabled { "Stop" }
                }
                p #logs-status role="status" aria-live="polite" { "Choose a log and show it." }
                noscript { p { "Showing a log here needs JavaScript." } }
                pre #logs-output role="log" aria-live="off" aria-labelledby="logs-heading" tabindex="0" {}
            }
        }
    }
}
