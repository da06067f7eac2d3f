//! Schema migrations, applied in order at start-up. The same statements run
//! on SQLite and PostgreSQL: JSON and timestamps are text, counters and
//! times in milliseconds `bigint`, sealed secrets `blob` (`bytea`).

use sea_orm_migration::prelude::*;

mod change_revisions;
mod grants;
mod tool_runs;

pub(crate) struct Migrator;

impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(CreateTables),
            Box::new(CreateAccounts),
            Box::new(CreateTenantSecrets),
            Box::new(CreateLeases),
            Box::new(CreateAudit),
            Box::new(AddAuditIdentity),
            Box::new(change_revisions::AddChangeRevisions),
            Box::new(grants::CreateGrants),
            Box::new(tool_runs::CreateToolRuns),
        ]
    }
}

/// The first schema: objects, events, counters and projections.
struct CreateTables;

impl MigrationName for CreateTables {
    fn name(&self) -> &str {
        "m0001_create_tables"
    }
}

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

/// Users, API tokens and settings.
struct CreateAccounts;

impl MigrationName for CreateAccounts {
    fn name(&self) -> &str {
        "m0002_create_accounts"
    }
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Name,
    Role,
    PasswordHash,
    ResourceVersion,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ApiTokens {
    Table,
    Id,
    UserName,
    Name,
    SecretHash,
    ExpiresAt,
    CreatedAt,
    LastUsedAt,
}

#[derive(DeriveIden)]
enum Settings {
    Table,
    Name,
    Value,
}

#[async_trait::async_trait]
impl MigrationTrait for CreateAccounts {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Users::Table)
                    .col(text(Users::Name).primary_key())
                    .col(text(Users::Role))
                    .col(text(Users::PasswordHash))
                    .col(big(Users::ResourceVersion))
                    .col(text(Users::CreatedAt))
                    .col(text(Users::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ApiTokens::Table)
                    .col(text(ApiTokens::Id).primary_key())
                    .col(text(ApiTokens::UserName))
                    .col(text(ApiTokens::Name))
                    .col(text(ApiTokens::SecretHash))
                    .col(text(ApiTokens::ExpiresAt))
                    .col(text(ApiTokens::CreatedAt))
                    .col(ColumnDef::new(ApiTokens::LastUsedAt).text().null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("api_tokens_user_name")
                    .table(ApiTokens::Table)
                    .col(ApiTokens::UserName)
                    .col(ApiTokens::Name)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Settings::Table)
                    .col(text(Settings::Name).primary_key())
                    .col(text(Settings::Value))
                    .to_owned(),
            )
            .await
    }
}

/// Each tenant's sealed secrets bundle, apart from the resource rows so that
/// it never enters the cache, the event log or a watch.
struct CreateTenantSecrets;

impl MigrationName for CreateTenantSecrets {
    fn name(&self) -> &str {
        "m0003_create_tenant_secrets"
    }
}

#[derive(DeriveIden)]
enum TenantSecrets {
    Table,
    Tenant,
    Sealed,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for CreateTenantSecrets {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(TenantSecrets::Table)
                    .col(text(TenantSecrets::Tenant).primary_key())
                    .col(ColumnDef::new(TenantSecrets::Sealed).blob().not_null())
                    .col(text(TenantSecrets::CreatedAt))
                    .to_owned(),
            )
            .await
    }
}

/// Work leases, for replicas that share one database.
struct CreateLeases;

impl MigrationName for CreateLeases {
    fn name(&self) -> &str {
        "m0004_create_leases"
    }
}

#[derive(DeriveIden)]
enum Leases {
    Table,
    Name,
    Holder,
    Epoch,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for CreateLeases {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Leases::Table)
                    .col(text(Leases::Name).primary_key())
                    .col(text(Leases::Holder))
                    .col(big(Leases::Epoch))
                    .col(big(Leases::ExpiresAt))
                    .to_owned(),
            )
            .await
    }
}

/// The audit log, by growing id, with indexes for its two filters.
struct CreateAudit;

impl MigrationName for CreateAudit {
    fn name(&self) -> &str {
        "m0005_create_audit"
    }
}

#[derive(DeriveIden)]
enum Audit {
    Table,
    Id,
    Time,
    Actor,
    ActorRole,
    ActorToken,
    Method,
    Route,
    Path,
    TargetKind,
    TargetTenant,
    TargetName,
    Status,
    Outcome,
    RequestId,
}

fn optional(column: impl IntoIden) -> ColumnDef {
    ColumnDef::new(column).text().null().to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for CreateAudit {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Audit::Table)
                    .col(ColumnDef::new(Audit::Id).big_integer().not_null().auto_increment().primary_key())
                    .col(text(Audit::Time))
                    .col(text(Audit::Actor))
                    .col(optional(Audit::ActorRole))
                    .col(optional(Audit::ActorToken))
                    .col(text(Audit::Method))
                    .col(optional(Audit::Route))
                    .col(text(Audit::Path))
                    .col(optional(Audit::TargetKind))
                    .col(optional(Audit::TargetTenant))
                    .col(optional(Audit::TargetName))
                    .col(ColumnDef::new(Audit::Status).integer().not_null())
                    .col(text(Audit::Outcome))
                    .col(text(Audit::RequestId))
                    .to_owned(),
            )
            .await?;
        for (name, column) in [("audit_actor", Audit::Actor), ("audit_target_tenant", Audit::TargetTenant)] {
            manager
                .create_index(
                    Index::create().name(name).table(Audit::Table).col(column).col(Audit::Id).to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

/// Where an audited actor's identity comes from: its source, issuer and
/// subject (single sign-on and workload identities).
struct AddAuditIdentity;

impl MigrationName for AddAuditIdentity {
    fn name(&self) -> &str {
        "m0006_add_audit_identity"
    }
}

#[derive(DeriveIden)]
enum AuditIdentity {
    #[sea_orm(iden = "audit")]
    Table,
    ActorSource,
    ActorIssuer,
    ActorSubject,
}

#[async_trait::async_trait]
impl MigrationTrait for AddAuditIdentity {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per statement.
        for column in [AuditIdentity::ActorSource, AuditIdentity::ActorIssuer, AuditIdentity::ActorSubject] {
            manager
                .alter_table(
                    Table::alter().table(AuditIdentity::Table).add_column(optional(column)).to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
