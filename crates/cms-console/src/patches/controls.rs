//! The controls the create and edit forms of config patches share: the
//! format and target selects and the labelled patch body, with its hint
//! and refusal linked by `aria-describedby`.

use maud::{Markup, html};

use super::PatchProblem;
use crate::form::Form;

/// The format and target selects, with ids `<id>-format` and `<id>-target`.
pub(super) fn choices(id: &str, values: &Form) -> Markup {
    let formats =
        [("strategic", "strategic (machine-config documents)"), ("jsonpatch", "jsonpatch (RFC 6902)")];
    let targets = [("all", "all machines"), ("controlplane", "control planes"), ("worker", "workers")];
    html! {
        div .field data-field="spec.format" {
            label for={ (id) "-format" } { "Format" }
            select #{ (id) "-format" } name="format" {
                @for (value, label) in formats {
                    option value=(value) selected[values.get("format") == value] { (label) }
                }
            }
        }
        div .field data-field="spec.target" {
            label for={ (id) "-target" } { "Applies to" }
            select #{ (id) "-target" } name="target" {
                @for (value, label) in targets {
                    option value=(value) selected[values.get("target") == value] { (label) }
                }
            }
        }
    }
}

/// The patch body textarea `<id>-body`, with its hint and refusal.
pub(super) fn body_field(id: &str, text: &str, refused: Option<&PatchProblem>) -> Markup {
    let described = match refused {
        Some(_) => format!("{id}-body-hint {id}-body-error"),
        None => format!("{id}-body-hint"),
    };
    html! {
        div .field .invalid[refused.is_some()] data-field="spec.patches" {
            label for={ (id) "-body" } { "Patch" }
            p .hint id={ (id) "-body-hint" } {
                "YAML: one machine-config document, or a list of them; for jsonpatch, a list of RFC 6902 operations."
            }
            textarea .code id={ (id) "-body" } name="patches" rows="8" spellcheck="false"
                aria-invalid=[refused.map(|_| "true")] aria-describedby=(described) { (text) }
            @if let Some(problem) = refused {
                p .field-error id={ (id) "-body-error" } { (problem.message) }
            }
        }
    }
}
