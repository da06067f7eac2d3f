//! Row-level helpers used inside write transactions.

use std::collections::BTreeMap;

use cms_model::{Kind, MachineStatus, NodeGroupStatus, TenantStatus};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, SqlErr};
use serde_json::Value;

use crate::api::{Key, Object};
use crate::entity::object;
use crate::error::StoreError;
use crate::render::{map_text, render};

/// The row of `key`, if any.
pub(crate) async fn find(db: &impl ConnectionTrait, key: &Key) -> Result<Option<object::Model>, StoreError> {
    Ok(object::Entity::find_by_id((key.kind.as_str().to_string(), key.tenant.clone(), key.name.clone()))
        .one(db)
        .await?)
}

/// The row of `key`, or `NotFound`.
pub(crate) async fn get(db: &impl ConnectionTrait, key: &Key) -> Result<object::Model, StoreError> {
    find(db, key).await?.ok_or_else(|| StoreError::NotFound(key.to_string()))
}

/// The rows inside a tenant, of one kind or of all, sorted by kind and name.
pub(crate) async fn children(
    db: &impl ConnectionTrait,
    tenant: &str,
    kind: Option<Kind>,
) -> Result<Vec<object::Model>, StoreError> {
    let mut query = object::Entity::find().filter(object::Column::Tenant.eq(tenant));
    if let Some(kind) = kind {
        query = query.filter(object::Column::Kind.eq(kind.as_str()));
    }
    Ok(query.order_by_asc(object::Column::Kind).order_by_asc(object::Column::Name).all(db).await?)
}

/// Renders the current state of `key`.
pub(crate) async fn render_current(db: &impl ConnectionTrait, key: &Key) -> Result<Object, StoreError> {
    let row = get(db, key).await?;
    let groups = match key.kind {
        Kind::Tenant => children(db, &key.name, Some(Kind::NodeGroup)).await?,
        _ => Vec::new(),
    };
    render(&row, &groups)
}

/// A new row at resource version and generation 1.
pub(crate) fn new_row(
    key: &Key,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    spec: &Value,
    status: &Value,
    now: &str,
) -> object::ActiveModel {
    object::ActiveModel {
        kind: Set(key.kind.as_str().to_string()),
        tenant: Set(key.tenant.clone()),
        name: Set(key.name.clone()),
        resource_version: Set(1),
        generation: Set(1),
        created_at: Set(now.to_string()),
        updated_at: Set(now.to_string()),
        deletion_timestamp: Set(None),
        finalizers: Set("[]".to_string()),
        labels: Set(map_text(labels)),
        annotations: Set(map_text(annotations)),
        spec: Set(spec.to_string()),
        status: Set(status.to_string()),
    }
}

/// Inserts a row; a row already there is `AlreadyExists`.
pub(crate) async fn insert(
    db: &impl ConnectionTrait,
    key: &Key,
    row: object::ActiveModel,
) -> Result<(), StoreError> {
    match object::Entity::insert(row).exec_without_returning(db).await {
        Ok(_) => Ok(()),
        Err(err) if matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
            Err(StoreError::AlreadyExists(key.to_string()))
        }
        Err(err) => Err(err.into()),
    }
}

/// Updates the row of `key` in one statement, bumping its resource version,
/// only if that version is still `expected`. Returns whether it matched.
pub(crate) async fn compare_and_set(
    db: &impl ConnectionTrait,
    key: &Key,
    expected: i64,
    sets: Vec<(object::Column, Expr)>,
) -> Result<bool, StoreError> {
    let mut update = object::Entity::update_many()
        .col_expr(object::Column::ResourceVersion, Expr::col(object::Column::ResourceVersion).add(1));
    for (column, value) in sets {
        update = update.col_expr(column, value);
    }
    let result = update
        .filter(object::Column::Kind.eq(key.kind.as_str()))
        .filter(object::Column::Tenant.eq(key.tenant.as_str()))
        .filter(object::Column::Name.eq(key.name.as_str()))
        .filter(object::Column::ResourceVersion.eq(expected))
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}

/// Like [`compare_and_set`], but a mismatch is a `Conflict` error.
pub(crate) async fn write_if_current(
    db: &impl ConnectionTrait,
    key: &Key,
    expected: i64,
    sets: Vec<(object::Column, Expr)>,
) -> Result<(), StoreError> {
    if compare_and_set(db, key, expected, sets).await? {
        return Ok(());
    }
    let current = get(db, key).await?.resource_version as u64;
    Err(StoreError::Conflict { what: key.to_string(), expected: expected as u64, current })
}

/// Deletes the row of `key`.
pub(crate) async fn remove(db: &impl ConnectionTrait, key: &Key) -> Result<(), StoreError> {
    object::Entity::delete_by_id((key.kind.as_str().to_string(), key.tenant.clone(), key.name.clone()))
        .exec(db)
        .await?;
    Ok(())
}

/// The status an object of `kind` starts with.
pub(crate) fn default_status(kind: Kind) -> Value {
    let status = match kind {
        Kind::Tenant => serde_json::to_value(TenantStatus::default()),
        Kind::NodeGroup => serde_json::to_value(NodeGroupStatus::default()),
        Kind::ConfigPatch => Ok(Value::Object(Default::default())),
        Kind::Machine => serde_json::to_value(MachineStatus {
            stage: "initializing".to_string(),
            ..MachineStatus::default()
        }),
    };
    status.unwrap_or(Value::Null)
}

/// A string column's new value.
pub(crate) fn text(value: impl Into<String>) -> Expr {
    Expr::value(value.into())
}

/// Splits a tenant's `nodeGroups` off its spec.
pub(crate) fn split_groups(kind: Kind, spec: Value) -> Result<(Value, Option<Vec<Value>>), StoreError> {
    let Value::Object(mut map) = spec else {
        return Err(StoreError::Refused("spec must be an object".into()));
    };
    if kind != Kind::Tenant {
        return Ok((Value::Object(map), None));
    }
    let groups = match map.remove("nodeGroups") {
        None | Some(Value::Null) => None,
        Some(Value::Array(groups)) => Some(groups),
        Some(_) => return Err(StoreError::Refused("spec.nodeGroups must be a list".into())),
    };
    Ok((Value::Object(map), groups))
}

pub(crate) fn group_name(group: &Value) -> Result<&str, StoreError> {
    group
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| StoreError::Refused("every node group needs a name".into()))
}
