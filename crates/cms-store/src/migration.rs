//! Schema migrations, applied in order at start-up.

use sea_orm_migration::prelude::*;

pub(crate) struct Migrator;

impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![Box::new(CreateTables)]
    }
}

/// The first schema: objects, events, counters and projections.
#[derive(DeriveMigrationName)]
struct CreateTables;

#[derive(DeriveIden)]
enum Objects {
    Table,
    Kind,
    Tenant,
    Name,
    ResourceVersion,
    Generation,
    CreatedAt,
    UpdatedAt,
    DeletionTimestamp,
    Finalizers,
    Labels,
    Annotations,
    Spec,
    Status,
}

#[derive(DeriveIden)]
enum Events {
    Table,
    Revision,
    Kind,
    Tenant,
    Name,
    EventType,
    Object,
}

#[derive(DeriveIden)]
enum Counters {
    Table,
    Name,
    Value,
}

#[derive(DeriveIden)]
enum Projections {
    Table,
    Tenant,
    Items,
    RecordedAt,
}

fn text(column: impl IntoIden) -> ColumnDef {
    ColumnDef::new(column).text().not_null().to_owned()
}

fn big(column: impl IntoIden) -> ColumnDef {
    ColumnDef::new(column).big_integer().not_null().to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for CreateTables {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Objects::Table)
                    .col(text(Objects::Kind))
                    .col(text(Objects::Tenant))
                    .col(text(Objects::Name))
                    .col(big(Objects::ResourceVersion))
                    .col(big(Objects::Generation))
                    .col(text(Objects::CreatedAt))
                    .col(text(Objects::UpdatedAt))
                    .col(ColumnDef::new(Objects::DeletionTimestamp).text().null())
                    .col(text(Objects::Finalizers))
                    .col(text(Objects::Labels))
                    .col(text(Objects::Annotations))
                    .col(text(Objects::Spec))
                    .col(text(Objects::Status))
                    .primary_key(Index::create().col(Objects::Kind).col(Objects::Tenant).col(Objects::Name))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Events::Table)
                    .col(big(Events::Revision).primary_key())
                    .col(text(Events::Kind))
                    .col(text(Events::Tenant))
                    .col(text(Events::Name))
                    .col(text(Events::EventType))
                    .col(text(Events::Object))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Counters::Table)
                    .col(text(Counters::Name).primary_key())
                    .col(big(Counters::Value))
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::insert()
                    .into_table(Counters::Table)
                    .columns([Counters::Name, Counters::Value])
                    .values_panic(["revision".into(), 0i64.into()])
                    .values_panic(["compacted".into(), 0i64.into()])
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Projections::Table)
                    .col(text(Projections::Tenant).primary_key())
                    .col(text(Projections::Items))
                    .col(text(Projections::RecordedAt))
                    .to_owned(),
            )
            .await
    }
}
