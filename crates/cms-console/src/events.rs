//! `GET /events`: live updates for the pages, as server-sent events, with
//! the session cookie and the permission of reading tenants.
//!
//! The stream follows two store watches, tenants and machines, and sends
//! one small JSON object per change of a tenant, or of one of its machines:
//! `{"type", "name", "phase", "ready", "kubernetes", "talos", "machines",
//! "deleting", "labels", "message", "conditions"}`, `type` being `ADDED`,
//! `MODIFIED` or `DELETED` (a machine's change is its tenant's `MODIFIED`).
//! With `?tenant=NAME` it sends that tenant's changes only. With
//! `?label=SELECTOR` (the tenants page's label selector) each update also
//! says whether the tenant's labels match it, `"selected": true|false`, so
//! the page never parses selectors itself; a malformed one is `400`.
//!
//! A page carries the store revision it was read at, and opens the stream
//! with `?since=R`, so a change between the page and the stream is not
//! lost. Each frame's `id` is `T.M`, the last tenant and machine revisions
//! sent, which the browser sends back as `Last-Event-ID` when it
//! reconnects. When the store's log no longer reaches back that far, the
//! stream starts from now and first sends `{"type": "RESYNC"}`: the page is
//! out of date. Every heartbeat checks the session again, so a stream ends
//! when its session does; the browser's reconnection then gets `401`.
//!
//! A caller whose grants give it some tenants gets their updates only
//! (`events/visible.rs`).
//!
//! A stream is a watch like the API's: it holds one of its user's watch
//! slots (`cms_auth::Limits`) while it is open, and past the bound the
//! answer is `429` with `Retry-After`.

use std::time::Duration;

use bytes::Bytes;
use cms_auth::{Permission, WATCH_RETRY_AFTER, WatchSlot};
use cms_model::{Kind, LabelSelector};
use cms_store::{Key, StoreError, WatchEvent, WatchItem, WatchStream};
use futures_util::{Stream, StreamExt};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};
use serde::Serialize;
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::summary::Summary;
use crate::{Body, Console, Request, Response};

mod visible;

use visible::Visible;

const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// The last tenant and machine revisions a stream sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    tenants: u64,
    machines: u64,
}

impl Position {
    /// Parses an event id, `T.M`.
    fn parse(id: &str) -> Option<Position> {
        let (tenants, machines) = id.trim().split_once('.')?;
        Some(Position { tenants: tenants.parse().ok()?, machines: machines.parse().ok()? })
    }
}

/// The stream of live updates.
pub(crate) async fn stream(console: &Console, request: &Request) -> Outcome {
    let Some(session) = session::current(console, request.headers()).await else {
        return session::unauthorized();
    };
    if !session.may_somewhere(Permission::Read) {
        return Err(reply::text(StatusCode::FORBIDDEN, "this role may not read tenants").into());
    }
    let query = Form::query(request);
    let selector = match query.optional("label").map(LabelSelector::parse).transpose() {
        Ok(selector) => selector,
        Err(err) => {
            let message = crate::filters::selector_message(query.get("label"), &err);
            return Err(reply::bytes(StatusCode::BAD_REQUEST, "text/plain; charset=utf-8", message).into());
        }
    };
    let slot = match console.auth.limits().open_watch(&session.caller) {
        Ok(slot) => slot,
        Err(err) => {
            let mut refused =
                reply::bytes(StatusCode::TOO_MANY_REQUESTS, "text/plain; charset=utf-8", err.to_string());
            refused.headers_mut().insert(RETRY_AFTER, HeaderValue::from(WATCH_RETRY_AFTER));
            return Err(refused.into());
        }
    };
    let tenant = query.optional("tenant").map(str::to_string);
    let only = Only { tenant, selector };
    let last_event_id = request.headers().get("last-event-id").and_then(|value| value.to_str().ok());
    let resume = last_event_id.and_then(Position::parse).or_else(|| {
        let since = query.optional("since")?.parse().ok()?;
        Some(Position { tenants: since, machines: since })
    });
    let watches = open(console, resume).await.map_err(|failure| failure.page(Some(&session)))?;
    let frames = frames(console.clone(), session, watches, only, slot);
    let mut response = Response::new(Body::Stream(Box::pin(frames)));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// Which updates a stream sends, and what they say.
struct Only {
    /// Only this tenant's.
    tenant: Option<String>,
    /// Each update says whether the tenant's labels match.
    selector: Option<LabelSelector>,
}

/// The two watches, and where they start.
struct Watches {
    tenants: WatchStream,
    machines: WatchStream,
    /// Where they resume; `None` for watches from now, whose initial
    /// bursts are skipped.
    resumed: Option<Position>,
    /// Whether a resume was asked for and could not be served.
    resync: bool,
}

async fn open(console: &Console, resume: Option<Position>) -> Result<Watches, Failure> {
    let store = console.store();
    if let Some(position) = resume {
        let tenants = store.watch(Kind::Tenant, Some(position.tenants)).await;
        let machines = store.watch(Kind::Machine, Some(position.machines)).await;
        match (tenants, machines) {
            (Ok(tenants), Ok(machines)) => {
                return Ok(Watches { tenants, machines, resumed: Some(position), resync: false });
            }
            (Err(StoreError::Gone { .. } | StoreError::Future { .. }), _)
            | (_, Err(StoreError::Gone { .. } | StoreError::Future { .. })) => {}
            (Err(err), _) | (_, Err(err)) => return Err(err.into()),
        }
    }
    let tenants = store.watch(Kind::Tenant, None).await?;
    let machines = store.watch(Kind::Machine, None).await?;
    Ok(Watches { tenants, machines, resumed: None, resync: resume.is_some() })
}

/// The ticks of a stream's heartbeat, the first one heartbeat from now; a
/// tick missed while a frame was written waits a whole heartbeat again.
pub(crate) fn heartbeats(console: &Console) -> Interval {
    let heartbeat = console.options.heartbeat.max(Duration::from_millis(1));
    let mut ticks = interval_at(Instant::now() + heartbeat, heartbeat);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks
}

/// The frames of a stream, one at a time as the connection takes them,
/// until a watch ends, the session does, or the server shuts down.
fn frames(
    console: Console,
    session: Session,
    watches: Watches,
    only: Only,
    slot: WatchSlot,
) -> impl Stream<Item = Bytes> + Send + 'static {
    async_stream::stream! {
        // Dropped with the stream, whether it ends or its client goes.
        let _slot = slot;
        let Watches { mut tenants, mut machines, resumed, resync } = watches;
        let mut position = resumed.unwrap_or(Position { tenants: 0, machines: 0 });
        let mut visible = Visible::new(console.store().as_ref(), &session.caller);
        let (mut tenants_synced, mut machines_synced) = (resumed.is_some(), resumed.is_some());
        if resync {
            yield Bytes::from_static(b"data: {\"type\":\"RESYNC\"}\n\n");
        }
        let mut ticks = heartbeats(&console);
        let cancelled = console.shutdown.clone().cancelled_owned();
        tokio::pin!(cancelled);
        loop {
            tokio::select! {
                () = &mut cancelled => break,
                _ = ticks.tick() => {
                    if !session.still_valid(&console).await {
                        break;
                    }
                    yield Bytes::from_static(HEARTBEAT);
                }
                item = tenants.next() => match item {
                    None | Some(Err(_)) => break,
                    Some(Ok(WatchItem::Synced(revision))) => {
                        position.tenants = revision;
                        tenants_synced = true;
                        if machines_synced {
                            yield frame(position, None);
                        }
                    }
                    Some(Ok(WatchItem::Event(event))) if tenants_synced => {
                        position.tenants = event.revision;
                        let kind = match visible.as_mut() {
                            Some(visible) => visible.tenant(event.event_type, &event.object),
                            None => Some(event.event_type.as_str()),
                        };
                        if let Some(kind) = kind && let Some(mut update) = tenant_update(&console, &event, &only) {
                            update.kind = kind;
                            yield frame(position, Some(&update));
                        }
                    }
                    Some(Ok(WatchItem::Event(_))) => {}
                },
                item = machines.next() => match item {
                    None | Some(Err(_)) => break,
                    Some(Ok(WatchItem::Synced(revision))) => {
                        position.machines = revision;
                        machines_synced = true;
                        if tenants_synced {
                            yield frame(position, None);
                        }
                    }
                    Some(Ok(WatchItem::Event(event))) if machines_synced => {
                        position.machines = event.revision;
                        let shown = visible.as_ref().is_none_or(|visible| visible.machine(&event.object.key.tenant));
                        if shown && let Some(update) = machine_update(&console, &event, &only) {
                            yield frame(position, Some(&update));
                        }
                    }
                    Some(Ok(WatchItem::Event(_))) => {}
                },
            }
        }
    }
}

/// One update, as the script reads it.
#[derive(Debug, Serialize)]
struct Update {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    summary: Summary,
    /// Whether the tenant's labels match the stream's selector, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    selected: Option<bool>,
}

impl Update {
    fn new(kind: &'static str, summary: Summary, only: &Only) -> Update {
        let selected = only.selector.as_ref().map(|selector| selector.matches(&summary.labels));
        Update { kind, summary, selected }
    }
}

/// The update a tenant's change makes, unless the stream is for another tenant.
fn tenant_update(console: &Console, event: &WatchEvent, only: &Only) -> Option<Update> {
    let name = &event.object.key.name;
    if only.tenant.as_ref().is_some_and(|only| only != name) {
        return None;
    }
    let default_talos = &console.tenancy.secrets().options().default_talos_version;
    let summary = Summary::of_object(&event.object, console.store().as_ref(), default_talos);
    Some(Update::new(event.event_type.as_str(), summary, only))
}

/// The update a machine's change makes: its tenant, as it is now, unless
/// the tenant is gone or the stream is for another one.
fn machine_update(console: &Console, event: &WatchEvent, only: &Only) -> Option<Update> {
    let name = &event.object.key.tenant;
    if only.tenant.as_ref().is_some_and(|only| only != name) {
        return None;
    }
    let store = console.store();
    let tenant = store.get(&Key::tenant(name.clone()))?;
    let default_talos = &console.tenancy.secrets().options().default_talos_version;
    let summary = Summary::of_object(&tenant, store.as_ref(), default_talos);
    Some(Update::new("MODIFIED", summary, only))
}

/// `id: T.M`, and the update's `data` when there is one.
fn frame(position: Position, update: Option<&Update>) -> Bytes {
    let mut frame = format!("id: {}.{}\n", position.tenants, position.machines);
    if let Some(json) = update.and_then(|update| serde_json::to_string(update).ok()) {
        frame.push_str("data: ");
        frame.push_str(&json);
        frame.push('\n');
    }
    frame.push('\n');
    Bytes::from(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_both_revisions() {
        assert_eq!(Position::parse("12.7"), Some(Position { tenants: 12, machines: 7 }));
        assert_eq!(Position::parse("12"), None);
        assert_eq!(Position::parse("a.b"), None);
        assert_eq!(frame(Position { tenants: 3, machines: 4 }, None), Bytes::from_static(b"id: 3.4\n\n"));
    }
}
