//! The tenant watch as server-sent events: an `ADDED` burst, an `id: R`
//! frame once in sync, then live frames, with a heartbeat comment, until the
//! store ends the watch, the client goes away or the server shuts down.
//! Each stream holds one of its caller's watch slots (`cms_auth::Limits`),
//! dropped with the stream, so freed when the client goes.
//!
//! A watch may be filtered ([`WatchFilter`], in `watch/filter.rs`): one
//! tenant by name (the store then follows that tenant alone, so that its
//! resume does not depend on others' changes), a label selector, and any
//! predicate another part of the service adds. With `allowWatchBookmarks`
//! the stream also sends `BOOKMARK` frames carrying the revision it has
//! caught up with: every bookmark interval, and soon after the store moved
//! past the last frame sent while the watch had nothing to show.

use std::cell::RefCell;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};
use bytes::{BufMut, Bytes, BytesMut};
use cms_auth::WatchSlot;
use cms_model::Kind;
use cms_store::{EventType, Key, Object, WatchEvent, WatchItem, WatchRequest, WatchStream};
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, MissedTickBehavior, interval_at};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::state::AppState;

mod filter;
mod query;

pub(crate) use filter::{Predicate, WatchFilter};
pub(crate) use query::WatchQuery;

use filter::Shown;

const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// How soon a bookmark follows progress that no frame carried, at most.
const BOOKMARK_DELAY: Duration = Duration::from_secs(1);

/// One of the caller's watch slots, or 429 when it holds as many as it may.
/// Without authentication there is no identity, and no slot.
pub(crate) fn slot(req: &HttpRequest, state: &AppState) -> Result<Option<WatchSlot>, ApiError> {
    if state.options.insecure_disable_auth {
        return Ok(None);
    }
    let caller = crate::auth::caller(req)?;
    Ok(Some(state.auth.limits().open_watch(&caller)?))
}

/// What a watch follows and how.
#[derive(Debug, Clone)]
pub(crate) struct WatchPlan {
    pub(crate) kind: Kind,
    /// The revision to resume after; a burst opens the watch without one.
    pub(crate) since: Option<u64>,
    /// Which objects the stream shows.
    pub(crate) filter: WatchFilter,
    /// Whether the stream sends `BOOKMARK` frames.
    pub(crate) bookmarks: bool,
}

/// Opens a watch as `plan` says; the stream holds `slot` until it ends.
pub(crate) async fn respond(
    state: &AppState,
    plan: WatchPlan,
    slot: Option<WatchSlot>,
) -> Result<HttpResponse, ApiError> {
    let WatchPlan { kind, since, filter, bookmarks } = plan;
    let store = state.store();
    let watch = match (&filter.name, bookmarks) {
        (None, false) => store.watch(kind, since).await?,
        (name, _) => {
            let request = match name {
                Some(name) => WatchRequest::only(Key { kind, tenant: String::new(), name: name.clone() }),
                None => WatchRequest::kind(kind),
            };
            let request = request.since(since);
            store.watch_with(if bookmarks { request.with_progress() } else { request }).await?
        }
    };
    let cadence = Cadence {
        heartbeat: state.options.watch_heartbeat,
        bookmarks: bookmarks.then_some(state.options.watch_bookmark_interval),
    };
    let frames = frames(watch, since, filter, cadence, state.shutdown.clone(), slot);
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/event-stream")))
        .insert_header((CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        .insert_header(("x-accel-buffering", HeaderValue::from_static("no")))
        .streaming(frames))
}

/// When a stream sends what is not an event.
#[derive(Debug, Clone, Copy)]
struct Cadence {
    heartbeat: Duration,
    /// The bookmark interval, when the client asked for bookmarks.
    bookmarks: Option<Duration>,
}

/// The SSE frames of a watch. Events before [`WatchItem::Synced`] belong to
/// the initial burst and carry no id; a resumed watch (after `since`) has no
/// burst, so every event carries its revision. One frame is produced at a
/// time, when the connection takes it, so a slow client buffers nothing here.
fn frames(
    mut watch: WatchStream,
    since: Option<u64>,
    filter: WatchFilter,
    cadence: Cadence,
    shutdown: CancellationToken,
    slot: Option<WatchSlot>,
) -> impl Stream<Item = Result<Bytes, Infallible>> + 'static {
    // A zero period would make the timers panic.
    let heartbeat = cadence.heartbeat.max(Duration::from_millis(1));
    let bookmark_period = cadence.bookmarks.map(|period| period.max(Duration::from_millis(1)));
    let bookmark_delay = bookmark_period.map_or(BOOKMARK_DELAY, |period| period.min(BOOKMARK_DELAY));
    let filtered = !filter.is_everything();
    async_stream::stream! {
        let _open = crate::metrics::OpenWatch::new();
        // Dropped with the stream, whether it ends or is dropped unfinished.
        let _slot = slot;
        let mut synced = since.is_some();
        let mut shown = Shown::new(since.is_some());
        // The revision the watch has caught up with, and the id last sent.
        let mut reached = since.unwrap_or(0);
        let mut sent = since.unwrap_or(0);
        let mut ticks = interval_at(Instant::now() + heartbeat, heartbeat);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let period = bookmark_period.unwrap_or(heartbeat);
        let mut marks = interval_at(Instant::now() + period, period);
        marks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let idle = tokio::time::sleep(bookmark_delay);
        tokio::pin!(idle);
        let mut idle_armed = false;
        let cancelled = shutdown.cancelled_owned();
        tokio::pin!(cancelled);
        loop {
            if bookmark_period.is_some() && synced && reached > sent && !idle_armed {
                idle.as_mut().reset(Instant::now() + bookmark_delay);
                idle_armed = true;
            }
            tokio::select! {
                () = &mut cancelled => break,
                _ = ticks.tick() => yield Ok(Bytes::from_static(HEARTBEAT)),
                _ = marks.tick(), if bookmark_period.is_some() && synced => {
                    idle_armed = false;
                    sent = reached;
                    yield Ok(bookmark_frame(reached));
                }
                () = &mut idle, if idle_armed => {
                    idle_armed = false;
                    if reached > sent {
                        sent = reached;
                        yield Ok(bookmark_frame(reached));
                    }
                }
                item = watch.next() => match item {
                    None => break,
                    Some(Err(err)) => {
                        tracing::info!(error = %err, "watch stream ended");
                        break;
                    }
                    Some(Ok(WatchItem::Synced(revision))) if !synced => {
                        synced = true;
                        (reached, sent) = (revision, revision);
                        yield Ok(Bytes::from(format!("id: {revision}\n\n")));
                    }
                    Some(Ok(WatchItem::Synced(revision))) => reached = reached.max(revision),
                    Some(Ok(WatchItem::Event(event))) => {
                        let shown_as = match filtered {
                            true => shown.decide(&filter, event.event_type, &event.object),
                            false => Some(event.event_type),
                        };
                        if synced {
                            reached = reached.max(event.revision);
                        }
                        if let Some(event_type) = shown_as {
                            if synced {
                                sent = event.revision;
                                idle_armed = false;
                            }
                            yield Ok(event_frame(&event, event_type, synced));
                        }
                    }
                },
            }
        }
    }
}

/// The last event frame this thread built, with what it was built from:
/// every watcher served by the thread gets the same bytes for one event,
/// built once. The object is held, so its address names it alone.
struct LastFrame {
    object: Arc<Object>,
    revision: u64,
    shown_as: EventType,
    with_id: bool,
    frame: Bytes,
}

thread_local! {
    static LAST_FRAME: RefCell<Option<LastFrame>> = const { RefCell::new(None) };
}

/// `id: <revision>` (live events only) and `data: {"type":..,"object":..}`,
/// the event shown as `event_type`; the same bytes as the frame this
/// thread built last when that was of the same event, shown alike.
fn event_frame(event: &WatchEvent, event_type: EventType, with_id: bool) -> Bytes {
    LAST_FRAME.with_borrow_mut(|last| {
        if let Some(last) = last.as_ref()
            && Arc::ptr_eq(&last.object, &event.object)
            && last.revision == event.revision
            && last.shown_as == event_type
            && last.with_id == with_id
        {
            return last.frame.clone();
        }
        let frame = build_frame(event, event_type, with_id);
        *last = Some(LastFrame {
            object: event.object.clone(),
            revision: event.revision,
            shown_as: event_type,
            with_id,
            frame: frame.clone(),
        });
        frame
    })
}

fn build_frame(event: &WatchEvent, event_type: EventType, with_id: bool) -> Bytes {
    let json = &event.object.json;
    let mut frame = BytesMut::with_capacity(json.len() + 64);
    if with_id {
        frame.put_slice(b"id: ");
        frame.put_slice(event.revision.to_string().as_bytes());
        frame.put_u8(b'\n');
    }
    frame.put_slice(b"data: {\"type\":\"");
    frame.put_slice(event_type.as_str().as_bytes());
    frame.put_slice(b"\",\"object\":");
    frame.put_slice(json);
    frame.put_slice(b"}\n\n");
    frame.freeze()
}

/// A `BOOKMARK` at `revision`, in the shape client-go reads: an object with
/// only `metadata.resourceVersion`, a string as in Kubernetes.
fn bookmark_frame(revision: u64) -> Bytes {
    Bytes::from(format!(
        "id: {revision}\ndata: {{\"type\":\"BOOKMARK\",\"object\":{{\"metadata\":{{\"resourceVersion\":\"{revision}\"}}}}}}\n\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_store::WatchError;
    use futures_util::stream;

    fn event(revision: u64, event_type: EventType, name: &str) -> Result<WatchItem, WatchError> {
        let object = Object {
            key: Key::tenant(name),
            resource_version: revision,
            generation: 1,
            deleting: false,
            json: Bytes::from(format!(r#"{{"metadata":{{"name":"{name}"}}}}"#)),
        };
        Ok(WatchItem::Event(WatchEvent { revision, event_type, object: Arc::new(object) }))
    }

    const QUIET: Cadence = Cadence { heartbeat: Duration::from_secs(60), bookmarks: None };

    async fn collect(items: Vec<Result<WatchItem, WatchError>>, since: Option<u64>) -> String {
        let watch: WatchStream = Box::pin(stream::iter(items));
        let frames = frames(watch, since, WatchFilter::default(), QUIET, CancellationToken::new(), None);
        let chunks: Vec<_> = frames.collect().await;
        chunks.into_iter().flatten().map(|chunk| String::from_utf8_lossy(&chunk).into_owned()).collect()
    }

    #[actix_web::test]
    async fn burst_then_synced_then_live() {
        let text = collect(
            vec![
                event(4, EventType::Added, "a"),
                Ok(WatchItem::Synced(4)),
                event(5, EventType::Modified, "a"),
                Err(WatchError::Lagged),
                event(6, EventType::Deleted, "a"),
            ],
            None,
        )
        .await;
        assert_eq!(
            text,
            "data: {\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n\n\
             id: 4\n\n\
             id: 5\ndata: {\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n\n"
        );
    }

    #[actix_web::test]
    async fn resumed_watches_carry_ids_from_the_start() {
        let text = collect(vec![event(9, EventType::Deleted, "b")], Some(8)).await;
        assert!(text.starts_with("id: 9\ndata: {\"type\":\"DELETED\""), "{text}");
    }

    #[test]
    fn watchers_of_one_event_share_its_frame_and_no_other() {
        let Ok(WatchItem::Event(first)) = event(7, EventType::Modified, "a") else { unreachable!() };
        let shared = event_frame(&first, EventType::Modified, true);
        let again = event_frame(&first.clone(), EventType::Modified, true);
        assert_eq!(shared.as_ptr(), again.as_ptr(), "a second watcher of the event gets the same bytes");
        let added = event_frame(&first, EventType::Added, true);
        assert!(added.starts_with(b"id: 7\ndata: {\"type\":\"ADDED\""), "{added:?}");
        let bare = event_frame(&first, EventType::Added, false);
        assert!(bare.starts_with(b"data: {\"type\":\"ADDED\""), "{bare:?}");
        // Another object of the same revision and name is another event.
        let Ok(WatchItem::Event(other)) = event(7, EventType::Added, "a") else { unreachable!() };
        let rebuilt = event_frame(&other, EventType::Added, false);
        assert_ne!(rebuilt.as_ptr(), bare.as_ptr());
        assert_eq!(rebuilt, bare);
    }

    #[actix_web::test]
    async fn a_stream_holds_its_slot_until_it_ends_or_is_dropped() {
        use cms_auth::{Caller, Credential, LimitOptions, Limits};
        let limits = Limits::new(LimitOptions { watches_per_identity: 2, ..LimitOptions::default() });
        let viewer = Caller::local("viewer", cms_model::UserRole::View, Credential::Login);
        let open = |shutdown: &CancellationToken| {
            let slot = limits.open_watch(&viewer).expect("a slot");
            let watch: WatchStream = Box::pin(stream::pending());
            Box::pin(frames(watch, None, WatchFilter::default(), QUIET, shutdown.clone(), Some(slot)))
        };
        let shutdown = CancellationToken::new();
        let dropped = open(&shutdown);
        let mut ended = open(&shutdown);
        assert!(limits.open_watch(&viewer).is_err(), "both slots are held");
        drop(dropped);
        assert_eq!(
            limits.open_watches(&viewer),
            1,
            "a dropped stream, as when its client goes, frees its slot"
        );
        shutdown.cancel();
        assert!(ended.next().await.is_none());
        assert_eq!(limits.open_watches(&viewer), 0, "an ended stream frees its slot at once");
        drop(ended);
        assert_eq!(limits.open_watches(&viewer), 0);
    }

    #[actix_web::test]
    async fn heartbeats_and_shutdown() {
        let watch: WatchStream = Box::pin(stream::pending());
        let shutdown = CancellationToken::new();
        let cadence = Cadence { heartbeat: Duration::from_millis(10), bookmarks: None };
        let mut frames =
            Box::pin(frames(watch, None, WatchFilter::default(), cadence, shutdown.clone(), None));
        let first = frames.next().await.and_then(Result::ok);
        assert_eq!(first.as_deref(), Some(HEARTBEAT));
        shutdown.cancel();
        assert!(frames.next().await.is_none(), "the stream ends on shutdown");
    }

    fn labelled(
        revision: u64,
        event_type: EventType,
        name: &str,
        team: &str,
    ) -> Result<WatchItem, WatchError> {
        let json = format!(r#"{{"metadata":{{"name":"{name}","labels":{{"team":"{team}"}}}}}}"#);
        let object = Object {
            key: Key::tenant(name),
            resource_version: revision,
            generation: 1,
            deleting: false,
            json: Bytes::from(json),
        };
        Ok(WatchItem::Event(WatchEvent { revision, event_type, object: Arc::new(object) }))
    }

    /// The frames' lines without heartbeats, one string per frame.
    fn blocks(text: &str) -> Vec<String> {
        text.split("\n\n")
            .filter(|block| !block.is_empty() && *block != ": heartbeat")
            .map(str::to_string)
            .collect()
    }

    #[actix_web::test]
    async fn filtered_streams_add_what_starts_matching_and_delete_what_stops() {
        let filter = WatchFilter {
            labels: Some(cms_model::LabelSelector::parse("team=red").unwrap()),
            ..WatchFilter::default()
        };
        let items = vec![
            labelled(4, EventType::Added, "a", "red"),
            labelled(4, EventType::Added, "b", "blue"),
            Ok(WatchItem::Synced(4)),
            labelled(5, EventType::Modified, "b", "red"),
            labelled(6, EventType::Modified, "a", "blue"),
            labelled(7, EventType::Modified, "a", "green"),
            labelled(8, EventType::Deleted, "b", "red"),
        ];
        let watch: WatchStream = Box::pin(stream::iter(items));
        let frames = frames(watch, None, filter, QUIET, CancellationToken::new(), None);
        let text: String = frames
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect();
        let summary: Vec<String> = blocks(&text)
            .iter()
            .map(|block| {
                let id = block.lines().find_map(|line| line.strip_prefix("id: ")).unwrap_or("-");
                let data = block.lines().find_map(|line| line.strip_prefix("data: "));
                let data: serde_json::Value =
                    data.map(|d| serde_json::from_str(d).unwrap()).unwrap_or_default();
                format!(
                    "{id} {} {}",
                    data["type"].as_str().unwrap_or("-"),
                    data["object"]["metadata"]["name"].as_str().unwrap_or("-")
                )
            })
            .collect();
        assert_eq!(summary, ["- ADDED a", "4 - -", "5 ADDED b", "6 DELETED a", "8 DELETED b"]);
    }

    async fn next(frames: &mut (impl Stream<Item = Result<Bytes, Infallible>> + Unpin)) -> String {
        String::from_utf8(frames.next().await.expect("a frame").expect("bytes").to_vec()).expect("text")
    }

    #[actix_web::test]
    async fn bookmarks_carry_the_revision_the_watch_reached() {
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let watch: WatchStream = Box::pin(async_stream::stream! {
            while let Some(item) = receiver.recv().await {
                yield item;
            }
        });
        let filter = WatchFilter { name: Some("quiet".to_string()), ..WatchFilter::default() };
        let cadence =
            Cadence { heartbeat: Duration::from_secs(60), bookmarks: Some(Duration::from_secs(3600)) };
        let shutdown = CancellationToken::new();
        let mut frames = Box::pin(frames(watch, Some(10), filter, cadence, shutdown.clone(), None));
        // Progress past others' changes: a bookmark follows within a second.
        sender.send(Ok(WatchItem::Synced(12))).unwrap();
        assert_eq!(
            next(&mut frames).await,
            "id: 12\ndata: {\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n\n"
        );
        sender.send(labelled(13, EventType::Modified, "quiet", "red")).unwrap();
        assert!(next(&mut frames).await.starts_with("id: 13\ndata: {\"type\":\"MODIFIED\""));
        sender.send(Ok(WatchItem::Synced(20))).unwrap();
        assert!(next(&mut frames).await.starts_with("id: 20\ndata: {\"type\":\"BOOKMARK\""));
        shutdown.cancel();
        assert!(frames.next().await.is_none());
    }
}
