//! Request bodies: the JSON body extractor (media type and size checks) and
//! the parse into a typed resource (400 for malformed JSON, 422 naming the
//! field). The rules beyond parsing are `cms_tenancy`'s.

use actix_web::dev::Payload;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{FromRequest, HttpRequest, web};
use bytes::{Bytes, BytesMut};
use cms_model::{ObjectMeta, parse_json};
use cms_tenancy::Writable;
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::{AppState, ServiceOptions};

/// The raw bytes of an `application/json` body within the size limit.
#[derive(Debug)]
pub(crate) struct JsonBody(pub(crate) Bytes);

impl JsonBody {
    /// Parses the body as `T`: 400 for malformed JSON, 422 naming the field
    /// for JSON that does not fit.
    pub(crate) fn parse<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        Ok(parse_json(&self.0)?)
    }

    /// Parses a replacement for the object named `path_name`, which the
    /// body must name too (400 otherwise).
    pub(crate) fn for_update<R: Writable + DeserializeOwned>(&self, path_name: &str) -> Result<R, ApiError> {
        let resource: R = self.parse()?;
        check_name(path_name, resource.metadata())?;
        Ok(resource)
    }
}

/// Checks that a PUT's body names the object in the path (400 otherwise).
fn check_name(path_name: &str, metadata: &ObjectMeta) -> Result<(), ApiError> {
    if metadata.name != path_name {
        return Err(ApiError::BadRequest(format!(
            "metadata.name {:?} does not match the name {path_name:?} in the path",
            metadata.name
        )));
    }
    Ok(())
}

/// Checks what a PUT of a record outside `cms-tenancy` (a user, a machine's
/// status) needs: the body names the object in the path (400) and carries
/// the `resourceVersion` it was read at (422).
pub(crate) fn check_update(path_name: &str, metadata: &ObjectMeta) -> Result<u64, ApiError> {
    check_name(path_name, metadata)?;
    Ok(metadata.read_at()?)
}

impl FromRequest for JsonBody {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<JsonBody, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let limit = req
            .app_data::<web::Data<AppState>>()
            .map_or(ServiceOptions::DEFAULT_BODY_LIMIT, |state| state.options.body_limit);
        if let Err(err) = check_media_type(req) {
            return Box::pin(async move { Err(err) });
        }
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<usize>().ok());
        if declared.is_some_and(|length| length > limit) {
            return Box::pin(async move { Err(ApiError::PayloadTooLarge { limit }) });
        }
        let mut payload = payload.take();
        Box::pin(async move {
            let mut buffer = BytesMut::with_capacity(declared.unwrap_or(0));
            while let Some(chunk) = payload.next().await {
                let chunk = chunk
                    .map_err(|err| ApiError::BadRequest(format!("could not read the request body: {err}")))?;
                if buffer.len() + chunk.len() > limit {
                    return Err(ApiError::PayloadTooLarge { limit });
                }
                buffer.extend_from_slice(&chunk);
            }
            Ok(JsonBody(buffer.freeze()))
        })
    }
}

/// Accepts `application/json`, with parameters such as `charset`.
fn check_media_type(req: &HttpRequest) -> Result<(), ApiError> {
    let value = req.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok());
    let essence = value.map(|value| value.split(';').next().unwrap_or_default().trim());
    match essence {
        Some(essence) if essence.eq_ignore_ascii_case("application/json") => Ok(()),
        Some(other) => Err(ApiError::UnsupportedMediaType(format!(
            "content type {other:?} is not supported: send application/json"
        ))),
        None => Err(ApiError::UnsupportedMediaType(
            "the request has no content type: send application/json".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_model::Tenant;

    #[test]
    fn replacements_name_the_object_in_the_path() {
        let body = JsonBody(Bytes::from_static(
            br#"{"metadata":{"name":"a","resourceVersion":2},"spec":{"kubernetesVersion":"1.31.0"}}"#,
        ));
        assert!(matches!(body.for_update::<Tenant>("b"), Err(ApiError::BadRequest(_))));
        let tenant: Tenant = body.for_update("a").expect("parses");
        assert_eq!(tenant.metadata.resource_version, Some(2));
    }

    #[test]
    fn updates_need_the_path_name_and_a_version() {
        let mut meta = ObjectMeta::named("a");
        assert!(matches!(check_update("b", &meta), Err(ApiError::BadRequest(_))));
        let Err(ApiError::Invalid(message)) = check_update("a", &meta) else { panic!("accepted") };
        assert!(message.starts_with("metadata.resourceVersion"), "{message}");
        meta.resource_version = Some(3);
        assert_eq!(check_update("a", &meta).ok(), Some(3));
    }
}
