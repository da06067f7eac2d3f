//! The tool runs table: the provisioning tool's last run of each command
//! for each tenant, its redacted output bounded, for support bundles.

use sea_orm_migration::prelude::*;

use super::{big, text};

/// The last apply, plan and destroy of each tenant.
pub(super) struct CreateToolRuns;

impl MigrationName for CreateToolRuns {
    fn name(&self) -> &str {
        "m0010_create_tool_runs"
    }
}

#[derive(DeriveIden)]
enum ToolRuns {
    Table,
    Tenant,
    Command,
    Succeeded,
    Status,
    FinishedAt,
    Output,
    Truncated,
}

#[async_trait::async_trait]
impl MigrationTrait for CreateToolRuns {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ToolRuns::Table)
                    .col(text(ToolRuns::Tenant))
                    .col(text(ToolRuns::Command))
                    .col(big(ToolRuns::Succeeded))
                    .col(text(ToolRuns::Status))
                    .col(text(ToolRuns::FinishedAt))
                    .col(text(ToolRuns::Output))
                    .col(big(ToolRuns::Truncated))
                    .primary_key(Index::create().col(ToolRuns::Tenant).col(ToolRuns::Command))
                    .to_owned(),
            )
            .await
    }
}
