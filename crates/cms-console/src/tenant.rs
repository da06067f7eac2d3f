//! `GET /tenants/{name}`: one tenant: first its headline (ready or not, and
//! why not: the tenant's `status.message`, its first blocker; then the
//! phase), never green unless the tenant is ready; then a summary of its spec,
//! its conditions, its node groups (each with a scale form), its config
//! patches, its rolling procedures (`upgrade.rs`), its machines
//! (`machines.rs`), its backups' schedule and outcomes with a link to its
//! backups page (`backups.rs`), the client-config downloads (with, for
//! admins on a server with an autoscaler port, the autoscaler identity:
//! `autoscaler.rs`), the rotation of its CAs (`rotate_ca.rs`) and the
//! delete form. The
//! forms show only to roles that may use them; the actions (`actions.rs`,
//! and each section's module) check again. After a confirmed replacement,
//! `?replaced=<machine>` shows a notice while that machine is gone or
//! leaving.

use chrono::Utc;
use cms_auth::Permission;
use cms_model::{Condition, Kind, Machine, NodeGroup, Tenant};
use cms_store::Object;
use http::StatusCode;
use maud::{Markup, html};
use serde::de::DeserializeOwned;

use crate::failure::Failure;
use crate::form::Form;
use crate::layout::timestamp;
use crate::reply::Outcome;
use crate::session::{self, Session};
use crate::summary::{phase_name, reason_text, yes_no};
use crate::{Console, Request, layout, machines, probe, projected, upgrade};

/// A form of the page that was posted and refused, to show by its field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    None,
    /// The scale form of `group`.
    Scale {
        group: String,
        message: String,
    },
    /// The delete form.
    Delete {
        message: String,
    },
    /// A config-patch form (`patches.rs`).
    Patch(crate::patches::PatchProblem),
    /// The form that confirms the replacement of `machine` (`machines.rs`).
    Replace {
        machine: String,
        message: String,
    },
    /// The form that asks for a rotation of the tenant's CAs (`rotate_ca.rs`).
    RotateCa {
        message: String,
    },
}

/// The tenant page.
pub(crate) async fn page(console: &Console, request: &Request, name: &str) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::Read)?;
    let query = Form::query(request);
    render_page(console, &session, name, StatusCode::OK, &Problem::None, query.optional("replaced")).await
}

/// The page of tenant `name` with `status`, showing `problem` at its form.
pub(crate) async fn render(
    console: &Console,
    session: &Session,
    name: &str,
    status: StatusCode,
    problem: &Problem,
) -> Outcome {
    render_page(console, session, name, status, problem, None).await
}

/// The page as [`render`], with the notice of a confirmed replacement of
/// machine `replaced` while that machine is gone or leaving.
async fn render_page(
    console: &Console,
    session: &Session,
    name: &str,
    status: StatusCode,
    problem: &Problem,
    replaced: Option<&str>,
) -> Outcome {
    let store = console.store();
    // Read first: an update between this and the reads below is sent again.
    let revision = store.revision();
    let tenant = console.tenancy.tenant(name).map_err(|err| Failure::from(err).page(Some(session)))?;
    let groups: Vec<NodeGroup> = parsed(store.all(Kind::NodeGroup, Some(name.to_string())));
    let machines: Vec<Machine> = parsed(store.all(Kind::Machine, Some(name.to_string())));
    let default_talos = &console.tenancy.secrets().options().default_talos_version;
    let progress = upgrade::progress(&tenant, &groups, &machines, default_talos);
    let health = console.prober.last(name);
    let projected = projected::read(console, name).await;
    let replaced = replaced.filter(|id| {
        let machine = machines.iter().find(|machine| machine.metadata.name == *id);
        machine.is_none_or(|machine| machine.metadata.deletion_timestamp.is_some())
    });
    let listed =
        machines::Machines { session, tenant: name, groups: &groups, machines: &machines, problem, replaced };
    let autoscaler = crate::autoscaler::served(console);
    let view = View { session, tenant: &tenant, groups: &groups, default_talos, problem, autoscaler };
    let content = html! {
        section #tenant data-tenant=(name) data-revision=(revision) {
            (view.heading())
            (view.spec())
            (crate::editor::link(session, name))
            (view.conditions())
            (view.node_groups())
            (crate::patches::section(console, session, &tenant, problem))
            (upgrade::section(session, &tenant, &progress))
            (listed.section())
            (probe::section(session, name, health.as_ref()))
            (projected::section(projected.as_deref()))
            (crate::backups::summary(console, &tenant))
            (view.downloads())
            (crate::rotate_ca::section(session, &tenant, problem))
            (view.delete_form())
        }
    };
    Ok(layout::respond(status, name, Some(session), content))
}

/// The stored objects that parse; one that does not is logged and left out.
fn parsed<T: DeserializeOwned>(objects: Vec<std::sync::Arc<Object>>) -> Vec<T> {
    objects
        .iter()
        .filter_map(|object| match object.parse() {
            Ok(value) => Some(value),
            Err(err) => {
                tracing::error!(key = %object.key, error = %err, "stored object is unreadable");
                None
            }
        })
        .collect()
}

struct View<'a> {
    session: &'a Session,
    tenant: &'a Tenant,
    groups: &'a [NodeGroup],
    default_talos: &'a str,
    problem: &'a Problem,
    /// Whether the server serves an autoscaler port.
    autoscaler: bool,
}

impl View<'_> {
    fn name(&self) -> &str {
        &self.tenant.metadata.name
    }

    /// The headline, before anything else: ready or not, why not, the
    /// phase. Its colour follows `ready` alone (`console.css`), and the
    /// words say it too.
    fn heading(&self) -> Markup {
        let status = &self.tenant.status;
        let phase = phase_name(status.phase);
        let ready = yes_no(status.ready);
        html! {
            h1 { "Tenant " (self.name()) }
            section #headline .headline data-ready=(ready) data-phase=(phase) aria-labelledby="headline-heading" {
                h2 #headline-heading .visually-hidden { "Status" }
                dl #status .facts {
                    dt { "Ready" }
                    dd #ready .ready data-ready=(ready) { (ready) }
                    dt #message-label { (message_label(status.ready)) }
                    dd #message .message { (reason_text(status.ready, status.message.as_deref())) }
                    dt { "Phase" }
                    dd #phase .phase data-phase=(phase) { (phase) }
                }
            }
            @if let Some(since) = self.tenant.metadata.deletion_timestamp {
                p #deleting .notice { "Deletion began " (timestamp(since)) "." }
            }
            h2 #phase-history-heading { "Phase history" }
            p .hint { "The phases this page has seen since it was opened, oldest first." }
            ol #phase-history aria-labelledby="phase-history-heading" {
                li data-phase=(phase) { (timestamp(Utc::now())) " " (phase) }
            }
        }
    }

    fn spec(&self) -> Markup {
        let spec = &self.tenant.spec;
        let talos =
            spec.talos_version.clone().unwrap_or_else(|| format!("{} (the default)", self.default_talos));
        let version = spec.talos_version.as_deref().unwrap_or(self.default_talos);
        let installer = cms_model::installer_image(spec, None, version);
        html! {
            h2 { "Spec" }
            dl #spec .facts {
                dt { "Labels" }
                dd .labels {
                    (list(&self.tenant.metadata.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>()))
                }
                dt { "Kubernetes version" }
                dd .kubernetes { (spec.kubernetes_version) }
                dt { "Talos version" }
                dd .talos { (talos) }
                dt { "Installer image" }
                dd .installer { (installer) }
                dt { "Control-plane endpoint" }
                dd .endpoint { (spec.control_plane_endpoint.as_deref().unwrap_or("none yet")) }
                dt { "Pod networks" }
                dd .pod-network { (list(&spec.pod_network)) }
                dt { "Service networks" }
                dd .service-network { (list(&spec.service_network)) }
                dt { "Config patches" }
                dd .config-patches {
                    (list(&spec.config_patches.iter().map(|r| r.name.clone()).collect::<Vec<_>>()))
                }
            }
        }
    }

    fn conditions(&self) -> Markup {
        html! {
            h2 #conditions-heading { "Conditions" }
            table #conditions aria-labelledby="conditions-heading" {
                thead {
                    tr {
                        th scope="col" { "Type" }
                        th scope="col" { "Status" }
                        th scope="col" { "Reason" }
                        th scope="col" { "Message" }
                        th scope="col" { "Last transition" }
                    }
                }
                tbody {
                    @for condition in &self.tenant.status.conditions { (condition_row(condition)) }
                }
            }
        }
    }

    fn node_groups(&self) -> Markup {
        let may_scale = self.session.may(Permission::Write);
        html! {
            h2 #node-groups-heading { "Node groups" }
            @if self.groups.is_empty() {
                p #no-node-groups { "The tenant has no node groups." }
            } @else {
                table #node-groups aria-labelledby="node-groups-heading" {
                    thead {
                        tr {
                            th scope="col" { "Name" }
                            th scope="col" { "Role" }
                            th scope="col" { "Provider class" }
                            th scope="col" { "Machines" }
                            th scope="col" { "Ready" }
                            @if may_scale { th scope="col" { "Scale" } }
                        }
                    }
                    tbody {
                        @for group in self.groups {
                            tr data-node-group=(group.metadata.name) {
                                th scope="row" .name { (group.metadata.name) }
                                td .role { (group.spec.role.as_str()) }
                                td .provider-class { (group.spec.provider_class) }
                                td .count {
                                    (group.spec.count)
                                    @if let Some(range) = group.spec.autoscaling {
                                        " " span .autoscaling { "autoscaled " (range.min_count) "–" (range.max_count) }
                                    }
                                }
                                td .ready { (group.status.ready_replicas) "/" (group.status.replicas) }
                                @if may_scale { td { (self.scale_form(group)) } }
                            }
                        }
                    }
                }
            }
        }
    }

    fn scale_form(&self, group: &NodeGroup) -> Markup {
        let group_name = &group.metadata.name;
        let id = format!("count-{group_name}");
        let error = match self.problem {
            Problem::Scale { group, message } if group == group_name => Some(message.as_str()),
            _ => None,
        };
        html! {
            form .scale method="post" action={ "/tenants/" (self.name()) "/node-groups/" (group_name) "/scale" } {
                (layout::csrf_field(self.session))
                div .field data-field="spec.count" {
                    label for=(id) { "Machines in " (group_name) }
                    input #(id) name="count" type="number" min="1" step="1" required value=(group.spec.count)
                        aria-invalid=[error.map(|_| "true")]
                        aria-describedby=[error.map(|_| format!("{id}-error"))];
                    @if let Some(message) = error {
                        p .field-error id={ (id) "-error" } { (message) }
                    }
                }
                button type="submit" { "Scale" }
            }
        }
    }

    fn downloads(&self) -> Markup {
        html! {
            @if self.session.may(Permission::ReadClientConfig) {
                h2 { "Client configuration" }
                ul #downloads {
                    li { a #download-kubeconfig href={ "/tenants/" (self.name()) "/kubeconfig" } download { "Download kubeconfig" } }
                    li { a #download-talosconfig href={ "/tenants/" (self.name()) "/talosconfig" } download { "Download talosconfig" } }
                    @if self.may_download_autoscaler_identity() {
                        li { a #download-autoscaler-identity href={ "/tenants/" (self.name()) "/autoscaler-identity" } download { "Autoscaler identity" } }
                    }
                }
            }
        }
    }

    /// Admins, on a server with an autoscaler port, download the tenant's
    /// autoscaler identity (`autoscaler.rs`).
    fn may_download_autoscaler_identity(&self) -> bool {
        self.autoscaler && self.session.may(Permission::DownloadAutoscalerIdentity)
    }

    fn delete_form(&self) -> Markup {
        if !self.session.may(Permission::DeleteTenant) || self.tenant.metadata.deletion_timestamp.is_some() {
            return html! {};
        }
        let error = match self.problem {
            Problem::Delete { message } => Some(message.as_str()),
            _ => None,
        };
        html! {
            h2 { "Delete" }
            form #delete-tenant .stacked method="post" action={ "/tenants/" (self.name()) "/delete" } data-name=(self.name()) {
                (layout::csrf_field(self.session))
                div .field data-field="confirm" {
                    label for="confirm" { "Type the tenant's name, " code { (self.name()) } ", to delete it and everything in it" }
                    input #confirm name="confirm" type="text" autocomplete="off" required
                        aria-invalid=[error.map(|_| "true")]
                        aria-describedby=[error.map(|_| "confirm-error")];
                    @if let Some(message) = error {
                        p .field-error #confirm-error { (message) }
                    }
                }
                button .danger type="submit" { "Delete tenant" }
            }
        }
    }
}

/// What the headline calls the message: why a tenant is not ready.
fn message_label(ready: bool) -> &'static str {
    if ready { "Message" } else { "Why not ready" }
}

fn condition_row(condition: &Condition) -> Markup {
    html! {
        tr data-condition=(condition.kind) {
            th scope="row" .type { (condition.kind) }
            td .status { (condition.status) }
            td .reason { (condition.reason) }
            td .message { (condition.message) }
            td .last-transition { (timestamp(condition.last_transition_time)) }
        }
    }
}

/// Items separated by commas, or "none".
fn list(items: &[String]) -> String {
    if items.is_empty() { "none".to_string() } else { items.join(", ") }
}
