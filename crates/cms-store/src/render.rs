//! Turning rows into the JSON the API shows, once per write.

use std::collections::BTreeMap;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use cms_model::{Kind, ObjectMeta};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api::{Key, Object};
use crate::entity::object;
use crate::error::StoreError;

/// The key of a row.
pub(crate) fn key_of(row: &object::Model) -> Result<Key, StoreError> {
    let kind = Kind::from_name(&row.kind)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown kind {:?}", row.kind)))?;
    Ok(Key { kind, tenant: row.tenant.clone(), name: row.name.clone() })
}

/// Renders a row; a tenant's `groups` become its `spec.nodeGroups`.
pub(crate) fn render(row: &object::Model, groups: &[object::Model]) -> Result<Object, StoreError> {
    let key = key_of(row)?;
    let metadata = ObjectMeta {
        name: row.name.clone(),
        resource_version: Some(row.resource_version as u64),
        generation: Some(row.generation as u64),
        labels: json(&row.labels)?,
        annotations: json(&row.annotations)?,
        created_at: Some(timestamp(&row.created_at)?),
        updated_at: Some(timestamp(&row.updated_at)?),
        deletion_timestamp: row.deletion_timestamp.as_deref().map(timestamp).transpose()?,
        finalizers: json(&row.finalizers)?,
    };
    let mut spec: Value = json(&row.spec)?;
    if key.kind == Kind::Tenant {
        let specs = groups.iter().map(|group| json(&group.spec)).collect::<Result<Vec<Value>, _>>()?;
        if let Value::Object(map) = &mut spec {
            map.insert("nodeGroups".into(), Value::Array(specs));
        }
    }
    let mut body = Map::new();
    body.insert("metadata".into(), serde_json::to_value(&metadata).map_err(corrupt)?);
    body.insert("spec".into(), spec);
    body.insert("status".into(), json(&row.status)?);
    let bytes = serde_json::to_vec(&Value::Object(body)).map_err(corrupt)?;
    Ok(Object {
        key,
        resource_version: row.resource_version as u64,
        generation: row.generation as u64,
        deleting: row.deletion_timestamp.is_some(),
        json: Bytes::from(bytes),
    })
}

/// Rebuilds an object from its JSON, as stored in the event log.
pub(crate) fn parse_object(key: Key, json: String) -> Result<Object, StoreError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Head {
        metadata: HeadMeta,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct HeadMeta {
        resource_version: u64,
        generation: u64,
        deletion_timestamp: Option<String>,
    }
    let head: Head = serde_json::from_str(&json).map_err(corrupt)?;
    Ok(Object {
        key,
        resource_version: head.metadata.resource_version,
        generation: head.metadata.generation,
        deleting: head.metadata.deletion_timestamp.is_some(),
        json: Bytes::from(json),
    })
}

/// Formats a timestamp the way it is stored.
pub(crate) fn format_time(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The JSON text of a string map.
pub(crate) fn map_text(map: &BTreeMap<String, String>) -> String {
    serde_json::to_string(map).unwrap_or_else(|_| "{}".into())
}

pub(crate) fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(corrupt)
}

fn timestamp(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).map_err(corrupt)
}

fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}
