//! The grants table: each grant by name, its spec as JSON.

use sea_orm_migration::prelude::*;

use super::{big, text};

/// Grants, kept with users and tokens.
pub(super) struct CreateGrants;

impl MigrationName for CreateGrants {
    fn name(&self) -> &str {
        "m0008_create_grants"
    }
}

#[derive(DeriveIden)]
enum Grants {
    Table,
    Name,
    Spec,
    ResourceVersion,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for CreateGrants {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Grants::Table)
                    .col(text(Grants::Name).primary_key())
                    .col(text(Grants::Spec))
                    .col(big(Grants::ResourceVersion))
                    .col(text(Grants::CreatedAt))
                    .col(text(Grants::UpdatedAt))
                    .to_owned(),
            )
            .await
    }
}
