//! Group commit: the writes of a replica queue for one task, which runs all
//! the writes waiting at once in one transaction.
//!
//! A batch locks the rows of the tenants its writes touch (on PostgreSQL the
//! tenant rows, `FOR UPDATE`, in name order) and reads, under those locks,
//! what its writes are about: the tenants, their node groups and the row
//! each write names. It runs each write in memory on a [`View`] of them. A
//! write that looks at a row the batch has not read notes it
//! ([`crate::view::Needs`]); the batch reads what was needed and runs its
//! writes again, so a write costs what it touches, never what its tenant
//! holds. A write that fails leaves nothing behind; the others go on. The
//! batch then takes its revisions from the counter row, writes the rows,
//! each with the revision of its last change, logs the events (each with the
//! revision of its object's change before it), appends the audit records
//! queued with it and commits: one commit, and one flush of the database's
//! log, for every write in it. On PostgreSQL that is one statement
//! ([`postgres`]); on SQLite a few, the rows written before the counter and
//! stamped after it. Should the batch's statements
//! fail, each write runs again alone, so that one write's failure (a tenant
//! created meanwhile by another replica) is reported to that write only.
//!
//! The counter row is taken last, by an `UPDATE` inside the transaction, so
//! on PostgreSQL concurrent replicas' transactions queue on it and commit in
//! the order of their revisions: a reader of the log never sees revision
//! `r + 1` before `r`. A fenced write (one that carries a [`Lease`]) is
//! checked, in the same transaction, against the lease.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Weak};

use chrono::Utc;
use cms_model::Kind;
use sea_orm::sea_query::{CaseStatement, Expr, OnConflict};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, DatabaseTransaction, DbErr, EntityTrait,
    QueryFilter, SqlErr, TransactionTrait,
};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::api::{EventType, Key, Object, WatchEvent};
use crate::dialect;
use crate::entity::{audit, event, object, projection};
use crate::error::StoreError;
use crate::lease::{self, Lease};
use crate::render::format_time;
use crate::secrets;
use crate::sql::SqlStore;
use crate::view::{Base, Needs, Overlay, Side, View};

mod postgres;
mod reads;

use reads::{lock_tenants, read, read_whole, run_writes};

/// The most writes (and audit records) one batch takes.
const MOST: usize = 64;

/// The most batches a replica runs at once on PostgreSQL.
const IN_FLIGHT: usize = 4;

/// Rows per multi-row statement, well within both databases' limits on
/// bound parameters.
const CHUNK: usize = 200;

/// Rounds of reading what a batch's writes need before it reads every row
/// of their tenants instead. Each round reads only what a write looked at,
/// so a write needs one round more for each row it finds through another.
const ROUNDS: usize = 4;

/// The histogram of the entries (writes and audit records) each committed
/// transaction of the batch writer carries.
pub const BATCH_SIZE: &str = "cms_store_batch_size";

/// The queue of a replica's writes.
pub(crate) type Queue = mpsc::UnboundedSender<Work>;

/// What waits in the queue.
pub(crate) enum Work {
    Write(Box<dyn Job>),
    Audit(Box<Record>),
}

/// An audit record waiting for its batch.
pub(crate) struct Record {
    pub(crate) row: audit::ActiveModel,
    pub(crate) reply: oneshot::Sender<Result<u64, StoreError>>,
}

/// A queued write.
pub(crate) trait Job: Send {
    /// The row the write is about: the batch reads it, and locks its tenant.
    fn key(&self) -> &Key;
    fn fence(&self) -> Option<&Lease>;
    /// Runs the write on `view`; it may run again, in a later transaction.
    fn run(&mut self, view: &mut View<'_>) -> Result<(), StoreError>;
    /// Tells the writer how it ended, once the transaction has.
    fn finish(self: Box<Self>, result: Result<(), StoreError>);
}

struct Typed<T, F> {
    key: Key,
    fence: Option<Lease>,
    write: F,
    out: Option<T>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Job for Typed<T, F>
where
    T: Send,
    F: FnMut(&mut View<'_>) -> Result<T, StoreError> + Send,
{
    fn key(&self) -> &Key {
        &self.key
    }

    fn fence(&self) -> Option<&Lease> {
        self.fence.as_ref()
    }

    fn run(&mut self, view: &mut View<'_>) -> Result<(), StoreError> {
        self.out = Some((self.write)(view)?);
        Ok(())
    }

    fn finish(self: Box<Self>, result: Result<(), StoreError>) {
        let this = *self;
        let result = result.and_then(|()| {
            this.out.ok_or_else(|| StoreError::Corrupt("a write ended without its result".into()))
        });
        // A writer that stopped waiting is not an error: its write stands.
        let _ = this.reply.send(result);
    }
}

/// The writes and audit records of one batch.
#[derive(Default)]
struct Batch {
    jobs: Vec<Box<dyn Job>>,
    records: Vec<Record>,
}

impl Batch {
    fn len(&self) -> usize {
        self.jobs.len() + self.records.len()
    }

    fn push(&mut self, work: Work) {
        match work {
            Work::Write(job) => self.jobs.push(job),
            Work::Audit(record) => self.records.push(*record),
        }
    }

    /// Tells every writer of the batch that it failed, each with an error
    /// from `err`.
    fn fail(self, mut err: impl FnMut() -> StoreError) {
        for job in self.jobs {
            job.finish(Err(err()));
        }
        for record in self.records {
            let _ = record.reply.send(Err(err()));
        }
    }
}

/// What a committed batch logged, and for each write the error that made it
/// write nothing.
struct Committed {
    events: Vec<WatchEvent>,
    failures: Vec<Option<StoreError>>,
    ids: Vec<u64>,
}

/// Starts the task that runs the writes of `store`; it ends with the store.
/// On PostgreSQL up to [`IN_FLIGHT`] batches run at once, so that one
/// batch's round trips overlap another's; SQLite has one writer.
pub(crate) fn start(store: Weak<SqlStore>, postgres: bool) -> Queue {
    let (queue, mut waiting) = mpsc::unbounded_channel::<Work>();
    let slots = Arc::new(Semaphore::new(if postgres { IN_FLIGHT } else { 1 }));
    tokio::spawn(async move {
        let mut previous: Option<oneshot::Receiver<()>> = None;
        while let Some(first) = waiting.recv().await {
            // Writes queue up while every slot is busy, and go together.
            let Ok(slot) = slots.clone().acquire_owned().await else { break };
            let mut batch = Batch::default();
            batch.push(first);
            while batch.len() < MOST {
                match waiting.try_recv() {
                    Ok(work) => batch.push(work),
                    Err(_) => break,
                }
            }
            let Some(store) = store.upgrade() else { break };
            let (published, next) = oneshot::channel();
            let before = previous.replace(next);
            tokio::spawn(async move {
                store.run_batch(batch, before).await;
                let _ = published.send(());
                drop(slot);
            });
        }
    });
    queue
}

impl SqlStore {
    /// Queues `write` on the row of `key` (and the rows of its tenant) and
    /// waits for its batch to commit.
    pub(crate) async fn submit<T, F>(
        &self,
        key: &Key,
        fence: Option<&Lease>,
        write: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&mut View<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Typed { key: key.clone(), fence: fence.cloned(), write, out: None, reply };
        self.queue.send(Work::Write(Box::new(job))).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Queues an audit record and waits for its batch to commit; returns
    /// its id.
    pub(crate) async fn submit_audit(&self, row: audit::ActiveModel) -> Result<u64, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue.send(Work::Audit(Box::new(Record { row, reply }))).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Runs a batch, then, once the batch before it has published its
    /// events to the cache, publishes its own and answers its writers.
    async fn run_batch(&self, mut batch: Batch, before: Option<oneshot::Receiver<()>>) {
        let _guard = match dialect::is_postgres(&self.db) {
            true => None,
            false => Some(self.write_lock.lock().await),
        };
        let result = self.try_batch(&mut batch).await;
        if let Some(before) = before {
            // A batch that ended without a word still ended.
            let _ = before.await;
        }
        match result {
            Ok(committed) => self.answer(batch, committed).await,
            Err(err) if batch.len() == 1 => batch.fail(once(err)),
            // The database is away: running the writes alone would not help.
            Err(StoreError::Unavailable(err)) => {
                let text = err.to_string();
                batch.fail(|| StoreError::Unavailable(DbErr::Custom(text.clone())));
            }
            Err(err) => {
                tracing::debug!(error = %err, writes = batch.len(), "a batch failed; its writes run alone");
                let Batch { jobs, records } = batch;
                let alone = jobs.into_iter().map(|job| Batch { jobs: vec![job], records: Vec::new() }).chain(
                    records.into_iter().map(|record| Batch { jobs: Vec::new(), records: vec![record] }),
                );
                for mut one in alone {
                    match self.try_batch(&mut one).await {
                        Ok(committed) => self.answer(one, committed).await,
                        Err(err) => one.fail(once(err)),
                    }
                }
            }
        }
    }

    /// Publishes a committed batch's events, then answers each of its
    /// writers with its own failure, if any, and each audit record with its id.
    async fn answer(&self, batch: Batch, committed: Committed) {
        self.publish(committed.events).await;
        for (job, failure) in batch.jobs.into_iter().zip(committed.failures) {
            job.finish(failure.map_or(Ok(()), Err));
        }
        for (record, id) in batch.records.into_iter().zip(committed.ids) {
            let _ = record.reply.send(Ok(id));
        }
    }

    /// Runs `batch` in one transaction.
    async fn try_batch(&self, batch: &mut Batch) -> Result<Committed, StoreError> {
        let txn = self.db.begin().await?;
        let fences: Vec<Option<Lease>> = batch.jobs.iter().map(|job| job.fence().cloned()).collect();
        let mut fenced: Vec<Option<StoreError>> = Vec::with_capacity(fences.len());
        for fence in &fences {
            fenced.push(match fence {
                Some(lease) => match lease::check(&txn, lease).await {
                    Err(err @ StoreError::LeaseLost { .. }) => Some(err),
                    other => {
                        other?;
                        None
                    }
                },
                None => None,
            });
        }
        let live: Vec<Key> = batch
            .jobs
            .iter()
            .zip(&fenced)
            .filter(|(_, lost)| lost.is_none())
            .map(|(job, _)| job.key().clone())
            .collect();
        let owners: BTreeSet<String> = live.iter().map(|key| key.owner().name).collect();
        let postgres = dialect::is_postgres(&txn);
        let mut base = Base::default();
        match postgres {
            true => postgres::lock_tenants(&txn, &owners, &mut base).await?,
            false => lock_tenants(&txn, &owners, &mut base).await?,
        }
        let mut needs = Needs::default();
        for owner in &owners {
            needs.ranges.insert((owner.clone(), Kind::NodeGroup));
        }
        needs.keys.extend(live.into_iter().filter(|key| key.kind != Kind::Tenant));
        read_needs(&txn, postgres, needs, &mut base).await?;
        let now = format_time(Utc::now());
        let mut round = 0;
        let (rows, side, changes, failures) = loop {
            let needs = match run_writes(&mut batch.jobs, &fenced, &base, &now) {
                Ok(ran) => break ran,
                Err(needs) => needs,
            };
            round += 1;
            if round > ROUNDS {
                return Err(StoreError::Corrupt("a write kept needing rows its batch had read".into()));
            }
            read_needs(&txn, postgres, needs, &mut base).await?;
            if round == ROUNDS {
                read_whole(&txn, &owners, &mut base).await?;
            }
        };
        let failures = failures.into_iter().zip(fenced).map(|(failure, lost)| lost.or(failure)).collect();
        let (events, ids) = match postgres {
            true => {
                let written = postgres::write(&txn, &base, rows, changes, &batch.records).await?;
                // After the counter, yet waiting on nobody: the side rows
                // are those of tenants this batch holds or creates.
                write_side(&txn, side, &now).await?;
                if let Some(last) = written.last {
                    self.compact(&txn, last).await?;
                }
                self.drop_old_audit(&txn, written.ids.last().map(|id| *id as i64)).await?;
                (written.events, written.ids)
            }
            false => {
                write_rows(&txn, &base, rows).await?;
                write_side(&txn, side, &now).await?;
                let events = self.log(&txn, changes, &base).await?;
                (events, self.append_audit(&txn, &batch.records).await?)
            }
        };
        txn.commit().await?;
        metrics::histogram!(BATCH_SIZE).record(batch.len() as f64);
        Ok(Committed { events, failures, ids })
    }

    /// Appends the batch's audit records, in one statement per chunk, and
    /// drops the oldest beyond the retention; returns their ids in order.
    async fn append_audit(
        &self,
        txn: &DatabaseTransaction,
        records: &[Record],
    ) -> Result<Vec<u64>, StoreError> {
        let mut ids = Vec::with_capacity(records.len());
        for chunk in records.chunks(CHUNK) {
            let rows = chunk.iter().map(|record| record.row.clone());
            let mut keys = audit::Entity::insert_many(rows).exec_with_returning_keys(txn).await?;
            // One statement numbers its rows in order; the order they are
            // returned in is the database's.
            keys.sort_unstable();
            ids.extend(keys);
        }
        self.drop_old_audit(txn, ids.last().copied()).await?;
        Ok(ids.into_iter().map(|id| id as u64).collect())
    }

    /// Drops the audit records beyond the retention, `last` being the
    /// newest id.
    async fn drop_old_audit(&self, txn: &DatabaseTransaction, last: Option<i64>) -> Result<(), StoreError> {
        // Ids grow, so the newest `retention` records are those above this.
        if let Some(last) = last {
            let oldest_kept = last - self.audit_retention as i64;
            if oldest_kept > 0 {
                audit::Entity::delete_many().filter(audit::Column::Id.lte(oldest_kept)).exec(txn).await?;
            }
        }
        Ok(())
    }

    /// Takes revisions for `changes` and appends them to the event log,
    /// each with the revision of its object's change before it: an earlier
    /// one of the batch, else the one stamped on the row the batch read
    /// (unknown for a create).
    async fn log(
        &self,
        txn: &DatabaseTransaction,
        changes: Vec<(EventType, Arc<Object>)>,
        base: &Base,
    ) -> Result<Vec<WatchEvent>, StoreError> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let count = changes.len() as u64;
        let last = dialect::take_revisions(txn, count).await?;
        let first = last + 1 - count;
        let events: Vec<WatchEvent> = (first..)
            .zip(changes)
            .map(|(revision, (event_type, object))| WatchEvent { revision, event_type, object })
            .collect();
        let mut latest: HashMap<&Key, i64> = HashMap::new();
        let previous: Vec<Option<i64>> = events
            .iter()
            .map(|event| {
                let key = &event.object.key;
                let before = match latest.get(key) {
                    Some(revision) => Some(*revision),
                    None if event.event_type == EventType::Added => None,
                    None => base.get(key).map(|row| row.revision),
                };
                latest.insert(key, event.revision as i64);
                before
            })
            .collect();
        for (chunk, previous) in events.chunks(CHUNK).zip(previous.chunks(CHUNK)) {
            let logged = chunk.iter().zip(previous).map(|(event, previous)| event::ActiveModel {
                revision: Set(event.revision as i64),
                kind: Set(event.object.key.kind.as_str().to_string()),
                tenant: Set(event.object.key.tenant.clone()),
                name: Set(event.object.key.name.clone()),
                event_type: Set(event.event_type.as_str().to_string()),
                object: Set(String::from_utf8_lossy(&event.object.json).into_owned()),
                previous: Set(*previous),
            });
            event::Entity::insert_many(logged).exec_without_returning(txn).await?;
        }
        stamp_rows(txn, &events).await?;
        self.compact(txn, last).await?;
        Ok(events)
    }
}

/// Records on each row the batch changed the revision of its last change:
/// one `UPDATE ... SET revision = CASE ...` per chunk. The rows are this
/// transaction's own, so this waits on no other.
async fn stamp_rows(txn: &DatabaseTransaction, events: &[WatchEvent]) -> Result<(), StoreError> {
    let mut last: BTreeMap<&Key, u64> = BTreeMap::new();
    for event in events {
        match event.event_type {
            EventType::Deleted => last.remove(&event.object.key),
            EventType::Added | EventType::Modified => last.insert(&event.object.key, event.revision),
        };
    }
    let stamps: Vec<(&Key, u64)> = last.into_iter().collect();
    for chunk in stamps.chunks(CHUNK) {
        let mut revisions = CaseStatement::new();
        let mut rows = Condition::any();
        for (key, revision) in chunk {
            let row = Condition::all()
                .add(object::Column::Kind.eq(key.kind.as_str()))
                .add(object::Column::Tenant.eq(key.tenant.as_str()))
                .add(object::Column::Name.eq(key.name.as_str()));
            revisions = revisions.case(row.clone(), Expr::val(*revision as i64));
            rows = rows.add(row);
        }
        let revisions = revisions.finally(Expr::col(object::Column::Revision));
        object::Entity::update_many()
            .col_expr(object::Column::Revision, revisions.into())
            .filter(rows)
            .exec(txn)
            .await?;
    }
    Ok(())
}

/// Writes the rows a batch changed: new rows with plain inserts (a row
/// there already fails the batch), changed ones in place, removed ones gone.
async fn write_rows(txn: &DatabaseTransaction, base: &Base, rows: Overlay) -> Result<(), StoreError> {
    let mut inserts = Vec::new();
    let mut updates = Vec::new();
    let mut removals = Condition::any();
    let mut removed = false;
    for (key, row) in rows {
        match (base.get(&key), row) {
            (None, Some(row)) => inserts.push(row),
            (Some(before), Some(row)) if *before != row => updates.push(row),
            (Some(_), None) => {
                removed = true;
                removals = removals.add(
                    Condition::all()
                        .add(object::Column::Kind.eq(key.kind.as_str()))
                        .add(object::Column::Tenant.eq(key.tenant))
                        .add(object::Column::Name.eq(key.name)),
                );
            }
            _ => {}
        }
    }
    tenants_first(&mut inserts);
    if removed {
        object::Entity::delete_many().filter(removals).exec(txn).await?;
    }
    for chunk in inserts.chunks(CHUNK) {
        let models = chunk.iter().cloned().map(|row| object::ActiveModel::from(row).reset_all());
        if let Err(err) = object::Entity::insert_many(models).exec_without_returning(txn).await {
            return Err(exists(err, chunk));
        }
    }
    for chunk in updates.chunks(CHUNK) {
        let models = chunk.iter().cloned().map(|row| object::ActiveModel::from(row).reset_all());
        let columns = [object::Column::Kind, object::Column::Tenant, object::Column::Name];
        let replace = OnConflict::columns(columns)
            .update_columns([
                object::Column::ResourceVersion,
                object::Column::Generation,
                object::Column::CreatedAt,
                object::Column::UpdatedAt,
                object::Column::DeletionTimestamp,
                object::Column::Finalizers,
                object::Column::Labels,
                object::Column::Annotations,
                object::Column::Spec,
                object::Column::Status,
            ])
            .to_owned();
        object::Entity::insert_many(models).on_conflict(replace).exec_without_returning(txn).await?;
    }
    Ok(())
}

/// An insert that found a row there: another replica created the tenant
/// since the batch read the rows. In a batch of several writes, the error
/// makes each of them run again alone.
fn exists(err: DbErr, rows: &[object::Model]) -> StoreError {
    match (err.sql_err(), rows.first()) {
        (Some(SqlErr::UniqueConstraintViolation(_)), Some(row)) => match crate::render::key_of(row) {
            Ok(key) => StoreError::AlreadyExists(key.to_string()),
            Err(err) => err,
        },
        _ => err.into(),
    }
}

async fn write_side(txn: &DatabaseTransaction, side: Vec<Side>, now: &str) -> Result<(), StoreError> {
    for change in side {
        match change {
            Side::Secrets(tenant, sealed) => secrets::insert(txn, &tenant, sealed, now).await?,
            Side::DropSecrets(tenant) => secrets::drop(txn, &tenant).await?,
            Side::DropProjection(tenant) => {
                crate::tool_runs::drop(txn, &tenant).await?;
                projection::Entity::delete_by_id(tenant).exec(txn).await?;
            }
        }
    }
    Ok(())
}

/// Reads what `needs` names: in one statement on PostgreSQL.
async fn read_needs(
    txn: &DatabaseTransaction,
    postgres: bool,
    needs: Needs,
    base: &mut Base,
) -> Result<(), StoreError> {
    match postgres {
        true => postgres::read(txn, needs, base).await,
        false => read(txn, needs, base).await,
    }
}

/// Orders new rows tenants first, so that a tenant another replica created
/// meanwhile is the row named in the error.
fn tenants_first(inserts: &mut [object::Model]) {
    let tenant = Kind::Tenant.as_str();
    inserts
        .sort_by(|a, b| (a.kind != tenant, &a.tenant, &a.name).cmp(&(b.kind != tenant, &b.tenant, &b.name)));
}

/// `err` the first time, for a batch of one.
fn once(err: StoreError) -> impl FnMut() -> StoreError {
    let mut err = Some(err);
    move || err.take().unwrap_or_else(stopped)
}

fn stopped() -> StoreError {
    StoreError::Corrupt("the store's writer has stopped".into())
}
