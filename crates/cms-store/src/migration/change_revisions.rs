//! `m0007`: the store-wide revision of each object's last change, and of
//! each logged change's previous change of its object.

use sea_orm_migration::prelude::*;

use super::big;

/// The store-wide revision of each object's last change (`objects.revision`)
/// and of the change before each logged one (`events.previous`), so that a
/// watch of one object resumes without the log's older events when that
/// object did not change in what was compacted.
pub(super) struct AddChangeRevisions;

impl MigrationName for AddChangeRevisions {
    fn name(&self) -> &str {
        "m0007_add_change_revisions"
    }
}

#[derive(DeriveIden)]
enum ObjectRevision {
    #[sea_orm(iden = "objects")]
    Table,
    Revision,
}

#[derive(DeriveIden)]
enum EventPrevious {
    #[sea_orm(iden = "events")]
    Table,
    Previous,
}

#[async_trait::async_trait]
impl MigrationTrait for AddChangeRevisions {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ObjectRevision::Table)
                    .add_column(big(ObjectRevision::Revision).default(0))
                    .to_owned(),
            )
            .await?;
        // Unknown (null) for the changes logged before.
        manager
            .alter_table(
                Table::alter()
                    .table(EventPrevious::Table)
                    .add_column(ColumnDef::new(EventPrevious::Previous).big_integer().null())
                    .to_owned(),
            )
            .await?;
        // The rows there already changed last at their newest event in the
        // log or, with none left there, at or before the log's compaction:
        // an upper bound, which is all a resuming watch relies on.
        // The index, dropped after, keeps this one look-up per row.
        let db = manager.get_connection();
        db.execute_unprepared("CREATE INDEX events_by_object ON events (kind, tenant, name, revision)")
            .await?;
        db.execute_unprepared(
            "UPDATE objects SET revision = COALESCE(\
               (SELECT MAX(events.revision) FROM events \
                 WHERE events.kind = objects.kind AND events.tenant = objects.tenant \
                   AND events.name = objects.name), \
               (SELECT value FROM counters WHERE name = 'compacted'))",
        )
        .await?;
        db.execute_unprepared("DROP INDEX events_by_object").await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};
    use sea_orm_migration::MigratorTrait;

    use crate::migration::Migrator;

    /// Rows from before the column take their newest logged event, or the
    /// log's compaction when none is left: an upper bound of their last change.
    #[tokio::test]
    async fn existing_rows_take_their_last_logged_revision() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
        let db = Database::connect(&url).await.expect("connect");
        let before = Migrator::migrations().iter().position(|m| m.name() == "m0007_add_change_revisions");
        Migrator::up(&db, before.map(|index| index as u32)).await.expect("the schema before");
        let statements = [
            "UPDATE counters SET value = 30 WHERE name = 'revision'",
            "UPDATE counters SET value = 20 WHERE name = 'compacted'",
            "INSERT INTO objects (kind, tenant, name, resource_version, generation, created_at, updated_at, \
             finalizers, labels, annotations, spec, status) VALUES \
             ('tenant', '', 'busy', 3, 1, 't', 't', '[]', '{}', '{}', '{}', '{}'), \
             ('tenant', '', 'quiet', 1, 1, 't', 't', '[]', '{}', '{}', '{}', '{}')",
            "INSERT INTO events (revision, kind, tenant, name, event_type, object) VALUES \
             (25, 'tenant', '', 'busy', 'MODIFIED', '{}'), (28, 'tenant', '', 'busy', 'MODIFIED', '{}'), \
             (29, 'tenant', '', 'other', 'DELETED', '{}')",
        ];
        for statement in statements {
            db.execute_unprepared(statement).await.expect(statement);
        }
        Migrator::up(&db, None).await.expect("the migration");
        let rows = db
            .query_all_raw(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT name, revision FROM objects ORDER BY name",
            ))
            .await
            .expect("rows");
        let revisions: Vec<(String, i64)> = rows
            .iter()
            .map(|row| (row.try_get("", "name").unwrap(), row.try_get("", "revision").unwrap()))
            .collect();
        assert_eq!(revisions, [("busy".to_string(), 28), ("quiet".to_string(), 20)]);
    }
}
