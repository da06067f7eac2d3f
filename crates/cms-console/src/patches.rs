//! The tenant page's config patches: the list (name, format, target,
//! enabled or not, what refers to it, a preview) and, for roles that may
//! write, the forms that create, edit, enable or disable, and delete a
//! patch. The forms post to paths the audit record reads
//! (`/tenants/{name}/configpatches/...`) and are handled in
//! `patches/actions.rs`, through `Tenancy` as the API's
//! `/api/v1/tenants/{tenant}/configpatches` routes are.
//!
//! Whether a patch applies is its own `spec.enabled` (`cms_model`'s
//! `ConfigPatchSpec`), and that it is referenced by the tenant's or a node
//! group's `configPatches`; references are edited in the YAML editor.

mod actions;
mod controls;

pub(crate) use actions::{create, delete, edit, enable};
use controls::{body_field, choices};

use cms_auth::Permission;
use cms_model::{ConfigPatch, Kind, PatchFormat, PatchTarget, Tenant};
use maud::{Markup, html};
use serde_json::Value;

use crate::form::Form;
use crate::session::Session;
use crate::tenant::Problem;
use crate::{Console, layout, yaml};

/// How many characters of a patch the list shows.
const PREVIEW: usize = 60;

/// Which form of the section was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PatchForm {
    Create,
    Edit(String),
    Enable(String),
}

/// Which control a refusal is shown at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    Name,
    Body,
    /// The form as a whole.
    Form,
}

/// A refused config-patch form: where to show `message`, what the operator
/// had typed, and whether the patch changed since the page was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatchProblem {
    pub(crate) form: PatchForm,
    pub(crate) at: Control,
    pub(crate) message: String,
    pub(crate) values: Form,
    pub(crate) stale: bool,
}

impl PatchProblem {
    /// Whether the refused form is a row's button, whose refusal heads the
    /// section.
    fn in_row(&self) -> bool {
        matches!(self.form, PatchForm::Enable(_))
    }
}

/// The section of the tenant page for `tenant`'s config patches, showing
/// `problem` at its form.
pub(crate) fn section(console: &Console, session: &Session, tenant: &Tenant, problem: &Problem) -> Markup {
    let problem = match problem {
        Problem::Patch(problem) => Some(problem),
        _ => None,
    };
    let name = &tenant.metadata.name;
    let patches: Vec<(u64, ConfigPatch)> = console
        .store()
        .all(Kind::ConfigPatch, Some(name.clone()))
        .iter()
        .filter_map(|object| object.parse().ok().map(|patch| (object.resource_version, patch)))
        .collect();
    let view = View { session, tenant, problem };
    let may_write = session.may(Permission::Write);
    let may_delete = session.may(Permission::Delete);
    html! {
        h2 #config-patches-heading { "Config patches" }
        @if let Some(problem) = problem.filter(|problem| problem.at == Control::Form && problem.in_row()) {
            div #config-patches-error .failure role="alert" {
                p { (problem.message) }
                @if problem.stale { p { a #reload-patches href={ "/tenants/" (name) } { "Reload the page" } } }
            }
        }
        @if patches.is_empty() {
            p #no-config-patches { "The tenant has no config patches." }
        } @else {
            table #config-patches aria-labelledby="config-patches-heading" {
                thead {
                    tr {
                        th scope="col" { "Name" }
                        th scope="col" { "Format" }
                        th scope="col" { "Target" }
                        th scope="col" { "State" }
                        th scope="col" { "Referenced by" }
                        th scope="col" { "Preview" }
                        @if may_write || may_delete { th scope="col" { "Actions" } }
                    }
                }
                tbody {
                    @for (version, patch) in &patches { (view.row(*version, patch, may_write, may_delete)) }
                }
            }
            @if may_write {
                @for (version, patch) in &patches { (view.edit_form(*version, patch)) }
            }
        }
        @if may_write { (view.create_form()) }
    }
}

struct View<'a> {
    session: &'a Session,
    tenant: &'a Tenant,
    problem: Option<&'a PatchProblem>,
}

impl View<'_> {
    fn tenant_name(&self) -> &str {
        &self.tenant.metadata.name
    }

    /// The refusal of `form`, when that form was refused.
    fn refused(&self, form: &PatchForm) -> Option<&PatchProblem> {
        self.problem.filter(|problem| problem.form == *form)
    }

    fn row(&self, version: u64, patch: &ConfigPatch, may_write: bool, may_delete: bool) -> Markup {
        let name = &patch.metadata.name;
        let action = format!("/tenants/{}/configpatches/{name}", self.tenant_name());
        let state = if patch.spec.enabled { "enabled" } else { "disabled" };
        html! {
            tr data-config-patch=(name) {
                th scope="row" .name { (name) }
                td .format { (format_name(patch.spec.format)) }
                td .target { (target_name(patch.spec.target)) }
                td .state data-enabled=(patch.spec.enabled) { (state) }
                td .referenced { (referenced_by(self.tenant, name)) }
                td .preview { code { (preview(&patch.spec.patches)) } }
                @if may_write || may_delete {
                    td .actions {
                        @if may_write {
                            form .enable-patch method="post" action={ (action) "/enable" } {
                                (layout::csrf_field(self.session))
                                input type="hidden" name="resourceVersion" value=(version);
                                input type="hidden" name="enabled" value=(!patch.spec.enabled);
                                button type="submit" {
                                    @if patch.spec.enabled { "Disable " } @else { "Enable " } (name)
                                }
                            }
                        }
                        @if may_delete {
                            form .delete-patch method="post" action={ (action) "/delete" } {
                                (layout::csrf_field(self.session))
                                button .danger type="submit" { "Delete " (name) }
                            }
                        }
                    }
                }
            }
        }
    }

    fn edit_form(&self, version: u64, patch: &ConfigPatch) -> Markup {
        let name = &patch.metadata.name;
        let refused = self.refused(&PatchForm::Edit(name.clone()));
        let values = match refused {
            Some(problem) => problem.values.clone(),
            None => {
                let version = version.to_string();
                let body = body_text(&patch.spec.patches);
                Form::of(&[
                    ("resourceVersion", version.as_str()),
                    ("format", format_name(patch.spec.format)),
                    ("target", target_name(patch.spec.target)),
                    ("patches", body.as_str()),
                ])
            }
        };
        let id = format!("patch-{name}");
        html! {
            details .edit-patch #{ (id) "-editor" } open[refused.is_some()] {
                summary { "Edit " (name) }
                form .stacked method="post" action={ "/tenants/" (self.tenant_name()) "/configpatches/" (name) "/edit" } {
                    (layout::csrf_field(self.session))
                    input type="hidden" name="resourceVersion" value=(values.get("resourceVersion"));
                    @if refused.is_some_and(|problem| problem.stale) {
                        div .failure role="alert" #{ (id) "-stale" } {
                            p { "This config patch changed since you opened it, so it was not saved. Your text is kept below." }
                            p { a href={ "/tenants/" (self.tenant_name()) } { "Reload the page" } " to edit the current version." }
                        }
                    } @else if let Some(problem) = refused.filter(|problem| problem.at == Control::Form) {
                        div .failure role="alert" { p { (problem.message) } }
                    }
                    (choices(&id, &values))
                    (body_field(&id, values.get("patches"), refused.filter(|problem| problem.at == Control::Body)))
                    button type="submit" { "Save " (name) }
                }
            }
        }
    }

    fn create_form(&self) -> Markup {
        let refused = self.refused(&PatchForm::Create);
        let defaults = Form::of(&[("format", "strategic"), ("target", "all")]);
        let values = refused.map_or(&defaults, |problem| &problem.values);
        let name_error = refused.filter(|problem| problem.at == Control::Name);
        html! {
            h3 #create-config-patch-heading { "Add a config patch" }
            form #create-config-patch .stacked method="post" aria-labelledby="create-config-patch-heading"
                action={ "/tenants/" (self.tenant_name()) "/configpatches/new" } novalidate {
                (layout::csrf_field(self.session))
                @if let Some(problem) = refused.filter(|problem| problem.at == Control::Form) {
                    div .failure role="alert" { p { (problem.message) } }
                }
                div .field .invalid[name_error.is_some()] data-field="metadata.name" {
                    label for="patch-name" { "Name" }
                    p .hint #patch-name-hint { "Lowercase letters, digits and '-', up to 63 characters." }
                    input #patch-name name="name" type="text" required value=(values.get("name"))
                        aria-invalid=[name_error.map(|_| "true")]
                        aria-describedby={ "patch-name-hint" @if name_error.is_some() { " patch-name-error" } };
                    @if let Some(problem) = name_error {
                        p .field-error #patch-name-error { (problem.message) }
                    }
                }
                (choices("patch", values))
                (body_field("patch", values.get("patches"), refused.filter(|problem| problem.at == Control::Body)))
                button type="submit" { "Add config patch" }
            }
        }
    }
}

/// What refers to patch `name`: the tenant's spec, its node groups.
fn referenced_by(tenant: &Tenant, name: &str) -> String {
    let spec = &tenant.spec;
    let by_tenant = spec.config_patches.iter().any(|reference| reference.name == name);
    let groups = spec
        .node_groups
        .iter()
        .flatten()
        .filter(|group| group.config_patches.iter().any(|reference| reference.name == name));
    let mut referrers: Vec<String> = by_tenant.then(|| "the tenant".to_string()).into_iter().collect();
    referrers.extend(groups.map(|group| format!("node group {}", group.name)));
    if referrers.is_empty() { "nothing (not applied)".to_string() } else { referrers.join(", ") }
}

/// The start of the patch as one line of JSON.
fn preview(patches: &[Value]) -> String {
    let text = serde_json::to_string(patches).unwrap_or_default();
    match text.char_indices().nth(PREVIEW) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// The patch body as the textarea shows it: one document alone, several as
/// a list, the shapes [`actions`] reads back.
pub(crate) fn body_text(patches: &[Value]) -> String {
    match patches {
        [one] => yaml::write(one),
        many => yaml::write(&many),
    }
}

pub(crate) fn format_name(format: PatchFormat) -> &'static str {
    match format {
        PatchFormat::Strategic => "strategic",
        PatchFormat::JsonPatch => "jsonpatch",
    }
}

pub(crate) fn target_name(target: PatchTarget) -> &'static str {
    match target {
        PatchTarget::All => "all",
        PatchTarget::ControlPlane => "controlplane",
        PatchTarget::Worker => "worker",
    }
}
