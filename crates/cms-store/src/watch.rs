//! Watches: an initial burst from the cache or a replay from the event log,
//! then live events from the cache's broadcast; of a kind, or of one object
//! of it, whose resume needs only that object's changes to be in the log
//! (none at all when it has not changed since the resume point; each logged
//! change names its object's change before it, which tells whether the
//! object's first change still logged is its first since the resume point).
//! Watches that ask for it report progress past the changes they leave out.

use std::sync::Arc;

use cms_model::Kind;
use futures_util::{StreamExt, stream};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use tokio::sync::broadcast::{
    self,
    error::{RecvError, TryRecvError},
};

use crate::api::{EventType, Key, WatchError, WatchEvent, WatchItem, WatchRequest, WatchStream};
use crate::cache::{Broadcast, Subscription};
use crate::commit::counter;
use crate::entity::{counter, event};
use crate::error::StoreError;
use crate::render::parse_object;
use crate::sql::{SqlStore, load};

/// How many events one read of the log returns at most.
const LOG_BATCH: u64 = 1000;

impl SqlStore {
    pub(crate) async fn open_watch(&self, request: WatchRequest) -> Result<WatchStream, StoreError> {
        let WatchRequest { kind, only, since, progress } = request;
        if let Some(key) = &only
            && key.kind != kind
        {
            return Err(StoreError::Refused(format!("a watch of {} cannot follow {key}", kind.as_str())));
        }
        let filter = Filter { kind, only };
        let Some(since) = since else {
            let (objects, revision, receiver) = self.cache.snapshot(kind, filter.only.as_ref());
            let burst = objects
                .into_iter()
                .map(move |object| {
                    Ok(WatchItem::Event(WatchEvent { revision, event_type: EventType::Added, object }))
                })
                .chain([Ok(WatchItem::Synced(revision))]);
            let live = live(receiver, filter, revision, Progress::new(progress, None));
            return Ok(Box::pin(stream::iter(burst).chain(live)));
        };
        let Subscription { revision, receiver, changed } = self.cache.subscribe(filter.only.as_ref());
        if since > revision {
            return Err(StoreError::Future { requested: since, current: revision });
        }
        let progress = Progress::new(progress, Some(revision));
        if changed.is_some_and(|changed| changed <= since) {
            // The one object watched has not changed since: there is
            // nothing to replay, however far the log has moved on.
            return Ok(Box::pin(live(receiver, filter, revision, progress)));
        }
        let first = read_log(&self.db, since, Some(revision), Some(&filter)).await?;
        // Compaction only moves forward, so checking after the read proves
        // that the read saw every event after `since`.
        let compacted = counter(&self.db, counter::COMPACTED).await?;
        if since < compacted && !self.holds_every_change(&filter, since, first.first()).await? {
            return Err(StoreError::Gone { requested: since, compacted });
        }
        let replay = replay(self.db.clone(), first, revision, filter.clone());
        Ok(Box::pin(replay.chain(live(receiver, filter, revision, progress))))
    }

    /// Whether the log, compacted past `since`, still holds every change of
    /// the one object `filter` follows after `since`: its first logged
    /// change after `since` (`first`) follows one at or before `since`.
    /// Never for a whole kind, nor when that change's predecessor is
    /// unknown (a create, or a change logged before predecessors were).
    async fn holds_every_change(
        &self,
        filter: &Filter,
        since: u64,
        first: Option<&WatchEvent>,
    ) -> Result<bool, StoreError> {
        let (Some(_), Some(first)) = (&filter.only, first) else { return Ok(false) };
        let row = event::Entity::find_by_id(first.revision as i64).one(&self.db).await?;
        Ok(row.and_then(|row| row.previous).is_some_and(|previous| previous as u64 <= since))
    }

    /// Applies to the cache whatever the log holds beyond it: the writes of
    /// other replicas, in revision order. When the log no longer reaches back
    /// to the cache (this replica lagged past the log's retention), reloads
    /// every object instead and cuts off the watchers, which would otherwise
    /// miss the compacted events.
    pub(crate) async fn catch_up(&self) -> Result<(), StoreError> {
        let _turn = self.catch_up_lock.lock().await;
        loop {
            let after = self.cache.revision();
            let events = read_log(&self.db, after, Some(after + LOG_BATCH), None).await?;
            let Some(first) = events.first() else {
                if self.log_reaches(after).await? {
                    return Ok(());
                }
                return self.reload().await;
            };
            if first.revision != after + 1 {
                return self.reload().await;
            }
            let full = events.len() as u64 == LOG_BATCH;
            if self.cache.apply(events).is_err() {
                return self.reload().await;
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Whether the log holds every event after `after`: nothing was
    /// compacted past it, and the log ends no later.
    async fn log_reaches(&self, after: u64) -> Result<bool, StoreError> {
        let compacted = counter(&self.db, counter::COMPACTED).await?;
        let revision = counter(&self.db, counter::REVISION).await?;
        Ok(compacted <= after || revision <= after)
    }

    /// Loads every object afresh into the cache.
    async fn reload(&self) -> Result<(), StoreError> {
        let (objects, revision) = load(&self.db).await?;
        tracing::warn!(
            from = self.cache.revision(),
            to = revision,
            "the event log no longer reaches this replica's cache: reloaded it, and watchers must resume"
        );
        self.cache.replace(objects, revision);
        Ok(())
    }
}

/// What a watch follows: a kind, or one object of it.
#[derive(Debug, Clone)]
struct Filter {
    kind: Kind,
    only: Option<Key>,
}

impl Filter {
    fn matches(&self, key: &Key) -> bool {
        key.kind == self.kind && self.only.as_ref().is_none_or(|only| only == key)
    }
}

/// The logged events after `after` (up to `upto`), those `filter` follows or
/// all, at most [`LOG_BATCH`] of them.
async fn read_log(
    db: &DatabaseConnection,
    after: u64,
    upto: Option<u64>,
    filter: Option<&Filter>,
) -> Result<Vec<WatchEvent>, StoreError> {
    let mut query = event::Entity::find().filter(event::Column::Revision.gt(after as i64));
    if let Some(upto) = upto {
        query = query.filter(event::Column::Revision.lte(upto as i64));
    }
    if let Some(filter) = filter {
        query = query.filter(event::Column::Kind.eq(filter.kind.as_str()));
        if let Some(key) = &filter.only {
            query = query
                .filter(event::Column::Tenant.eq(key.tenant.as_str()))
                .filter(event::Column::Name.eq(key.name.as_str()));
        }
    }
    let rows = query.order_by_asc(event::Column::Revision).limit(LOG_BATCH).all(db).await?;
    rows.into_iter()
        .map(|row| {
            let kind = Kind::from_name(&row.kind)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown kind {:?} in the log", row.kind)))?;
            let event_type = EventType::from_name(&row.event_type)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown event type {:?}", row.event_type)))?;
            let object = parse_object(Key { kind, tenant: row.tenant, name: row.name }, row.object)?;
            Ok(WatchEvent { revision: row.revision as u64, event_type, object: Arc::new(object) })
        })
        .collect()
}

/// A resumed watch's replay up to `upto`, starting with the `first` page
/// and reading the next page of the log only when the watcher has taken the
/// last: a watcher far behind never holds more than a page. Should the log
/// be compacted past a page while the watcher reads, the watch is cut off,
/// and resuming it answers 410.
fn replay(
    db: DatabaseConnection,
    first: Vec<WatchEvent>,
    upto: u64,
    filter: Filter,
) -> impl futures_util::Stream<Item = Result<WatchItem, WatchError>> + Send {
    let more = first.len() as u64 == LOG_BATCH;
    let after = first.last().map(|event| event.revision);
    let rest = stream::unfold(after.filter(|_| more), move |after| {
        let db = db.clone();
        let filter = filter.clone();
        async move {
            let after = after?;
            let page = match next_page(&db, after, upto, &filter).await {
                Ok(page) => page,
                Err(err) => return Some((vec![Err(err)], None)),
            };
            let more = page.len() as u64 == LOG_BATCH;
            let last = page.last().map(|event| event.revision).filter(|_| more);
            Some((page.into_iter().map(|event| Ok(WatchItem::Event(event))).collect(), last))
        }
    });
    let first = first.into_iter().map(|event| Ok(WatchItem::Event(event)));
    stream::iter(first).chain(rest.flat_map(stream::iter))
}

/// The page of the log after `after`, if the log still holds every event
/// after it.
async fn next_page(
    db: &DatabaseConnection,
    after: u64,
    upto: u64,
    filter: &Filter,
) -> Result<Vec<WatchEvent>, WatchError> {
    let unavailable = |err: StoreError| WatchError::Unavailable(err.to_string());
    let page = read_log(db, after, Some(upto), Some(filter)).await.map_err(unavailable)?;
    let compacted = counter(db, counter::COMPACTED).await.map_err(unavailable)?;
    if after < compacted {
        return Err(WatchError::Lagged);
    }
    Ok(page)
}

/// Whether a watch reports progress, and the revision it has yet to report.
#[derive(Debug, Clone, Copy)]
struct Progress {
    wanted: bool,
    pending: Option<u64>,
}

impl Progress {
    /// Progress as asked, with `start` to report first.
    fn new(wanted: bool, start: Option<u64>) -> Progress {
        Progress { wanted, pending: start.filter(|_| wanted) }
    }
}

/// The live events `filter` follows after revision `after`; ends with
/// `Lagged` when the watcher falls more than the broadcast buffer behind.
/// With progress, the revision of the last event left out is yielded as
/// [`WatchItem::Synced`] once no event waits, so that a quiet watch learns
/// that the store moved on without a report per event.
fn live(
    receiver: broadcast::Receiver<Broadcast>,
    filter: Filter,
    after: u64,
    progress: Progress,
) -> impl futures_util::Stream<Item = Result<WatchItem, WatchError>> + Send {
    stream::unfold(Some((receiver, progress)), move |state| {
        let filter = filter.clone();
        async move {
            let (mut receiver, mut progress) = state?;
            loop {
                let next = match progress.pending {
                    Some(revision) => match receiver.try_recv() {
                        Err(TryRecvError::Empty) => {
                            progress.pending = None;
                            return Some((Ok(WatchItem::Synced(revision)), Some((receiver, progress))));
                        }
                        Ok(item) => Ok(item),
                        Err(TryRecvError::Lagged(missed)) => Err(RecvError::Lagged(missed)),
                        Err(TryRecvError::Closed) => Err(RecvError::Closed),
                    },
                    None => receiver.recv().await,
                };
                match next {
                    Ok(Broadcast::Event(event)) if event.revision <= after => continue,
                    Ok(Broadcast::Event(event)) if filter.matches(&event.object.key) => {
                        progress.pending = None;
                        let item = WatchItem::Event(WatchEvent::clone(&event));
                        return Some((Ok(item), Some((receiver, progress))));
                    }
                    Ok(Broadcast::Event(event)) => {
                        if progress.wanted {
                            progress.pending = Some(event.revision);
                        }
                    }
                    Ok(Broadcast::Reset) | Err(RecvError::Lagged(_)) => {
                        return Some((Err(WatchError::Lagged), None));
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        }
    })
}
