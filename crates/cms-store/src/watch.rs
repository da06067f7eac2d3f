//! Watches: an initial burst from the cache or a replay from the event log,
//! then live events from the cache's broadcast.

use std::sync::Arc;

use cms_model::Kind;
use futures_util::{StreamExt, stream};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use tokio::sync::broadcast::{self, error::RecvError};

use crate::api::{EventType, Key, WatchError, WatchEvent, WatchItem, WatchStream};
use crate::cache::Broadcast;
use crate::commit::counter;
use crate::entity::{counter, event};
use crate::error::StoreError;
use crate::render::parse_object;
use crate::sql::{SqlStore, load};

/// How many events one read of the log returns at most.
const LOG_BATCH: u64 = 1000;

impl SqlStore {
    pub(crate) async fn open_watch(&self, kind: Kind, since: Option<u64>) -> Result<WatchStream, StoreError> {
        let Some(since) = since else {
            let (objects, revision, receiver) = self.cache.snapshot(kind);
            let burst = objects
                .into_iter()
                .map(move |object| {
                    Ok(WatchItem::Event(WatchEvent { revision, event_type: EventType::Added, object }))
                })
                .chain([Ok(WatchItem::Synced(revision))]);
            return Ok(Box::pin(stream::iter(burst).chain(live(receiver, kind, revision))));
        };
        let (revision, receiver) = self.cache.subscribe();
        if since > revision {
            return Err(StoreError::Future { requested: since, current: revision });
        }
        let first = read_log(&self.db, since, Some(revision), Some(kind)).await?;
        // Compaction only moves forward, so checking after the read proves
        // that the read saw every event after `since`.
        let compacted = counter(&self.db, counter::COMPACTED).await?;
        if since < compacted {
            return Err(StoreError::Gone { requested: since, compacted });
        }
        let replay = replay(self.db.clone(), first, revision, kind);
        Ok(Box::pin(replay.chain(live(receiver, kind, revision))))
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

/// The logged events after `after` (up to `upto`), of one kind or all, at
/// most [`LOG_BATCH`] of them.
async fn read_log(
    db: &DatabaseConnection,
    after: u64,
    upto: Option<u64>,
    kind: Option<Kind>,
) -> Result<Vec<WatchEvent>, StoreError> {
    let mut query = event::Entity::find().filter(event::Column::Revision.gt(after as i64));
    if let Some(upto) = upto {
        query = query.filter(event::Column::Revision.lte(upto as i64));
    }
    if let Some(kind) = kind {
        query = query.filter(event::Column::Kind.eq(kind.as_str()));
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
    kind: Kind,
) -> impl futures_util::Stream<Item = Result<WatchItem, WatchError>> + Send {
    let more = first.len() as u64 == LOG_BATCH;
    let after = first.last().map(|event| event.revision);
    let rest = stream::unfold(after.filter(|_| more), move |after| {
        let db = db.clone();
        async move {
            let after = after?;
            let page = match next_page(&db, after, upto, kind).await {
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
    kind: Kind,
) -> Result<Vec<WatchEvent>, WatchError> {
    let unavailable = |err: StoreError| WatchError::Unavailable(err.to_string());
    let page = read_log(db, after, Some(upto), Some(kind)).await.map_err(unavailable)?;
    let compacted = counter(db, counter::COMPACTED).await.map_err(unavailable)?;
    if after < compacted {
        return Err(WatchError::Lagged);
    }
    Ok(page)
}

/// The live events of `kind` after revision `after`; ends with `Lagged` when
/// the watcher falls more than the broadcast buffer behind.
fn live(
    receiver: broadcast::Receiver<Broadcast>,
    kind: Kind,
    after: u64,
) -> impl futures_util::Stream<Item = Result<WatchItem, WatchError>> + Send {
    stream::unfold(Some(receiver), move |state| async move {
        let mut receiver = state?;
        loop {
            match receiver.recv().await {
                Ok(Broadcast::Event(event)) if event.object.key.kind == kind && event.revision > after => {
                    return Some((Ok(WatchItem::Event(WatchEvent::clone(&event))), Some(receiver)));
                }
                Ok(Broadcast::Event(_)) => continue,
                Ok(Broadcast::Reset) | Err(RecvError::Lagged(_)) => {
                    return Some((Err(WatchError::Lagged), None));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    })
}
