//! [`Audit`] on the SQL store.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cms_model::{AuditEntry, AuditOutcome, AuditRecord, AuditTarget, Page, UserRole};
use sea_orm::{
    ActiveValue::{NotSet, Set},
    ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Select,
};

use crate::audit::{Audit, AuditFilter};
use crate::entity::audit;
use crate::error::StoreError;
use crate::render::format_time;
use crate::sql::SqlStore;

fn row(entry: AuditEntry) -> audit::ActiveModel {
    let target = entry.target.unwrap_or(AuditTarget { kind: String::new(), tenant: None, name: None });
    audit::ActiveModel {
        id: NotSet,
        time: Set(format_time(entry.time)),
        actor: Set(entry.actor),
        actor_role: Set(entry.actor_role.map(|role| role.as_str().to_string())),
        actor_token: Set(entry.actor_token),
        actor_source: Set(entry.actor_source),
        actor_issuer: Set(entry.actor_issuer),
        actor_subject: Set(entry.actor_subject),
        method: Set(entry.method),
        route: Set(entry.route),
        path: Set(entry.path),
        target_kind: Set((!target.kind.is_empty()).then_some(target.kind)),
        target_tenant: Set(target.tenant),
        target_name: Set(target.name),
        status: Set(i32::from(entry.status)),
        outcome: Set(entry.outcome.as_str().to_string()),
        request_id: Set(entry.request_id),
    }
}

fn record(row: audit::Model) -> Result<AuditRecord, StoreError> {
    let corrupt =
        |what: &str, value: &str| StoreError::Corrupt(format!("audit record {}: {what} {value:?}", row.id));
    let actor_role = match &row.actor_role {
        None => None,
        Some(name) => Some(UserRole::from_name(name).ok_or_else(|| corrupt("unknown role", name))?),
    };
    let outcome =
        AuditOutcome::from_name(&row.outcome).ok_or_else(|| corrupt("unknown outcome", &row.outcome))?;
    let time = DateTime::parse_from_rfc3339(&row.time)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| corrupt("bad time", &row.time))?;
    let status = u16::try_from(row.status).map_err(|_| corrupt("bad status", &row.status.to_string()))?;
    let target =
        row.target_kind.map(|kind| AuditTarget { kind, tenant: row.target_tenant, name: row.target_name });
    Ok(AuditRecord {
        id: row.id as u64,
        entry: AuditEntry {
            time,
            actor: row.actor,
            actor_role,
            actor_token: row.actor_token,
            actor_source: row.actor_source,
            actor_issuer: row.actor_issuer,
            actor_subject: row.actor_subject,
            method: row.method,
            route: row.route,
            path: row.path,
            target,
            status,
            outcome,
            request_id: row.request_id,
        },
    })
}

fn filtered(filter: &AuditFilter) -> Select<audit::Entity> {
    let mut query = audit::Entity::find();
    if let Some(actor) = &filter.actor {
        query = query.filter(audit::Column::Actor.eq(actor.as_str()));
    }
    if let Some(tenant) = &filter.tenant {
        query = query.filter(audit::Column::TargetTenant.eq(tenant.as_str()));
    }
    query
}

#[async_trait]
impl Audit for SqlStore {
    async fn record(&self, entry: AuditEntry) -> Result<u64, StoreError> {
        // Records join the store's writes in their batches: one commit for
        // all that wait, and on SQLite no writer besides the batch writer.
        self.submit_audit(row(entry)).await
    }

    async fn list(&self, page: Page, filter: AuditFilter) -> Result<(Vec<AuditRecord>, u64), StoreError> {
        let total = filtered(&filter).count(&self.db).await?;
        // Past the end there is nothing to read; an offset beyond what the
        // databases' signed 64-bit OFFSET takes never reaches them.
        if page.offset as u64 >= total {
            return Ok((Vec::new(), total));
        }
        let rows = filtered(&filter)
            .order_by_desc(audit::Column::Id)
            .offset(page.offset as u64)
            .limit(page.limit as u64)
            .all(&self.db)
            .await?;
        let records = rows.into_iter().map(record).collect::<Result<Vec<_>, _>>()?;
        Ok((records, total))
    }
}
