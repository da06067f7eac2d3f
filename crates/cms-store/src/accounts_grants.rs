//! Grants on the SQL store: one row per grant, its spec as JSON. Like users
//! and tokens they stay out of the resource cache and the event log; the
//! authenticator reads them (`cms_auth`, with a cache of a few seconds).

use chrono::Utc;
use cms_model::GrantSpec;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};

use crate::accounts::GrantRecord;
use crate::accounts_sql::{duplicate, time};
use crate::entity::grant;
use crate::error::StoreError;
use crate::render::format_time;

fn to_grant(row: grant::Model) -> Result<GrantRecord, StoreError> {
    let spec = serde_json::from_str(&row.spec)
        .map_err(|err| StoreError::Corrupt(format!("grant {:?}: {err}", row.name)))?;
    Ok(GrantRecord {
        spec,
        resource_version: row.resource_version as u64,
        created_at: time(&row.created_at)?,
        updated_at: time(&row.updated_at)?,
        name: row.name,
    })
}

fn spec_json(spec: &GrantSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|err| StoreError::Corrupt(err.to_string()))
}

/// Every grant, by name.
pub(crate) async fn all(db: &impl ConnectionTrait) -> Result<Vec<GrantRecord>, StoreError> {
    let rows = grant::Entity::find().order_by_asc(grant::Column::Name).all(db).await?;
    rows.into_iter().map(to_grant).collect()
}

/// The grant `name`.
pub(crate) async fn one(db: &impl ConnectionTrait, name: &str) -> Result<Option<GrantRecord>, StoreError> {
    grant::Entity::find_by_id(name.to_string()).one(db).await?.map(to_grant).transpose()
}

/// Inserts a grant at version 1.
pub(crate) async fn create(
    db: &impl ConnectionTrait,
    record: GrantRecord,
) -> Result<GrantRecord, StoreError> {
    let row = grant::ActiveModel {
        name: Set(record.name.clone()),
        spec: Set(spec_json(&record.spec)?),
        resource_version: Set(1),
        created_at: Set(format_time(record.created_at)),
        updated_at: Set(format_time(record.updated_at)),
    };
    match grant::Entity::insert(row).exec_without_returning(db).await {
        Ok(_) => Ok(GrantRecord { resource_version: 1, ..record }),
        Err(err) if duplicate(&err) => Err(StoreError::AlreadyExists(format!("grant {:?}", record.name))),
        Err(err) => Err(err.into()),
    }
}

/// Replaces the spec of grant `name` if it is at version `expected`: one
/// statement, so that of concurrent updates at one version one wins.
pub(crate) async fn update(
    db: &impl ConnectionTrait,
    name: &str,
    spec: &GrantSpec,
    expected: u64,
) -> Result<GrantRecord, StoreError> {
    let result = grant::Entity::update_many()
        .col_expr(grant::Column::Spec, Expr::value(spec_json(spec)?))
        .col_expr(grant::Column::ResourceVersion, Expr::col(grant::Column::ResourceVersion).add(1))
        .col_expr(grant::Column::UpdatedAt, Expr::value(format_time(Utc::now())))
        .filter(grant::Column::Name.eq(name))
        .filter(grant::Column::ResourceVersion.eq(expected as i64))
        .exec(db)
        .await?;
    let current = one(db, name).await?.ok_or_else(|| StoreError::NotFound(format!("grant {name:?}")))?;
    if result.rows_affected != 1 {
        let what = format!("grant {name:?}");
        return Err(StoreError::Conflict { what, expected, current: current.resource_version });
    }
    Ok(current)
}

/// Deletes grant `name`.
pub(crate) async fn delete(db: &impl ConnectionTrait, name: &str) -> Result<(), StoreError> {
    let result = grant::Entity::delete_by_id(name.to_string()).exec(db).await?;
    if result.rows_affected == 0 {
        return Err(StoreError::NotFound(format!("grant {name:?}")));
    }
    Ok(())
}
