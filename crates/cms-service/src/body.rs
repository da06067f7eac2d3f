//! Request bodies: the JSON body extractor (media type and size checks), the
//! parse into a typed resource, and the turn of a resource into a store draft.

use actix_web::dev::Payload;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{FromRequest, HttpRequest, web};
use bytes::{Bytes, BytesMut};
use cms_model::{ConfigPatch, FieldError, NodeGroup, ObjectMeta, Resource, Tenant, parse_json};
use cms_store::Draft;
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::secrets::check_talos_version;
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

    /// Parses and checks a resource to create: its name and its draft.
    pub(crate) fn for_create<Spec, Status>(&self) -> Result<(String, Draft), ApiError>
    where
        Resource<Spec, Status>: Prepare + DeserializeOwned,
        Spec: Serialize,
    {
        let mut resource: Resource<Spec, Status> = self.parse()?;
        resource.prepare()?;
        let name = resource.metadata.name.clone();
        Ok((name, draft(resource)?))
    }

    /// Parses and checks a replacement for the object named `path_name`:
    /// its draft and the `resourceVersion` it was read at.
    pub(crate) fn for_update<Spec, Status>(&self, path_name: &str) -> Result<(Draft, u64), ApiError>
    where
        Resource<Spec, Status>: Prepare + DeserializeOwned,
        Spec: Serialize,
    {
        let mut resource: Resource<Spec, Status> = self.parse()?;
        let expected = check_update(path_name, &resource.metadata)?;
        resource.prepare()?;
        Ok((draft(resource)?, expected))
    }
}

/// A resource that users write: it normalizes and checks itself.
pub(crate) trait Prepare {
    fn prepare(&mut self) -> Result<(), FieldError>;
}

/// Tenants and node groups also need a Talos version that cms renders
/// configs for; config patches must apply (Talos merge rules), so a broken
/// one is refused on write rather than found at render time.
impl Prepare for Tenant {
    fn prepare(&mut self) -> Result<(), FieldError> {
        Tenant::prepare(self)?;
        if let Some(version) = &self.spec.talos_version {
            check_talos_version("spec.talosVersion", version)?;
        }
        for (index, group) in self.spec.node_groups.iter().flatten().enumerate() {
            if let Some(version) = &group.talos_version {
                check_talos_version(&format!("spec.nodeGroups[{index}].talosVersion"), version)?;
            }
        }
        Ok(())
    }
}

impl Prepare for NodeGroup {
    fn prepare(&mut self) -> Result<(), FieldError> {
        NodeGroup::prepare(self)?;
        match &self.spec.talos_version {
            Some(version) => check_talos_version("spec.talosVersion", version),
            None => Ok(()),
        }
    }
}

impl Prepare for ConfigPatch {
    fn prepare(&mut self) -> Result<(), FieldError> {
        ConfigPatch::prepare(self)?;
        cms_talos::check_patch(&self.spec)
    }
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

/// Checks what a PUT needs: the body names the object in the path (400
/// otherwise) and carries the `resourceVersion` it was read at (422).
pub(crate) fn check_update(path_name: &str, metadata: &ObjectMeta) -> Result<u64, ApiError> {
    if metadata.name != path_name {
        return Err(ApiError::BadRequest(format!(
            "metadata.name {:?} does not match the name {path_name:?} in the path",
            metadata.name
        )));
    }
    metadata.resource_version.ok_or_else(|| {
        ApiError::Invalid(
            "metadata.resourceVersion: is required on update; read the object and send its version back"
                .to_string(),
        )
    })
}

/// Turns a checked resource into what the store writes. Status is never
/// taken from a request body.
pub(crate) fn draft<Spec: Serialize, Status>(resource: Resource<Spec, Status>) -> Result<Draft, ApiError> {
    let spec = serde_json::to_value(&resource.spec).map_err(|err| ApiError::internal(&err))?;
    Ok(Draft {
        labels: resource.metadata.labels,
        annotations: resource.metadata.annotations,
        spec,
        status: None,
        secrets: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_model::{TenantSpec, TenantStatus};

    #[test]
    fn tenant_drafts_keep_absent_node_groups_absent() {
        let body = JsonBody(Bytes::from_static(
            br#"{"metadata":{"name":"a","labels":{"team":"x"}},"spec":{"kubernetesVersion":"1.31.0"}}"#,
        ));
        let (name, draft) = body.for_create::<TenantSpec, TenantStatus>().expect("drafts");
        assert_eq!(name, "a");
        assert!(draft.spec.get("nodeGroups").is_none(), "{}", draft.spec);
        assert_eq!(draft.labels.get("team").map(String::as_str), Some("x"));
        assert_eq!(draft.status, None);

        let body = JsonBody(Bytes::from_static(
            br#"{"metadata":{"name":"a","resourceVersion":2},"spec":{"kubernetesVersion":"1.31.0","nodeGroups":[]}}"#,
        ));
        let (draft, expected) = body.for_update::<TenantSpec, TenantStatus>("a").expect("drafts");
        assert_eq!(expected, 2);
        assert_eq!(draft.spec["nodeGroups"], serde_json::json!([]));
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
