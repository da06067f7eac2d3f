//! Schemas beside the store's own tables on PostgreSQL: the provisioning
//! tool's `pg` backend keeps each tenant's state in a schema of its own,
//! and when the name of those schemas changes the server moves them with
//! [`SqlStore::rename_schema`]. SQLite has no schemas.

use cms_model::Kind;
use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};

use crate::api::Store;
use crate::dialect::is_postgres;
use crate::error::StoreError;
use crate::sql::SqlStore;

/// The key of the advisory lock that serializes schema renames between
/// replicas starting together: "cms_sch" in ASCII.
const RENAME_LOCK: i64 = 0x0063_6d73_5f73_6368;

/// What [`SqlStore::rename_schema`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaRename {
    /// The schema was renamed.
    Renamed,
    /// There was no schema of the old name (or no schemas: SQLite).
    NoSuchSchema,
    /// Both names exist: nothing was changed.
    TargetExists,
}

impl SqlStore {
    /// The names of the stored tenants, those being deleted included: the
    /// tenants that may have a schema.
    pub fn tenant_names(&self) -> Vec<String> {
        self.all(Kind::Tenant, None).iter().map(|object| object.key.name.clone()).collect()
    }

    /// Renames schema `from`, with everything in it, to `to`, when `from`
    /// exists and `to` does not. Replicas that start together take turns, so
    /// one of them renames and the others find nothing left to rename.
    pub async fn rename_schema(&self, from: &str, to: &str) -> Result<SchemaRename, StoreError> {
        if !is_postgres(&self.db) {
            return Ok(SchemaRename::NoSuchSchema);
        }
        let txn = self.db.begin().await?;
        txn.execute_raw(postgres("SELECT pg_advisory_xact_lock($1)", [RENAME_LOCK.into()])).await?;
        let exists = |name: &str| {
            postgres("SELECT nspname FROM pg_namespace WHERE nspname = $1", [name.to_string().into()])
        };
        if txn.query_one_raw(exists(from)).await?.is_none() {
            return Ok(SchemaRename::NoSuchSchema);
        }
        if txn.query_one_raw(exists(to)).await?.is_some() {
            return Ok(SchemaRename::TargetExists);
        }
        let rename = format!("ALTER SCHEMA {} RENAME TO {}", quoted(from), quoted(to));
        txn.execute_raw(Statement::from_string(DbBackend::Postgres, rename)).await?;
        txn.commit().await?;
        Ok(SchemaRename::Renamed)
    }
}

fn postgres(sql: &str, values: impl IntoIterator<Item = sea_orm::Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// `name` as a quoted PostgreSQL identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quoted("cms_tofu_a"), "\"cms_tofu_a\"");
        assert_eq!(quoted("a\"b"), "\"a\"\"b\"");
    }
}
