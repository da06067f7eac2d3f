//! Success responses. Objects are sent as the bytes the store serialized
//! once; lists are stitched together from them, never re-serialized.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use bytes::{BufMut, Bytes, BytesMut};
use cms_store::{Deleted, Listing, Object};
use serde::Serialize;

use crate::error::ApiError;

/// A response whose body is already JSON.
pub(crate) fn json(status: StatusCode, body: Bytes) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")))
        .body(body)
}

/// One object, as stored.
pub(crate) fn object(status: StatusCode, object: &Object) -> HttpResponse {
    json(status, object.json.clone())
}

/// A page of objects: `{"items":[...],"total":N}`.
pub(crate) fn listing(listing: &Listing) -> HttpResponse {
    let size: usize = listing.items.iter().map(|item| item.json.len() + 1).sum();
    let mut body = BytesMut::with_capacity(size + 32);
    body.put_slice(b"{\"items\":[");
    for (index, item) in listing.items.iter().enumerate() {
        if index > 0 {
            body.put_u8(b',');
        }
        body.put_slice(&item.json);
    }
    body.put_slice(b"],\"total\":");
    body.put_slice(listing.total.to_string().as_bytes());
    body.put_u8(b'}');
    json(StatusCode::OK, body.freeze())
}

/// A value serialized now, for the few bodies the store does not hold.
pub(crate) fn serialized<T: Serialize>(status: StatusCode, value: &T) -> Result<HttpResponse, ApiError> {
    let body = serde_json::to_vec(value).map_err(|err| ApiError::internal(&err))?;
    Ok(json(status, Bytes::from(body)))
}

/// A YAML document to save as `file_name`. It holds credentials, so no
/// cache may keep it.
pub(crate) fn yaml_download(body: String, file_name: &str) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/yaml")))
        .insert_header((CONTENT_DISPOSITION, format!("attachment; filename=\"{file_name}\"")))
        .insert_header((CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .body(body)
}

/// The answer to a DELETE: 202 with the object when deletion has begun
/// (tenants, machines), 204 when the record is gone (node groups, config
/// patches).
pub(crate) fn deleted(deleted: &Deleted) -> HttpResponse {
    match deleted {
        Deleted::Marked(object) => self::object(StatusCode::ACCEPTED, object),
        Deleted::Removed => HttpResponse::NoContent().finish(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use actix_web::body::to_bytes;
    use cms_store::Key;

    fn object(name: &str) -> Arc<Object> {
        Arc::new(Object {
            key: Key::tenant(name),
            resource_version: 1,
            generation: 1,
            deleting: false,
            json: Bytes::from(format!(r#"{{"metadata":{{"name":"{name}"}}}}"#)),
        })
    }

    async fn body(listing: &Listing) -> String {
        let bytes = to_bytes(super::listing(listing).into_body()).await.unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[actix_web::test]
    async fn lists_concatenate_stored_bytes() {
        let empty = Listing { items: vec![], total: 0 };
        assert_eq!(body(&empty).await, r#"{"items":[],"total":0}"#);
        let two = Listing { items: vec![object("a"), object("b")], total: 7 };
        let text = body(&two).await;
        assert_eq!(text, r#"{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}],"total":7}"#);
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
    }
}
