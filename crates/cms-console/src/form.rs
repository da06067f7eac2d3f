//! Posted forms (`application/x-www-form-urlencoded`) and query strings, as
//! name and value pairs.

use http::StatusCode;
use http::header::CONTENT_TYPE;

use crate::Request;
use crate::failure::Failure;
use crate::reply::Refused;

/// The fields of a form or a query string, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Form {
    fields: Vec<(String, String)>,
}

impl Form {
    /// The posted form of `request`. A body of another type is refused
    /// with `415`.
    pub(crate) fn posted(request: &Request) -> Result<Form, Refused> {
        let body = request.body();
        let content_type = request.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok());
        let is_form = content_type
            .and_then(|value| value.split(';').next())
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"));
        if !is_form && !body.is_empty() {
            let message = "Forms are sent as application/x-www-form-urlencoded.";
            return Err(Failure::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message).page(None).into());
        }
        Ok(Form::parse(body))
    }

    /// The query string of `request`.
    pub(crate) fn query(request: &Request) -> Form {
        Form::parse(request.uri().query().unwrap_or_default().as_bytes())
    }

    /// A form holding `fields`, such as a form's first values.
    pub(crate) fn of(fields: &[(&str, &str)]) -> Form {
        Form { fields: fields.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect() }
    }

    fn parse(bytes: &[u8]) -> Form {
        Form { fields: form_urlencoded::parse(bytes).into_owned().collect() }
    }

    /// The first value of `name`, or `""`.
    pub(crate) fn get(&self, name: &str) -> &str {
        self.fields.iter().find(|(field, _)| field == name).map_or("", |(_, value)| value.as_str())
    }

    /// The first value of `name`, trimmed, or `None` when it is blank.
    pub(crate) fn optional(&self, name: &str) -> Option<&str> {
        Some(self.get(name).trim()).filter(|value| !value.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_decoded() {
        let form = Form::parse(b"name=a+b&hosts=10.0.0.1%0D%0A10.0.0.2&blank=+&name=second");
        assert_eq!(form.get("name"), "a b");
        assert_eq!(form.get("hosts"), "10.0.0.1\r\n10.0.0.2");
        assert_eq!(form.get("missing"), "");
        assert_eq!(form.optional("blank"), None);
        assert_eq!(form.optional("name"), Some("a b"));
    }
}
