//! Watchers of the tenant stream that disconnect at random and resume from
//! the last revision they saw, the authoritative log read back at the end,
//! and the check that a stale resume point is 410 `Gone`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use cms_check::watch::{Event, Session, Start, Watcher};
use cms_e2e::fixtures::{TENANTS, tenant, tenant_path};
use cms_e2e::{Api, Frame, Server, Watch};
use serde_json::json;
use tokio::sync::watch;

use super::Random;
use super::clients::resource_version;
use super::cluster::Cluster;

/// How long a frame may take while a stream is expected to deliver one.
const FRAME_WAIT: Duration = Duration::from_secs(30);
/// A stream that stays quiet this long after a replay is taken as caught up.
const QUIET: Duration = Duration::from_secs(2);

fn event_of(frame: &Frame) -> Option<Event> {
    Some(Event {
        revision: frame.id?,
        kind: frame.event_type()?.to_string(),
        name: frame.name()?.to_string(),
        resource_version: resource_version(frame.object()),
    })
}

/// One watcher until it has seen revision `*until` (once that is set). Every
/// fourth watcher stays connected as long as the server lets it; the others
/// disconnect after a random 0.5 to 6 s and resume.
pub(crate) async fn watcher(
    index: usize,
    cluster: Arc<Cluster>,
    mut until: watch::Receiver<Option<u64>>,
    seed: u64,
) -> Result<Watcher> {
    let mut random = Random::new(seed);
    let mut history = Watcher { name: format!("watcher-{index}"), sessions: Vec::new() };
    loop {
        let done = |history: &Watcher, until: &Option<u64>| matches!((history.last_seen(), until), (Some(last), Some(end)) if last >= *end);
        if done(&history, &until.borrow()) {
            return Ok(history);
        }
        let endpoint = cluster.endpoint().await;
        let api = endpoint.api();
        let query = history.last_seen().map(|last| format!("&resourceVersion={last}")).unwrap_or_default();
        let mut stream = match Watch::try_open(&api, &query, &[]).await {
            Ok(stream) => stream,
            Err(failure) if failure.status == 0 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(failure) => bail!("{}: {failure}", history.name),
        };
        let start = match history.last_seen() {
            Some(from) => Start::Resumed { from },
            None => match burst(&mut stream).await {
                Some(start) => start,
                None => continue,
            },
        };
        let mut session = Session { start, events: Vec::new() };
        let stay = index.is_multiple_of(4);
        let leave_at = tokio::time::Instant::now() + Duration::from_millis(500 + random.below(5_500) as u64);
        loop {
            let reached = matches!(*until.borrow(), Some(end) if session.last_seen() >= end);
            if reached {
                break;
            }
            tokio::select! {
                frame = stream.next_frame(Duration::from_secs(3600)) => match frame {
                    None => break,
                    Some(frame) if frame.is_comment() => {}
                    Some(frame) => match event_of(&frame) {
                        Some(event) => session.events.push(event),
                        None => bail!("{}: a live frame that is not an event: {frame:?}", history.name),
                    },
                },
                _ = tokio::time::sleep_until(leave_at), if !stay => break,
                _ = until.changed() => {}
            }
        }
        history.sessions.push(session);
    }
}

/// Reads the initial burst; `None` when the stream ended during it.
async fn burst(stream: &mut Watch) -> Option<Start> {
    let mut burst = Vec::new();
    loop {
        let frame =
            tokio::time::timeout(FRAME_WAIT, stream.next_frame(Duration::from_secs(3600))).await.ok()??;
        match (&frame.data, frame.id) {
            (None, Some(synced)) => return Some(Start::Fresh { burst, synced }),
            (Some(_), None) => burst.push((frame.name()?.to_string(), resource_version(frame.object()))),
            _ => {}
        }
    }
}

/// The authoritative log: a fresh watch gives the store's current revision,
/// then a watch resumed from revision 0 replays every tenant event up to it.
/// Also returns the fresh watch as a watcher, whose burst the checker compares
/// with the log.
pub(crate) async fn authoritative_log(api: &Api) -> Result<(Vec<Event>, Watcher)> {
    let mut fresh = Watch::try_open(api, "", &[]).await.map_err(|failure| anyhow::anyhow!("{failure}"))?;
    let start = burst(&mut fresh).await.context("the fresh watch ended during its burst")?;
    let synced = match &start {
        Start::Fresh { synced, .. } => *synced,
        Start::Resumed { from } => *from,
    };
    let snapshot =
        Watcher { name: "final-snapshot".to_string(), sessions: vec![Session { start, events: Vec::new() }] };
    let mut replay = Watch::try_open(api, "&resourceVersion=0", &[])
        .await
        .map_err(|failure| anyhow::anyhow!("{failure}"))?;
    let mut log = Vec::new();
    // Revisions of other resources do not appear on the tenant stream, so the
    // replay may end below `synced`; it is complete once it goes quiet.
    while log.last().is_none_or(|event: &Event| event.revision < synced) {
        match tokio::time::timeout(QUIET, replay.next_frame(Duration::from_secs(3600))).await {
            Err(_) => break,
            Ok(None) => bail!("the replay from revision 0 ended"),
            Ok(Some(frame)) if frame.is_comment() => {}
            Ok(Some(frame)) => {
                log.push(event_of(&frame).with_context(|| format!("a replayed frame {frame:?}"))?)
            }
        }
    }
    Ok((log, snapshot))
}

/// On a server keeping only a few events, resuming from a compacted
/// revision is 410 `Gone`, while a revision still held resumes.
pub(crate) async fn stale_resume_is_gone() -> Result<()> {
    let server = Server::options().env("CMS_EVENT_RETENTION", "5").start().await;
    let api = server.api();
    let created = api.post(TENANTS, &tenant("stale")).await;
    ensure!(created.status == 201, "creating a tenant: {} {}", created.status, created.body);
    let mut current = created.json();
    for version in 2..=40 {
        current["spec"]["kubernetesVersion"] = json!(format!("1.31.{version}"));
        let reply = api.put(&tenant_path("stale"), &current).await;
        ensure!(reply.status == 200, "updating a tenant: {} {}", reply.status, reply.body);
        current = reply.json();
    }
    let stale = api.get(&format!("{TENANTS}?watch=true&resourceVersion=1")).await;
    ensure!(
        stale.status == 410,
        "resuming from revision 1 of 40 with 5 retained: {} {}",
        stale.status,
        stale.body
    );
    let mut fresh = Watch::try_open(&api, "", &[]).await.map_err(|failure| anyhow::anyhow!("{failure}"))?;
    let Some(Start::Fresh { synced, .. }) = burst(&mut fresh).await else { bail!("no burst") };
    let mut recent = Watch::try_open(&api, &format!("&resourceVersion={}", synced - 2), &[])
        .await
        .map_err(|failure| anyhow::anyhow!("resuming from a retained revision: {failure}"))?;
    for expected in synced - 1..=synced {
        let frame = tokio::time::timeout(FRAME_WAIT, recent.next_frame(FRAME_WAIT)).await.ok().flatten();
        let id = frame.as_ref().and_then(|frame| frame.id);
        ensure!(id == Some(expected), "the resumed stream gave {frame:?}, expected revision {expected}");
    }
    server.terminate().await;
    Ok(())
}
