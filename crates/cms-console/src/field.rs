//! The form fields of the account pages (users and API tokens): a labelled
//! control with its hint and, when refused, its error, both linked with
//! `aria-describedby`; and how a refusal of `Authenticator` finds its field.

use cms_auth::AuthError;
use cms_model::FieldError;
use http::StatusCode;
use maud::{Markup, html};

use crate::failure::Failure;

/// One field of a form: the control's id, the form field's name, the JSON
/// path of the resource field it fills (as the API names it in errors), its
/// label and an optional hint.
pub(crate) struct Field {
    pub(crate) id: &'static str,
    pub(crate) name: &'static str,
    pub(crate) path: &'static str,
    pub(crate) label: &'static str,
    pub(crate) hint: Option<&'static str>,
}

impl Field {
    /// The error to show at this field, when `error` names it.
    pub(crate) fn error<'a>(&self, error: Option<&'a FieldError>) -> Option<&'a str> {
        error.filter(|error| error.field == self.path).map(|error| error.message.as_str())
    }

    /// The ids that describe the control: its hint and its error.
    pub(crate) fn described(&self, error: Option<&str>) -> Option<String> {
        let hint = self.hint.map(|_| format!("{}-hint", self.id));
        let error = error.map(|_| format!("{}-error", self.id));
        let ids: Vec<String> = hint.into_iter().chain(error).collect();
        (!ids.is_empty()).then(|| ids.join(" "))
    }

    /// A `div.field` with the label, the hint, `control` and the error.
    /// `control` carries the id, `aria-describedby` ([`Field::described`])
    /// and `aria-invalid` itself.
    pub(crate) fn wrap(&self, error: Option<&str>, control: Markup) -> Markup {
        html! {
            div .field .invalid[error.is_some()] data-field=(self.path) {
                label for=(self.id) { (self.label) }
                @if let Some(hint) = self.hint {
                    p .hint id={ (self.id) "-hint" } { (hint) }
                }
                (control)
                @if let Some(message) = error {
                    p .field-error id={ (self.id) "-error" } { (message) }
                }
            }
        }
    }

    /// A labelled text input of `kind` (`text`, `password`) holding `value`.
    pub(crate) fn input(&self, kind: &str, value: &str, error: Option<&str>) -> Markup {
        let control = html! {
            input id=(self.id) name=(self.name) type=(kind) value=(value) required
                autocomplete=[(kind == "password").then_some("new-password")]
                aria-describedby=[self.described(error)] aria-invalid=[error.map(|_| "true")];
        };
        self.wrap(error, control)
    }
}

/// How a form was refused: at a field, with the page shown again, or as a
/// failure page.
#[derive(Debug)]
pub(crate) enum Refusal {
    Field(StatusCode, FieldError),
    Page(Failure),
}

impl From<FieldError> for Refusal {
    fn from(error: FieldError) -> Refusal {
        Refusal::Field(StatusCode::UNPROCESSABLE_ENTITY, error)
    }
}

impl Refusal {
    /// The refusal of a create by `Authenticator`: a refused field at its
    /// field (422), a name that exists at the name field `name_path` (409),
    /// another 422 above the form, anything else as a failure page.
    pub(crate) fn of_create(err: AuthError, name_path: &str) -> Refusal {
        if let AuthError::Invalid(field) = err {
            return field.into();
        }
        match Failure::from(err) {
            failure if failure.status == StatusCode::CONFLICT => {
                Refusal::Field(failure.status, FieldError::new(name_path, failure.message))
            }
            failure if failure.status == StatusCode::UNPROCESSABLE_ENTITY => {
                Refusal::Field(failure.status, FieldError::new("", failure.message))
            }
            failure => Refusal::Page(failure),
        }
    }
}

/// `div#form-error`, which heads a refused form: what was not done, and the
/// message when it names none of `fields`.
pub(crate) fn form_error(what: &str, error: &FieldError, fields: &[&Field]) -> Markup {
    let placed = fields.iter().any(|field| field.path == error.field);
    html! {
        div #form-error .failure role="alert" {
            p { (what) }
            @if !placed { p { (error.message) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_store::StoreError;

    const NAME: Field =
        Field { id: "x-name", name: "name", path: "metadata.name", label: "Name", hint: None };

    #[test]
    fn refusals_find_their_field() {
        let exists = AuthError::Store(StoreError::AlreadyExists("user \"a\"".into()));
        match Refusal::of_create(exists, NAME.path) {
            Refusal::Field(status, field) => {
                assert_eq!(status, StatusCode::CONFLICT);
                assert_eq!(NAME.error(Some(&field)), Some(field.message.as_str()));
            }
            other => panic!("{other:?}"),
        }
        let invalid = AuthError::Invalid(FieldError::new("spec.password", "too short"));
        assert!(matches!(
            Refusal::of_create(invalid, NAME.path),
            Refusal::Field(StatusCode::UNPROCESSABLE_ENTITY, _)
        ));
        assert_eq!(NAME.described(Some("wrong")).as_deref(), Some("x-name-error"));
        assert_eq!(NAME.described(None), None);
    }
}
