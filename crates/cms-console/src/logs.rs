//! `GET /tenants/{name}/machines/{id}/logs?service=&follow=&tail=`: one
//! machine's service log, or its kernel log (`service=dmesg`), streamed to
//! the machine page's logs panel as server-sent events, one `data:` event
//! per line (`logs/lines.rs`), read over the node API with the tenant's
//! credentials (`cms_tenancy::NodeClient`), as
//! `GET /api/v1/tenants/{tenant}/machines/{id}/logs` reads it.
//!
//! Logs can hold secrets, so reading one needs `ReadLogs` on the tenant
//! (editors and admins, or a grant that gives it), and every read, served
//! or refused, is on the audit log as a backup's download is ([`Recorded`]).
//! What is asked is bounded: `service` is a Talos service id
//! (`^[a-z0-9][a-z0-9._-]{0,62}$`), `tail` at most [`MAX_TAIL`] lines,
//! `follow` `true` or `false`; anything else is `400`.
//!
//! A stream ends with a named event saying why: `end` when the log ended
//! (a read without `follow`), the session ended (checked at every
//! heartbeat) or the server shuts down; `failure` when the node broke it
//! off. It also ends when the browser goes away: the mounting server drops
//! the body, which drops the node's stream and resets its call. While
//! open it holds one of its user's watch slots (`cms_auth::Limits`), as the
//! live updates do; past the bound the answer is `429`.

mod lines;

use bytes::Bytes;
use cms_auth::{Permission, WATCH_RETRY_AFTER, WatchSlot};
use cms_tenancy::{LogChunks, LogsRequest, NodeError};
use futures_util::{Stream, StreamExt};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};

use crate::events::heartbeats;
use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{Outcome, Refused};
use crate::session::{self, Session};
use crate::{Body, Console, Recorded, Request, Response};

use lines::{Lines, event};

/// The services the panel offers, Talos's own; any other service id is
/// asked for as typed in the query.
pub(crate) const SERVICES: [&str; 6] = ["machined", "apid", "etcd", "kubelet", "containerd", "trustd"];

/// The `service` that reads the kernel log instead of a service's.
pub(crate) const DMESG: &str = "dmesg";

/// The most lines a read asks for from before it started.
pub(crate) const MAX_TAIL: u32 = 10_000;

/// The lines from before the read when the query does not say.
pub(crate) const DEFAULT_TAIL: u32 = 200;

const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// What a read asks for, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asked {
    pub(crate) service: String,
    pub(crate) follow: bool,
    pub(crate) tail: u32,
}

impl Asked {
    /// The read of a query; why it is refused otherwise.
    pub(crate) fn of(query: &Form) -> Result<Asked, String> {
        let service = query.optional("service").unwrap_or("machined");
        if !valid_service(service) {
            return Err(format!(
                "Service {:?} is not a service id: lower-case letters, digits, '.', '_' and '-', \
                 starting with a letter or digit, at most 63 characters.",
                clip(service)
            ));
        }
        let follow = match query.optional("follow") {
            None | Some("true") => true,
            Some("false") => false,
            Some(other) => return Err(format!("follow {:?} is neither true nor false.", clip(other))),
        };
        let tail = match query.optional("tail") {
            None => DEFAULT_TAIL,
            Some(text) => match text.parse::<u32>() {
                Ok(tail) if tail <= MAX_TAIL => tail,
                _ => {
                    return Err(format!(
                        "tail {:?} is not a number of lines from 0 to {MAX_TAIL}.",
                        clip(text)
                    ));
                }
            },
        };
        Ok(Asked { service: service.to_string(), follow, tail })
    }
}

/// Whether `service` is a service id: `^[a-z0-9][a-z0-9._-]{0,62}$`.
pub(crate) fn valid_service(service: &str) -> bool {
    let bytes = service.as_bytes();
    let allowed = |byte: &u8| byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"._-".contains(byte);
    matches!(bytes.first(), Some(first) if first.is_ascii_lowercase() || first.is_ascii_digit())
        && bytes.len() <= 63
        && bytes.iter().all(allowed)
}

/// At most 64 characters of a refused value, for its message.
fn clip(value: &str) -> String {
    value.chars().take(64).collect()
}

/// The log of machine `id` of tenant `name`, as the query asks. Every
/// answer to a signed-in caller is on the audit log.
pub(crate) async fn stream(console: &Console, request: &Request, name: &str, id: &str) -> Outcome {
    if session::current(console, request.headers()).await.is_none() {
        return session::unauthorized();
    }
    let mut outcome = open(console, request, name, id).await;
    let response = match &mut outcome {
        Ok(response) => response,
        Err(refused) => refused.as_mut(),
    };
    response.extensions_mut().insert(Recorded);
    outcome
}

async fn open(console: &Console, request: &Request, name: &str, id: &str) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::ReadLogs)?;
    let refuse = |status: StatusCode, message: String| -> Refused {
        Failure::new(status, message).page(Some(&session)).into()
    };
    let asked =
        Asked::of(&Form::query(request)).map_err(|message| refuse(StatusCode::BAD_REQUEST, message))?;
    let Some(nodes) = console.nodes.clone() else {
        let message = "This server reads no machine logs: it has no node API client.".to_string();
        return Err(refuse(StatusCode::SERVICE_UNAVAILABLE, message));
    };
    let node = cms_tenancy::machine_node(console.store().as_ref(), name, id)
        .map_err(|err| Failure::from(err).page(Some(&session)))?;
    let slot = match console.auth.limits().open_watch(&session.caller) {
        Ok(slot) => slot,
        Err(err) => {
            let mut refused = refuse(StatusCode::TOO_MANY_REQUESTS, err.to_string());
            refused.headers_mut().insert(RETRY_AFTER, HeaderValue::from(WATCH_RETRY_AFTER));
            return Err(refused);
        }
    };
    let chunks = if asked.service == DMESG {
        nodes.dmesg(&node, asked.follow).await
    } else {
        let logs = LogsRequest {
            service: asked.service.clone(),
            follow: asked.follow,
            tail_lines: Some(asked.tail),
        };
        nodes.logs(&node, logs).await
    };
    let chunks = chunks.map_err(|err| {
        let (status, message) = not_read(&err, &asked.service, id);
        refuse(status, message)
    })?;
    tracing::info!(
        user = %session.caller.user,
        role = session.role_shown(),
        tenant = name,
        machine = id,
        service = asked.service,
        follow = asked.follow,
        "reading a machine's log from the console"
    );
    let mut response =
        Response::new(Body::Stream(Box::pin(frames(console.clone(), session.clone(), chunks, slot))));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    // Logs can hold secrets: no cache keeps them.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(session.mark(response))
}

/// The status and message of a log the node did not give.
fn not_read(err: &NodeError, service: &str, machine: &str) -> (StatusCode, String) {
    match err {
        NodeError::Api(api) if api.is_unknown_log() => {
            (StatusCode::NOT_FOUND, format!("Machine {machine} keeps no log of service {service}."))
        }
        NodeError::Credentials(_) => {
            (StatusCode::CONFLICT, format!("The tenant's credentials cannot be made now: {}", err.summary()))
        }
        _ => (StatusCode::BAD_GATEWAY, format!("Machine {machine} did not give its log: {}", err.summary())),
    }
}

/// The events of a log, as the connection takes them, until the log ends,
/// breaks off, the session ends or the server shuts down.
fn frames(
    console: Console,
    session: Session,
    mut chunks: LogChunks,
    slot: WatchSlot,
) -> impl Stream<Item = Bytes> + Send + 'static {
    async_stream::stream! {
        // Dropped with the stream, whether it ends or its client goes.
        let _slot = slot;
        let mut lines = Lines::default();
        let mut ticks = heartbeats(&console);
        let cancelled = console.shutdown.clone().cancelled_owned();
        tokio::pin!(cancelled);
        loop {
            tokio::select! {
                () = &mut cancelled => {
                    yield event("end", "The server is shutting down.");
                    break;
                }
                _ = ticks.tick() => {
                    if !session.still_valid(&console).await {
                        yield event("end", "Your session ended: sign in again to read logs.");
                        break;
                    }
                    yield Bytes::from_static(HEARTBEAT);
                }
                chunk = chunks.next() => match chunk {
                    Some(Ok(bytes)) => {
                        if let Some(events) = lines.push(&bytes) {
                            yield events;
                        }
                    }
                    Some(Err(err)) => {
                        if let Some(last) = lines.finish() {
                            yield last;
                        }
                        yield event("failure", &format!("The node broke the log off: {}", err.summary()));
                        break;
                    }
                    None => {
                        if let Some(last) = lines.finish() {
                            yield last;
                        }
                        yield event("end", "The log ended.");
                        break;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_ids() {
        for good in ["machined", "etcd", "kubelet", "ext-tailscale", "a", "cri.v2_x", &"a".repeat(63)] {
            assert!(valid_service(good), "{good}");
        }
        for bad in ["", "Etcd", "-x", ".x", "a/b", "a b", "a\n", &"a".repeat(64), "é"] {
            assert!(!valid_service(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_read_is_bounded() {
        let asked = Asked::of(&Form::of(&[])).unwrap();
        assert_eq!(asked, Asked { service: "machined".into(), follow: true, tail: DEFAULT_TAIL });
        let asked = Asked::of(&Form::of(&[("service", "dmesg"), ("follow", "false"), ("tail", "10000")]));
        assert_eq!(asked.unwrap(), Asked { service: "dmesg".into(), follow: false, tail: 10_000 });
        for (field, value) in
            [("tail", "10001"), ("tail", "-1"), ("tail", "x"), ("follow", "yes"), ("service", "A")]
        {
            let refused = Asked::of(&Form::of(&[(field, value)])).unwrap_err();
            assert!(refused.contains(value), "{refused}");
        }
    }
}
