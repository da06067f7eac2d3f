//! The tenant page's machines, and
//! `POST /tenants/{name}/machines/{id}/replace`.
//!
//! The list marks the machines that need an operator, in words beside the
//! stage: one `off` (it stopped answering the node API; the tenant's
//! `MachinesConnected` condition names it too) and one
//! `awaiting-replacement` (the host at its address does not answer as the
//! tenant's node: a replaced host or an impostor, which the service cannot
//! tell apart). Below the list, each machine awaiting replacement shows its
//! message and, to roles that may delete machines, a form that confirms the
//! replacement: typed the machine's id, it deletes the machine as
//! `DELETE /api/v1/tenants/{tenant}/machines/{id}` does (`Delete`, through
//! `Tenancy::delete`, the same store delete). The machine then leaves etcd
//! and the cluster, and the host at its address is configured anew.

use cms_auth::Permission;
use cms_model::{Kind, Machine, NodeGroup, NodeGroupSpec};
use cms_store::Key;
use http::StatusCode;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::layout::{self, timestamp};
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::summary::yes_no;
use crate::tenant::{self, Problem};
use crate::{Console, Request};

/// The stage of a machine that stopped answering
/// (`cms_reconciler::STAGE_OFF`).
pub(crate) const STAGE_OFF: &str = "off";
/// The stage of a machine whose host does not answer as the tenant's node
/// (`cms_reconciler::STAGE_UNRECOGNIZED`).
pub(crate) const STAGE_AWAITING_REPLACEMENT: &str = "awaiting-replacement";

/// What the page shows of a tenant's machines.
pub(crate) struct Machines<'a> {
    pub(crate) session: &'a Session,
    pub(crate) tenant: &'a str,
    pub(crate) groups: &'a [NodeGroup],
    pub(crate) machines: &'a [Machine],
    pub(crate) problem: &'a Problem,
    /// A machine whose replacement was just confirmed.
    pub(crate) replaced: Option<&'a str>,
}

impl Machines<'_> {
    /// The heading, the confirmation notice, the machines that need an
    /// operator, the list, and the machines awaiting replacement.
    pub(crate) fn section(&self) -> Markup {
        html! {
            h2 #machines-heading { "Machines" }
            @if let Some(machine) = self.replaced {
                p #replacement-confirmed .notice role="status" {
                    "Replacement of machine " (machine) " confirmed: it leaves etcd and the cluster, and the \
                     host at its address is configured anew."
                }
            }
            (self.attention())
            @if self.machines.is_empty() {
                p #no-machines { "The tenant has no machines yet." }
            } @else {
                (self.table())
            }
            (self.replacements())
        }
    }

    fn at_stage(&self, stage: &str) -> Vec<&str> {
        let machines = self.machines.iter().filter(|machine| machine.status.stage == stage);
        machines.map(|machine| machine.metadata.name.as_str()).collect()
    }

    /// A notice naming the machines that are off or awaiting replacement.
    fn attention(&self) -> Markup {
        let off = self.at_stage(STAGE_OFF);
        let awaiting = self.at_stage(STAGE_AWAITING_REPLACEMENT);
        if off.is_empty() && awaiting.is_empty() {
            return html! {};
        }
        html! {
            div #machines-attention .notice {
                @if !off.is_empty() {
                    p #machines-off { "Off, not answering the node API: " (off.join(", ")) }
                }
                @if !awaiting.is_empty() {
                    p #machines-awaiting-replacement {
                        "Awaiting a confirmed replacement: " (awaiting.join(", "))
                    }
                }
            }
        }
    }

    fn table(&self) -> Markup {
        let groups: Vec<NodeGroupSpec> = self.groups.iter().map(|group| group.spec.clone()).collect();
        html! {
            table #machines aria-labelledby="machines-heading" {
                thead {
                    tr {
                        th scope="col" { "ID" }
                        th scope="col" { "Group" }
                        th scope="col" { "Role" }
                        th scope="col" { "Stage" }
                        th scope="col" { "Ready" }
                        th scope="col" { "Address" }
                        th scope="col" { "Talos version" }
                        th scope="col" { "Kubernetes version" }
                        th scope="col" { "Message" }
                    }
                }
                tbody {
                    @for machine in self.machines {
                        tr data-machine=(machine.metadata.name) class=[needs_operator(machine).then_some("attention")] {
                            th scope="row" .id {
                                a href={ "/tenants/" (self.tenant) "/machines/" (machine.metadata.name) } {
                                    (machine.metadata.name)
                                }
                            }
                            td .group { (machine.spec.node_group.as_deref().unwrap_or("")) }
                            td .role { (machine.role(&groups).map(|role| role.as_str()).unwrap_or("")) }
                            td .stage data-stage=(machine.status.stage) { (stage(machine)) }
                            td .ready { (yes_no(machine.status.ready)) }
                            td .address { (machine.spec.management_address.as_deref().unwrap_or("")) }
                            td .talos { (machine.status.talos_version.as_deref().unwrap_or("")) }
                            td .kubernetes { (machine.status.kubernetes_version.as_deref().unwrap_or("")) }
                            td .message { (machine.status.message.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }

    /// Each machine awaiting replacement: its message and the form that
    /// confirms the replacement.
    fn replacements(&self) -> Markup {
        let awaiting: Vec<&Machine> = self
            .machines
            .iter()
            .filter(|machine| machine.status.stage == STAGE_AWAITING_REPLACEMENT)
            .collect();
        if awaiting.is_empty() {
            return html! {};
        }
        html! {
            section #replacements aria-labelledby="replacements-heading" {
                h3 #replacements-heading { "Awaiting replacement" }
                p .hint {
                    "The host at each of these machines' addresses does not answer as the tenant's node: \
                     a replaced host, or an impostor, which the service cannot tell apart, so it sends \
                     the host nothing. If you replaced the host, confirm it: the machine is deleted, it \
                     leaves etcd and the cluster, and the host at its address is configured anew. If \
                     you did not, find out what answers at that address."
                }
                @for machine in awaiting { (self.replacement(machine)) }
            }
        }
    }

    fn replacement(&self, machine: &Machine) -> Markup {
        let id = &machine.metadata.name;
        let field = format!("confirm-replace-{id}");
        let error = match self.problem {
            Problem::Replace { machine, message } if machine == id => Some(message.as_str()),
            _ => None,
        };
        let address = machine.spec.management_address.as_deref().unwrap_or("an unknown address");
        html! {
            div .replacement #{ "replace-" (id) } data-machine=(id) {
                p .machine { strong { (id) } " at " (address) }
                p .message { (machine.status.message.as_deref().unwrap_or("No message was recorded.")) }
                @if let Some(since) = machine.metadata.deletion_timestamp {
                    p .confirmed { "Replacement confirmed " (timestamp(since)) "; the machine is leaving." }
                } @else if self.session.may(Permission::Delete) {
                    form .confirm-replacement .stacked method="post" data-name=(id)
                        action={ "/tenants/" (self.tenant) "/machines/" (id) "/replace" } {
                        (layout::csrf_field(self.session))
                        div .field data-field="confirm" {
                            label for=(field) {
                                "Type the machine's ID, " code { (id) } ", to confirm that its host was replaced"
                            }
                            input #(field) name="confirm" type="text" autocomplete="off" required
                                aria-invalid=[error.map(|_| "true")]
                                aria-describedby=[error.map(|_| format!("{field}-error"))];
                            @if let Some(message) = error {
                                p .field-error id={ (field) "-error" } { (message) }
                            }
                        }
                        button .danger type="submit" { "Confirm replacement" }
                    }
                } @else {
                    p .hint { "A role that may delete machines can confirm the replacement." }
                }
            }
        }
    }
}

/// Whether the machine waits for an operator: off, or awaiting replacement.
fn needs_operator(machine: &Machine) -> bool {
    matches!(machine.status.stage.as_str(), STAGE_OFF | STAGE_AWAITING_REPLACEMENT)
}

/// The stage cell: the stage, and for a machine that needs an operator a
/// badge and what it means in words.
fn stage(machine: &Machine) -> Markup {
    let id = &machine.metadata.name;
    html! {
        @match machine.status.stage.as_str() {
            STAGE_OFF => {
                strong .badge .badge-off { (STAGE_OFF) }
                " " span .stage-note { "not answering the node API" }
            }
            STAGE_AWAITING_REPLACEMENT => {
                strong .badge .badge-replacement { (STAGE_AWAITING_REPLACEMENT) }
                " " span .stage-note { a href={ "#replace-" (id) } { "the host does not answer as this node" } }
            }
            stage => (stage),
        }
    }
}

/// Confirms that the host of machine `id` of tenant `name` was replaced:
/// when the form's `confirm` is the id, the machine is deleted as the
/// API's machine DELETE deletes it.
pub(crate) async fn confirm_replacement(
    console: &Console,
    request: &Request,
    name: &str,
    id: &str,
) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::Delete).await?;
    let key = Key::child(Kind::Machine, name, id);
    let object = console.tenancy.find(&key).map_err(|err| Failure::from(err).page(Some(&session)))?;
    let machine: Machine = object.parse().map_err(|err| Failure::internal(&err).page(Some(&session)))?;
    let done = reply::redirect(&format!("/tenants/{name}?replaced={}#machines-heading", encoded(id)));
    if machine.metadata.deletion_timestamp.is_some() {
        return Ok(session.mark(done));
    }
    if machine.status.stage != STAGE_AWAITING_REPLACEMENT {
        let stage = Some(machine.status.stage.as_str()).filter(|stage| !stage.is_empty()).unwrap_or("unset");
        let message = format!(
            "Machine {id} no longer awaits a replacement (its stage is {stage}), so nothing was deleted. \
             Reload the tenant's page to see where it stands."
        );
        return Err(Failure::new(StatusCode::CONFLICT, message).page(Some(&session)).into());
    }
    if form.get("confirm").trim() != id {
        let message = format!("Type {id} exactly to confirm the replacement; nothing was deleted.");
        let problem = Problem::Replace { machine: id.to_string(), message };
        return tenant::render(console, &session, name, StatusCode::UNPROCESSABLE_ENTITY, &problem).await;
    }
    console.tenancy.delete(key).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    tracing::info!(user = %session.caller.user, tenant = name, machine = id, "confirmed a machine's replacement");
    Ok(session.mark(done))
}

/// `value` as a query string value.
fn encoded(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
