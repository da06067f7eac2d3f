//! The tenant watch as server-sent events: an `ADDED` burst, an `id: R`
//! frame once in sync, then live frames, with a heartbeat comment, until the
//! store ends the watch, the client goes away or the server shuts down.
//! Each stream holds one of its caller's watch slots (`cms_auth::Limits`),
//! dropped with the stream, so freed when the client goes.

use std::convert::Infallible;
use std::time::Duration;

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};
use bytes::{BufMut, Bytes, BytesMut};
use cms_auth::WatchSlot;
use cms_model::Kind;
use cms_store::{WatchEvent, WatchItem, WatchStream};
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, MissedTickBehavior, interval_at};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::state::AppState;

const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// One of the caller's watch slots, or 429 when it holds as many as it may.
/// Without authentication there is no identity, and no slot.
pub(crate) fn slot(req: &HttpRequest, state: &AppState) -> Result<Option<WatchSlot>, ApiError> {
    if state.options.insecure_disable_auth {
        return Ok(None);
    }
    let caller = crate::auth::caller(req)?;
    Ok(Some(state.auth.limits().open_watch(&caller)?))
}

/// Opens a watch of `kind`, resuming after `since` when given; the stream
/// holds `slot` until it ends.
pub(crate) async fn respond(
    state: &AppState,
    kind: Kind,
    since: Option<u64>,
    slot: Option<WatchSlot>,
) -> Result<HttpResponse, ApiError> {
    let watch = state.store().watch(kind, since).await?;
    let heartbeat = state.options.watch_heartbeat;
    let frames = frames(watch, since.is_some(), heartbeat, state.shutdown.clone(), slot);
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/event-stream")))
        .insert_header((CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        .insert_header(("x-accel-buffering", HeaderValue::from_static("no")))
        .streaming(frames))
}

/// The SSE frames of a watch. Events before [`WatchItem::Synced`] belong to
/// the initial burst and carry no id; a resumed watch has no burst, so every
/// event carries its revision. One frame is produced at a time, when the
/// connection takes it, so a slow client buffers nothing here.
fn frames(
    mut watch: WatchStream,
    resumed: bool,
    heartbeat: Duration,
    shutdown: CancellationToken,
    slot: Option<WatchSlot>,
) -> impl Stream<Item = Result<Bytes, Infallible>> + 'static {
    // A zero period would make the timer panic.
    let heartbeat = heartbeat.max(Duration::from_millis(1));
    async_stream::stream! {
        let _open = crate::metrics::OpenWatch::new();
        // Dropped with the stream, whether it ends or is dropped unfinished.
        let _slot = slot;
        let mut synced = resumed;
        let mut ticks = interval_at(Instant::now() + heartbeat, heartbeat);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let cancelled = shutdown.cancelled_owned();
        tokio::pin!(cancelled);
        loop {
            tokio::select! {
                () = &mut cancelled => break,
                _ = ticks.tick() => yield Ok(Bytes::from_static(HEARTBEAT)),
                item = watch.next() => match item {
                    None => break,
                    Some(Err(err)) => {
                        tracing::info!(error = %err, "watch stream ended");
                        break;
                    }
                    Some(Ok(WatchItem::Synced(revision))) => {
                        synced = true;
                        yield Ok(Bytes::from(format!("id: {revision}\n\n")));
                    }
                    Some(Ok(WatchItem::Event(event))) => yield Ok(event_frame(&event, synced)),
                },
            }
        }
    }
}

/// `id: <revision>` (live events only) and `data: {"type":..,"object":..}`.
fn event_frame(event: &WatchEvent, with_id: bool) -> Bytes {
    let json = &event.object.json;
    let mut frame = BytesMut::with_capacity(json.len() + 64);
    if with_id {
        frame.put_slice(b"id: ");
        frame.put_slice(event.revision.to_string().as_bytes());
        frame.put_u8(b'\n');
    }
    frame.put_slice(b"data: {\"type\":\"");
    frame.put_slice(event.event_type.as_str().as_bytes());
    frame.put_slice(b"\",\"object\":");
    frame.put_slice(json);
    frame.put_slice(b"}\n\n");
    frame.freeze()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use cms_store::{EventType, Key, Object, WatchError};
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

    async fn collect(items: Vec<Result<WatchItem, WatchError>>, resumed: bool) -> String {
        let watch: WatchStream = Box::pin(stream::iter(items));
        let frames = frames(watch, resumed, Duration::from_secs(60), CancellationToken::new(), None);
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
            false,
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
        let text = collect(vec![event(9, EventType::Deleted, "b")], true).await;
        assert!(text.starts_with("id: 9\ndata: {\"type\":\"DELETED\""), "{text}");
    }

    #[actix_web::test]
    async fn a_stream_holds_its_slot_until_it_ends_or_is_dropped() {
        use cms_auth::{Caller, Credential, LimitOptions, Limits};
        let limits = Limits::new(LimitOptions { watches_per_identity: 2, ..LimitOptions::default() });
        let viewer = Caller::local("viewer", cms_model::UserRole::View, Credential::Login);
        let open = |shutdown: &CancellationToken| {
            let slot = limits.open_watch(&viewer).expect("a slot");
            let watch: WatchStream = Box::pin(stream::pending());
            Box::pin(frames(watch, false, Duration::from_secs(60), shutdown.clone(), Some(slot)))
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
        let mut frames = Box::pin(frames(watch, false, Duration::from_millis(10), shutdown.clone(), None));
        let first = frames.next().await.and_then(Result::ok);
        assert_eq!(first.as_deref(), Some(HEARTBEAT));
        shutdown.cancel();
        assert!(frames.next().await.is_none(), "the stream ends on shutdown");
    }
}
