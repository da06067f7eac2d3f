//! Group commit: the writes of a replica queue for one task, which runs all
//! the writes waiting at once in one transaction.
//!
//! A batch locks the rows of the tenants its writes touch (on PostgreSQL the
//! tenant rows, `FOR UPDATE`, in name order), loads them with every row inside
//! those tenants, and runs each write in memory on a [`View`] of them. A write
//! that fails leaves nothing behind; the others go on. The batch then writes
//! the rows in a few multi-row statements, takes its revisions from the
//! counter row, logs the events and commits: one commit, and one flush of the
//! database's log, for every write in it. Should the batch's statements fail,
//! each write runs again alone, so that one write's failure (a tenant created
//! meanwhile by another replica) is reported to that write only.
//!
//! The counter row is taken last, by an `UPDATE` inside the transaction, so
//! on PostgreSQL concurrent replicas' transactions queue on it and commit in
//! the order of their revisions: a reader of the log never sees revision
//! `r + 1` before `r`. A fenced write (one that carries a [`Lease`]) is
//! checked, in the same transaction, against the lease.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use chrono::Utc;
use cms_model::Kind;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, DatabaseTransaction, DbErr, EntityTrait,
    QueryFilter, QueryOrder, QuerySelect, SqlErr, TransactionTrait, sea_query::LockType,
};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::api::{EventType, Key, Object, WatchEvent};
use crate::dialect;
use crate::entity::{event, object, projection};
use crate::error::StoreError;
use crate::lease::{self, Lease};
use crate::render::format_time;
use crate::secrets;
use crate::sql::SqlStore;
use crate::view::{Outcome, Overlay, Side, View};

/// The most writes one batch takes.
const MOST: usize = 64;

/// The most batches a replica runs at once on PostgreSQL.
const IN_FLIGHT: usize = 4;

/// Rows per multi-row statement, well within both databases' limits on
/// bound parameters.
const CHUNK: usize = 200;

/// The queue of a replica's writes.
pub(crate) type Queue = mpsc::UnboundedSender<Box<dyn Job>>;

/// A queued write.
pub(crate) trait Job: Send {
    /// The tenant whose rows the write touches.
    fn owner(&self) -> &str;
    fn fence(&self) -> Option<&Lease>;
    /// Runs the write on `view`; it may run again, in a later transaction.
    fn run(&mut self, view: &mut View<'_>) -> Result<(), StoreError>;
    /// Tells the writer how it ended, once the transaction has.
    fn finish(self: Box<Self>, result: Result<(), StoreError>);
}

struct Typed<T, F> {
    owner: String,
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
    fn owner(&self) -> &str {
        &self.owner
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

/// Starts the task that runs the writes of `store`; it ends with the store.
/// On PostgreSQL up to [`IN_FLIGHT`] batches run at once, so that one
/// batch's round trips overlap another's; SQLite has one writer.
pub(crate) fn start(store: Weak<SqlStore>, postgres: bool) -> Queue {
    let (queue, mut jobs) = mpsc::unbounded_channel::<Box<dyn Job>>();
    let slots = Arc::new(Semaphore::new(if postgres { IN_FLIGHT } else { 1 }));
    tokio::spawn(async move {
        let mut previous: Option<oneshot::Receiver<()>> = None;
        while let Some(first) = jobs.recv().await {
            // Writes queue up while every slot is busy, and go together.
            let Ok(slot) = slots.clone().acquire_owned().await else { break };
            let mut batch = vec![first];
            while batch.len() < MOST {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
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
    /// Queues `write` on the rows of `owner`'s tenant and waits for its
    /// batch to commit.
    pub(crate) async fn submit<T, F>(
        &self,
        owner: &Key,
        fence: Option<&Lease>,
        write: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&mut View<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let owner = owner.name.clone();
        let job = Typed { owner, fence: fence.cloned(), write, out: None, reply };
        self.queue.send(Box::new(job)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Runs a batch, then, once the batch before it has published its
    /// events to the cache, publishes its own and answers its writers.
    async fn run_batch(&self, mut jobs: Vec<Box<dyn Job>>, before: Option<oneshot::Receiver<()>>) {
        let _guard = match dialect::is_postgres(&self.db) {
            true => None,
            false => Some(self.write_lock.lock().await),
        };
        let result = self.try_batch(&mut jobs).await;
        if let Some(before) = before {
            // A batch that ended without a word still ended.
            let _ = before.await;
        }
        match result {
            Ok((events, failures)) => self.answer(jobs, events, failures).await,
            Err(err) if jobs.len() == 1 => jobs.pop().expect("one job").finish(Err(err)),
            // The database is away: running the writes alone would not help.
            Err(StoreError::Unavailable(err)) => {
                for job in jobs {
                    job.finish(Err(StoreError::Unavailable(DbErr::Custom(err.to_string()))));
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, writes = jobs.len(), "a batch failed; its writes run alone");
                for job in jobs {
                    let mut alone = vec![job];
                    match self.try_batch(&mut alone).await {
                        Ok((events, failures)) => self.answer(alone, events, failures).await,
                        Err(err) => alone.pop().expect("one job").finish(Err(err)),
                    }
                }
            }
        }
    }

    /// Publishes a committed batch's events, then answers each of its
    /// writers with its own failure, if any.
    async fn answer(
        &self,
        jobs: Vec<Box<dyn Job>>,
        events: Vec<WatchEvent>,
        failures: Vec<Option<StoreError>>,
    ) {
        self.publish(events).await;
        for (job, failure) in jobs.into_iter().zip(failures) {
            job.finish(failure.map_or(Ok(()), Err));
        }
    }

    /// Runs `jobs` in one transaction. Returns the events logged and, for
    /// each job, the error that made it write nothing.
    async fn try_batch(
        &self,
        jobs: &mut [Box<dyn Job>],
    ) -> Result<(Vec<WatchEvent>, Vec<Option<StoreError>>), StoreError> {
        let txn = self.db.begin().await?;
        let mut failures: Vec<Option<StoreError>> = Vec::with_capacity(jobs.len());
        let fences: Vec<Option<Lease>> = jobs.iter().map(|job| job.fence().cloned()).collect();
        for fence in &fences {
            failures.push(match fence {
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
        let owners: BTreeSet<String> = jobs
            .iter()
            .zip(&failures)
            .filter(|(_, failure)| failure.is_none())
            .map(|(job, _)| job.owner().to_string())
            .collect();
        let base = load(&txn, &owners).await?;
        let now = format_time(Utc::now());
        let mut rows = Overlay::new();
        let mut side = Vec::new();
        let mut changes = Vec::new();
        for (job, failure) in jobs.iter_mut().zip(failures.iter_mut()) {
            if failure.is_some() {
                continue;
            }
            let mut view = View::new(&base, &rows, &now);
            match job.run(&mut view).and_then(|()| view.finish()) {
                Ok(Outcome { rows: own, side: own_side, events }) => {
                    rows.extend(own);
                    side.extend(own_side);
                    changes.extend(events);
                }
                Err(err) => *failure = Some(err),
            }
        }
        write_rows(&txn, &base, rows).await?;
        write_side(&txn, side, &now).await?;
        let events = self.log(&txn, changes).await?;
        txn.commit().await?;
        Ok((events, failures))
    }

    /// Takes revisions for `changes` and appends them to the event log.
    async fn log(
        &self,
        txn: &DatabaseTransaction,
        changes: Vec<(EventType, Arc<Object>)>,
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
        for chunk in events.chunks(CHUNK) {
            let logged = chunk.iter().map(|event| event::ActiveModel {
                revision: Set(event.revision as i64),
                kind: Set(event.object.key.kind.as_str().to_string()),
                tenant: Set(event.object.key.tenant.clone()),
                name: Set(event.object.key.name.clone()),
                event_type: Set(event.event_type.as_str().to_string()),
                object: Set(String::from_utf8_lossy(&event.object.json).into_owned()),
            });
            event::Entity::insert_many(logged).exec_without_returning(txn).await?;
        }
        self.compact(txn, last).await?;
        Ok(events)
    }
}

/// Locks the tenant rows of `owners` and reads them with every row inside
/// them. The children are read by a second statement, after the locks are
/// held, so that on PostgreSQL it sees every row committed before them.
async fn load(
    txn: &DatabaseTransaction,
    owners: &BTreeSet<String>,
) -> Result<BTreeMap<Key, object::Model>, StoreError> {
    let mut base = BTreeMap::new();
    if owners.is_empty() {
        return Ok(base);
    }
    let mut tenants = object::Entity::find()
        .filter(object::Column::Kind.eq(Kind::Tenant.as_str()))
        .filter(object::Column::Tenant.eq(""))
        .filter(object::Column::Name.is_in(owners.iter().cloned()))
        .order_by_asc(object::Column::Name);
    if dialect::is_postgres(txn) {
        tenants = tenants.lock(LockType::Update);
    }
    let tenants = tenants.all(txn).await?;
    // Naming the kinds lets both databases walk the primary key,
    // `(kind, tenant, name)`, instead of scanning every row.
    let kinds = Kind::ALL.into_iter().filter(|kind| *kind != Kind::Tenant).map(Kind::as_str);
    let children = object::Entity::find()
        .filter(object::Column::Kind.is_in(kinds))
        .filter(object::Column::Tenant.is_in(owners.iter().cloned()))
        .all(txn)
        .await?;
    for row in tenants.into_iter().chain(children) {
        base.insert(crate::render::key_of(&row)?, row);
    }
    Ok(base)
}

/// Writes the rows a batch changed: new rows with plain inserts (a row
/// there already fails the batch), changed ones in place, removed ones gone.
async fn write_rows(
    txn: &DatabaseTransaction,
    base: &BTreeMap<Key, object::Model>,
    rows: Overlay,
) -> Result<(), StoreError> {
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
    // Tenants first, so that a tenant another replica created meanwhile is
    // the row named in the error.
    inserts.sort_by(|a, b| {
        (a.kind != Kind::Tenant.as_str(), &a.tenant, &a.name).cmp(&(
            b.kind != Kind::Tenant.as_str(),
            &b.tenant,
            &b.name,
        ))
    });
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
                projection::Entity::delete_by_id(tenant).exec(txn).await?;
            }
        }
    }
    Ok(())
}

fn stopped() -> StoreError {
    StoreError::Corrupt("the store's writer has stopped".into())
}
