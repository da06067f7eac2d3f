//! The audit log: one record per mutating request, kept apart from the
//! resources (never cached, never in the event log or a watch) and bounded
//! by a retention count.

use async_trait::async_trait;
use cms_model::{AuditEntry, AuditRecord, Page};

use crate::error::StoreError;

/// Which records to list; `None` matches every record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only records of this actor (user name, or `anonymous`).
    pub actor: Option<String>,
    /// Only records about this tenant or anything inside it.
    pub tenant: Option<String>,
}

/// The persistence of the audit log.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait Audit: Send + Sync + 'static {
    /// Appends a record, durably, and drops the oldest records beyond the
    /// retention. Returns the new record's id.
    async fn record(&self, entry: AuditEntry) -> Result<u64, StoreError>;

    /// A page of the records that match `filter`, newest first, and how
    /// many match in all.
    async fn list(&self, page: Page, filter: AuditFilter) -> Result<(Vec<AuditRecord>, u64), StoreError>;
}
