//! The tenant page's upgrade section, and `POST /tenants/{name}/resume`.
//!
//! The section shows how far the Talos rollout is (`n of m` machines at
//! their desired version), the machines in flight with the version they
//! go to and since when, the reconciler's `Upgrading` condition, and a
//! paused rollout's reason with a button that resumes it. Resuming is what
//! `docs/upgrades.md` tells an API user to do: the tenant replaced without
//! its `service.io/rollout-paused` annotation, at the version just read,
//! through `Tenancy` (`Write`).

use chrono::{DateTime, Utc};
use cms_auth::Permission;
use cms_model::{Machine, NodeGroup, Tenant};
use cms_store::Key;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::{Console, Request, layout};

/// On a tenant whose rollout is paused: the generation it paused at. The
/// reconciler writes it (`cms_reconciler::PAUSED_ANNOTATION`).
pub(crate) const PAUSED: &str = "service.io/rollout-paused";
/// On a machine being upgraded: `<version> <started at>`
/// (`cms_reconciler::UPGRADING_ANNOTATION`).
pub(crate) const UPGRADING: &str = "service.io/upgrading-to";
/// The condition the reconciler keeps on a tenant while it rolls out.
const CONDITION: &str = "Upgrading";

/// Where a tenant's Talos rollout stands, as its stored machines show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Machines that run their desired version.
    pub(crate) done: usize,
    /// Machines that have a desired version.
    pub(crate) total: usize,
    /// Machines being upgraded: name, target version, and since when.
    pub(crate) in_flight: Vec<(String, String, Option<DateTime<Utc>>)>,
}

/// The progress of `tenant`'s machines toward their desired versions: a
/// machine's node group's `talosVersion` (the resource's, else the inline
/// group's), else the tenant's, else `default_talos`.
pub(crate) fn progress(
    tenant: &Tenant,
    groups: &[NodeGroup],
    machines: &[Machine],
    default_talos: &str,
) -> Progress {
    let mut progress = Progress { done: 0, total: 0, in_flight: Vec::new() };
    for machine in machines.iter().filter(|machine| machine.metadata.deletion_timestamp.is_none()) {
        let want = desired(tenant, groups, machine.spec.node_group.as_deref()).unwrap_or(default_talos);
        progress.total += 1;
        if let Some(value) = machine.metadata.annotations.get(UPGRADING) {
            let (version, since) = value.split_once(' ').unwrap_or((value.as_str(), ""));
            let since = DateTime::parse_from_rfc3339(since).ok().map(|time| time.with_timezone(&Utc));
            progress.in_flight.push((machine.metadata.name.clone(), version.to_string(), since));
        } else if machine.status.talos_version.as_deref().is_some_and(|running| same(running, want)) {
            progress.done += 1;
        }
    }
    progress
}

fn desired<'a>(tenant: &'a Tenant, groups: &'a [NodeGroup], group: Option<&str>) -> Option<&'a str> {
    let group = group?;
    let resource = groups.iter().find(|candidate| candidate.metadata.name == group);
    let inline = tenant.spec.node_groups.iter().flatten().find(|candidate| candidate.name == group);
    resource
        .and_then(|found| found.spec.talos_version.as_deref())
        .or_else(|| inline.and_then(|found| found.talos_version.as_deref()))
        .or(tenant.spec.talos_version.as_deref())
}

fn same(a: &str, b: &str) -> bool {
    a.trim_start_matches('v') == b.trim_start_matches('v')
}

/// The section: progress, machines in flight, the condition, and a paused
/// rollout's reason with the resume button for roles that may write.
pub(crate) fn section(session: &Session, tenant: &Tenant, progress: &Progress) -> Markup {
    let name = &tenant.metadata.name;
    let paused = tenant.metadata.annotations.contains_key(PAUSED);
    let condition = tenant.status.conditions.iter().find(|condition| condition.kind == CONDITION);
    html! {
        h2 #upgrade-heading { "Upgrade" }
        section #upgrade aria-labelledby="upgrade-heading" {
            p #upgrade-progress {
                (progress.done) " of " (progress.total) " machines at their desired Talos version"
            }
            @if !progress.in_flight.is_empty() {
                ul #upgrade-in-flight aria-label="Machines being upgraded" {
                    @for (machine, version, since) in &progress.in_flight {
                        li data-machine=(machine) {
                            (machine) " to " (version)
                            @if let Some(since) = since { ", since " (layout::timestamp(*since)) }
                        }
                    }
                }
            }
            @if let Some(condition) = condition {
                p #upgrade-condition {
                    "Upgrading: " (condition.status) " (" (condition.reason) ")"
                    @if !condition.message.is_empty() { ": " (condition.message) }
                }
            }
            @if paused {
                div #upgrade-paused .notice {
                    p { "The rollout is paused: " (tenant.status.message.as_deref().unwrap_or("no reason was recorded")) }
                    @if session.may(Permission::Write) {
                        form #resume method="post" action={ "/tenants/" (name) "/resume" } {
                            (layout::csrf_field(session))
                            button type="submit" { "Resume the rollout" }
                        }
                    }
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
