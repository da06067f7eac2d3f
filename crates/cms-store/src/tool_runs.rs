//! The provisioning tool's last run of each command for each tenant
//! ([`ToolRun`]), written by the reconciler after each run and read for
//! support bundles. Rows go with their tenant, like its projection.

use chrono::{DateTime, Utc};
use cms_model::{ToolCommand, ToolRun};
use sea_orm::{ActiveValue::Set, ColumnTrait, DatabaseTransaction, EntityTrait, QueryFilter};

use crate::error::StoreError;
use crate::lease::Lease;
use crate::render::format_time;
use crate::sql::SqlStore;

#[allow(unreachable_pub)]
pub(crate) mod tool_run {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "tool_runs")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub tenant: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub command: String,
        pub succeeded: i64,
        pub status: String,
        pub finished_at: String,
        pub output: String,
        pub truncated: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

impl SqlStore {
    /// Replaces the tenant's last run of `run.command`; the tenant must exist.
    pub(crate) async fn write_tool_run(
        &self,
        tenant: String,
        run: ToolRun,
        fence: Option<&Lease>,
    ) -> Result<(), StoreError> {
        let (output, cut) = ToolRun::bounded(run.output);
        let (_guard, txn) = self.begin_tenant_write(&tenant, fence).await?;
        let command = run.command.as_str().to_string();
        tool_run::Entity::delete_by_id((tenant.clone(), command.clone())).exec(&txn).await?;
        let row = tool_run::ActiveModel {
            tenant: Set(tenant),
            command: Set(command),
            succeeded: Set(i64::from(run.succeeded)),
            status: Set(run.status),
            finished_at: Set(format_time(run.finished_at)),
            output: Set(output),
            truncated: Set(i64::from(run.truncated || cut)),
        };
        tool_run::Entity::insert(row).exec_without_returning(&txn).await?;
        txn.commit().await?;
        Ok(())
    }

    /// The tenant's last run of each command, in [`ToolCommand::ALL`]'s order.
    pub(crate) async fn read_tool_runs(&self, tenant: String) -> Result<Vec<ToolRun>, StoreError> {
        let rows = tool_run::Entity::find().filter(tool_run::Column::Tenant.eq(tenant)).all(&self.db).await?;
        let mut runs = rows.into_iter().map(run_of).collect::<Result<Vec<_>, _>>()?;
        runs.sort_by_key(|run| run.command);
        Ok(runs)
    }
}

/// Drops a tenant's runs, in the transaction that removes the tenant.
pub(crate) async fn drop(txn: &DatabaseTransaction, tenant: &str) -> Result<(), StoreError> {
    tool_run::Entity::delete_many().filter(tool_run::Column::Tenant.eq(tenant)).exec(txn).await?;
    Ok(())
}

fn run_of(row: tool_run::Model) -> Result<ToolRun, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("tool run of {:?}: {what}", row.tenant));
    let command = ToolCommand::from_name(&row.command).ok_or_else(|| corrupt("unknown command"))?;
    let finished_at = DateTime::parse_from_rfc3339(&row.finished_at)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|_| corrupt("bad time"))?;
    Ok(ToolRun {
        command,
        succeeded: row.succeeded != 0,
        status: row.status,
        finished_at,
        output: row.output,
        truncated: row.truncated != 0,
    })
}
