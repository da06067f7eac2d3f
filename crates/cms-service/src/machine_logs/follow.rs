//! The body of a machine's log: the node's chunks as they come. A followed
//! log ([`Follow`]) holds one of its caller's watch slots and, at every
//! watch heartbeat, authenticates the request's credential again and
//! checks again that it may read the tenant's logs: a revoked token, a
//! deleted user or a removed grant cuts the log short at the next check.

use std::io;
use std::time::Duration;

use actix_web::HttpRequest;
use actix_web::http::header::{AUTHORIZATION, HeaderMap};
use bytes::Bytes;
use cms_auth::{Permission, WatchSlot};
use cms_tenancy::LogChunks;
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at};
use tokio_util::sync::CancellationToken;

use crate::auth::{authenticate, require_on_tenant};
use crate::error::ApiError;
use crate::state::AppState;

/// What a followed log holds while it is open.
pub(super) struct Follow {
    /// Dropped with the body, whether it ends or its client goes.
    _slot: Option<WatchSlot>,
    /// The request's `Authorization` header, and nothing else of it.
    headers: HeaderMap,
    tenant: String,
    state: AppState,
}

impl Follow {
    /// One of the caller's watch slots (429 when it holds as many as it
    /// may) and what checking it again takes.
    pub(super) fn open(req: &HttpRequest, state: &AppState) -> Result<Follow, ApiError> {
        let slot = crate::watch::slot(req, state)?;
        let tenant = req
            .match_info()
            .get("tenant")
            .ok_or_else(|| ApiError::Internal("route names no tenant".into()))?
            .to_string();
        let mut headers = HeaderMap::new();
        if let Some(value) = req.headers().get(AUTHORIZATION) {
            headers.insert(AUTHORIZATION, value.clone());
        }
        Ok(Follow { _slot: slot, headers, tenant, state: state.clone() })
    }

    /// Whether the credential still authenticates and may still read the
    /// tenant's logs.
    async fn still_allowed(&self) -> bool {
        match authenticate(&self.headers, &self.state).await {
            Ok(caller) => require_on_tenant(&self.state, &caller, Permission::ReadLogs, &self.tenant).is_ok(),
            Err(_) => false,
        }
    }

    fn checks(&self) -> Interval {
        // A zero period would make the timer panic.
        let period = self.state.options.watch_heartbeat.max(Duration::from_millis(1));
        let mut ticks = interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks
    }
}

/// The chunks as they come, until the node ends them, the server shuts
/// down or, for a followed log, a check fails (an error then cuts the
/// response short). Dropping the body drops the node's stream and the slot.
pub(super) fn body(
    shutdown: CancellationToken,
    mut chunks: LogChunks,
    follow: Option<Follow>,
) -> impl Stream<Item = Result<Bytes, io::Error>> + 'static {
    async_stream::stream! {
        let mut checks = follow.as_ref().map(Follow::checks);
        let cancelled = shutdown.cancelled_owned();
        tokio::pin!(cancelled);
        loop {
            tokio::select! {
                () = &mut cancelled => break,
                () = tick(&mut checks) => {
                    let allowed = match &follow {
                        Some(follow) => follow.still_allowed().await,
                        None => true,
                    };
                    if !allowed {
                        tracing::info!("a followed machine log ended: its caller may no longer read it");
                        yield Err(io::Error::other("the credential may no longer read this log"));
                        break;
                    }
                }
                chunk = chunks.next() => match chunk {
                    Some(Ok(bytes)) => yield Ok(Bytes::from(bytes)),
                    Some(Err(err)) => {
                        tracing::warn!(error = %err.summary(), "a machine's log broke off");
                        yield Err(io::Error::other(err.summary()));
                        break;
                    }
                    None => break,
                },
            }
        }
    }
}

/// The next check, or never without checks.
async fn tick(checks: &mut Option<Interval>) {
    match checks {
        Some(checks) => {
            checks.tick().await;
        }
        None => std::future::pending().await,
    }
}
