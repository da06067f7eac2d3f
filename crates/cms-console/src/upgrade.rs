//! The tenant page's upgrade section, and `POST /tenants/{name}/resume`.
//!
//! The section covers every rolling procedure of the reconciler (Talos
//! upgrades, reboots for config changes, Kubernetes upgrades;
//! `progress.rs` reads where they stand): how far the Talos rollout is
//! (`n of m` machines at their desired version), how many machines' kubelets
//! run the spec's Kubernetes version and the version an upgrade comes from,
//! the machines waiting for a reboot, the machines in a rolling step with
//! what they go to and since when, each procedure's condition, and a
//! paused rollout's reason with a button that resumes it. Resuming is what
//! `docs/upgrades.md` tells an API user to do, whichever procedure paused:
//! the tenant replaced without its `service.io/rollout-paused` annotation,
//! at the version just read, through `Tenancy` (`Write`).

mod progress;

use cms_auth::Permission;
use cms_model::Tenant;
use cms_store::Key;
use maud::{Markup, html};

pub(crate) use progress::{Progress, Step, progress};

use crate::failure::Failure;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::{Console, Request, layout};

/// On a tenant whose rollout is paused: `<generation> <condition>`, the
/// generation it paused at and the condition of the procedure that paused
/// (absent in older values, which are the Talos upgrade's). The reconciler
/// writes it (`cms_reconciler::PAUSED_ANNOTATION`).
pub(crate) const PAUSED: &str = "service.io/rollout-paused";

/// The conditions the reconciler keeps while a procedure rolls, each with
/// the procedure in words and the id of its line on the page.
const PROCEDURES: [(&str, &str, &str); 3] = [
    ("Upgrading", "Talos upgrade", "upgrade-condition"),
    ("Rebooting", "reboots for config changes", "rebooting-condition"),
    ("KubernetesUpgrading", "Kubernetes upgrade", "kubernetes-upgrade-condition"),
];

/// The section: progress, machines in flight, the conditions, and a paused
/// rollout's reason with the resume button for roles that may write.
pub(crate) fn section(session: &Session, tenant: &Tenant, progress: &Progress) -> Markup {
    let kubernetes = &progress.kubernetes;
    html! {
        h2 #upgrade-heading { "Upgrades and reboots" }
        section #upgrade aria-labelledby="upgrade-heading" {
            p #upgrade-progress {
                (progress.done) " of " (progress.total) " machines at their desired Talos version"
            }
            p #kubernetes-progress {
                (kubernetes.done) " of " (kubernetes.total) " machines at Kubernetes " (kubernetes.version)
                @if let Some(from) = &kubernetes.from { ", upgrading from " (from) }
            }
            @if !progress.reboot_pending.is_empty() {
                p #reboots-pending {
                    "Waiting for a reboot to take a config change: " (progress.reboot_pending.join(", "))
                }
            }
            @if !progress.in_flight.is_empty() {
                ul #upgrade-in-flight aria-label="Machines in a rolling step" {
                    @for flight in &progress.in_flight {
                        li data-machine=(flight.machine) data-step=(flight.step.name()) {
                            (flight.machine) ": " (flight.step.what())
                            @if flight.step == Step::Reboot {
                                " for config " code { (flight.target) }
                            } @else {
                                " to " (flight.target)
                            }
                            @if let Some(since) = flight.since { ", since " (layout::timestamp(since)) }
                        }
                    }
                }
            }
            @for (kind, _, id) in PROCEDURES {
                @if let Some(condition) = tenant.status.conditions.iter().find(|condition| condition.kind == kind) {
                    p #(id) .procedure-condition data-condition=(kind) {
                        (kind) ": " (condition.status) " (" (condition.reason) ")"
                        @if !condition.message.is_empty() { ": " (condition.message) }
                    }
                }
            }
            (paused(session, tenant))
        }
    }
}

/// A paused rollout's notice: the reason, the procedure that paused, and
/// the resume button for roles that may write.
fn paused(session: &Session, tenant: &Tenant) -> Markup {
    let Some(value) = tenant.metadata.annotations.get(PAUSED) else { return html! {} };
    let condition =
        value.split_once(' ').map(|(_, condition)| condition.trim()).filter(|kind| !kind.is_empty());
    let procedure = condition.map(|kind| {
        let named = PROCEDURES.iter().find(|(known, ..)| *known == kind).map(|(_, what, _)| *what);
        (kind, named.unwrap_or("rolling procedure"))
    });
    let name = &tenant.metadata.name;
    html! {
        div #upgrade-paused .notice {
            p { "The rollout is paused: " (tenant.status.message.as_deref().unwrap_or("no reason was recorded")) }
            @if let Some((kind, what)) = procedure {
                p #paused-procedure data-condition=(kind) { "The " (what) " paused (condition " code { (kind) } ")." }
            }
            @if session.may(Permission::Write) {
                form #resume method="post" action={ "/tenants/" (name) "/resume" } {
                    (layout::csrf_field(session))
                    button type="submit" { "Resume the rollout" }
                }
            }
        }
    }
}

/// Resumes tenant `name`'s paused rollout.
pub(crate) async fn resume(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, _) = session::posted(console, request, Permission::Write).await?;
    let failed = |err| Failure::from(err).page(Some(&session));
    let object = console.tenancy.find(&Key::tenant(name)).map_err(failed)?;
    let mut tenant: Tenant = object.parse().map_err(|err| Failure::internal(&err).page(Some(&session)))?;
    if tenant.metadata.annotations.remove(PAUSED).is_some() {
        tenant.metadata.resource_version = Some(object.resource_version);
        console.tenancy.update_tenant(tenant).await.map_err(failed)?;
        tracing::info!(user = %session.caller.user, tenant = name, "resumed a paused rollout");
    }
    Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
}
