//! Following the tenant watch stream: server-sent-events frames read on a
//! thread of their own, resumed from the last `id` (of an event or a
//! bookmark) when the connection drops, and listed again, as client-go's
//! reflector does, when the server no longer reaches back to it
//! (`reflector.rs` shows only what changed meanwhile).

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::Duration;

use cms_model::Tenant;
use serde::Deserialize;

use crate::client::Client;
use crate::failure::{ApiError, ConnectionError};
use crate::reflector::{Reflector, Shown};

/// How often a dropped stream is reopened before the watch gives up.
const RECONNECTS: u32 = 5;
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// One event of `GET /api/v1/tenants?watch=true`, as the user is to see it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WatchEvent {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) object: Tenant,
}

/// What the watch thread reports.
#[derive(Debug)]
pub(crate) enum Item {
    /// A change, or one tenant of the opening burst.
    Event(Box<WatchEvent>),
    /// The opening burst is complete.
    Synced,
    /// The watch failed and ended.
    Failed(anyhow::Error),
}

/// Starts watching tenants: the one named `name` when given (the server
/// then follows that tenant alone), and those `selector` matches when given.
/// Items arrive on the returned channel.
pub(crate) fn watch_tenants(client: &Client, name: Option<&str>, selector: Option<&str>) -> Receiver<Item> {
    let (sender, receiver) = mpsc::channel();
    let client = client.clone();
    let mut filter = crate::get::selector_query(selector);
    if let Some(name) = name {
        let encoded: String =
            url::form_urlencoded::byte_serialize(format!("metadata.name={name}").as_bytes()).collect();
        filter.push_str(&format!("&fieldSelector={encoded}"));
    }
    thread::spawn(move || follow(&client, &filter, &sender));
    receiver
}

/// Follows the watch as a reflector does: resumes after the last `id`
/// (events and bookmarks alike) when a stream ends, and lists again when the
/// server no longer serves that point (410 `Gone`), showing only what
/// changed meanwhile. `filter` is the query's `&labelSelector=...` and
/// `&fieldSelector=...`, or empty.
fn follow(client: &Client, filter: &str, sender: &Sender<Item>) {
    let mut reflector = Reflector::default();
    let mut failures = 0;
    loop {
        let path = match reflector.resume_point() {
            Some(id) => {
                format!("/api/v1/tenants?watch=true&allowWatchBookmarks=true&resourceVersion={id}{filter}")
            }
            None => format!("/api/v1/tenants?watch=true&allowWatchBookmarks=true{filter}"),
        };
        let response = match client.stream(&path) {
            Ok(response) => response,
            Err(err) if is_gone(&err) && reflector.resume_point().is_some() => {
                eprintln!(
                    "the watch resumed after the server's event log moved on (410 Gone): listing again"
                );
                reflector.list_again();
                continue;
            }
            Err(err) if is_connection(&err) && failures < RECONNECTS => {
                failures += 1;
                thread::sleep(RECONNECT_DELAY);
                continue;
            }
            Err(err) => {
                // A server that answered with an error will answer the same again.
                let _ = sender.send(Item::Failed(err));
                return;
            }
        };
        reflector.open();
        match read_frames(response, &mut reflector, sender) {
            Flow::Stop => return,
            Flow::Ended { progressed } => {
                // A stream that moved on earns its reconnects back.
                if progressed {
                    failures = 0;
                }
                if failures == RECONNECTS {
                    let message = format!("the server at {} closed the watch stream", client.server());
                    let _ = sender.send(Item::Failed(anyhow::anyhow!(message)));
                    return;
                }
                failures += 1;
                thread::sleep(RECONNECT_DELAY);
            }
        }
    }
}

/// Whether a failure is the server's 410 `Gone`.
fn is_gone(err: &anyhow::Error) -> bool {
    err.downcast_ref::<ApiError>().is_some_and(|err| err.status == 410)
}

/// Whether a failure is the server out of reach, which may pass.
fn is_connection(err: &anyhow::Error) -> bool {
    err.downcast_ref::<ConnectionError>().is_some()
}

enum Flow {
    /// The receiver is gone.
    Stop,
    /// The server closed the stream; `progressed` when it carried a new id.
    Ended { progressed: bool },
}

/// One frame's `data`: an event, or a `BOOKMARK` whose object is no tenant.
#[derive(Deserialize)]
struct Frame {
    #[serde(rename = "type")]
    kind: String,
    object: serde_json::Value,
}

/// Reads frames until the stream ends: `data:` lines make an event or a
/// bookmark, a frame with only `id:` closes the opening list, `:` lines are
/// comments. What the user is to see goes to `sender`, through `reflector`.
fn read_frames(response: impl Read, reflector: &mut Reflector, sender: &Sender<Item>) -> Flow {
    let mut reader = BufReader::new(response);
    let mut data = String::new();
    let mut id: Option<u64> = None;
    let mut line = String::new();
    let mut progressed = false;
    loop {
        line.clear();
        let read = match reader.read_line(&mut line) {
            Ok(read) => read,
            Err(_) => return Flow::Ended { progressed },
        };
        if read == 0 {
            return Flow::Ended { progressed };
        }
        let text = line.trim_end_matches(['\r', '\n']);
        if !text.is_empty() {
            if let Some(value) = text.strip_prefix("data:") {
                data.push_str(value.trim_start());
            } else if let Some(value) = text.strip_prefix("id:") {
                id = value.trim().parse().ok();
            }
            continue;
        }
        let frame_id = id.take();
        let mut items = Vec::new();
        if data.is_empty() {
            let Some(revision) = frame_id else { continue };
            match reflector.is_listing() {
                true => items.extend(reflector.list_ended(revision).into_iter().map(Item::from)),
                false => reflector.reached(revision),
            }
        } else {
            match read_frame(&std::mem::take(&mut data)) {
                Err(err) => items.push(Item::Failed(err)),
                // A bookmark only moves the resume point.
                Ok(None) => {}
                Ok(Some(event)) if reflector.is_listing() => reflector.listed(event.object),
                Ok(Some(event)) => {
                    let shown = reflector.changed(&event.kind, event.object);
                    items.extend(shown.map(|event| Item::Event(Box::new(event))));
                }
            }
            if let Some(revision) = frame_id
                && !reflector.is_listing()
            {
                reflector.reached(revision);
            }
        }
        progressed |= frame_id.is_some() && !reflector.is_listing();
        for item in items {
            if sender.send(item).is_err() {
                return Flow::Stop;
            }
        }
    }
}

/// An event of one frame's `data`, or `None` for a bookmark.
fn read_frame(data: &str) -> anyhow::Result<Option<WatchEvent>> {
    let unreadable = |err: serde_json::Error| anyhow::anyhow!("a watch frame this client cannot read: {err}");
    let frame: Frame = serde_json::from_str(data).map_err(unreadable)?;
    if frame.kind == "BOOKMARK" {
        return Ok(None);
    }
    let object: Tenant = serde_json::from_value(frame.object).map_err(unreadable)?;
    Ok(Some(WatchEvent { kind: frame.kind, object }))
}

impl From<Shown> for Item {
    fn from(shown: Shown) -> Item {
        match shown {
            Shown::Event(event) => Item::Event(event),
            Shown::Synced => Item::Synced,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `stream` through `reflector`; returns what the user is to see.
    fn read(stream: &str, reflector: &mut Reflector) -> Vec<String> {
        let (sender, receiver) = mpsc::channel();
        reflector.open();
        assert!(matches!(read_frames(stream.as_bytes(), reflector, &sender), Flow::Ended { .. }));
        drop(sender);
        receiver
            .iter()
            .map(|item| match item {
                Item::Event(event) => format!("{} {}", event.kind, event.object.metadata.name),
                Item::Synced => "synced".to_string(),
                Item::Failed(err) => format!("failed: {err}"),
            })
            .collect()
    }

    fn tenant(name: &str, version: u64) -> String {
        format!(
            r#"{{"metadata":{{"name":"{name}","resourceVersion":{version}}},"spec":{{"kubernetesVersion":"1.31.1"}}}}"#
        )
    }

    #[test]
    fn frames_make_events_and_the_id_frame_ends_the_burst() {
        let (a, a2) = (tenant("a", 1), tenant("a", 2));
        let stream = format!(
            "data: {{\"type\":\"ADDED\",\"object\":{a}}}\n\nid: 7\n\n: heartbeat\n\n\
             data: {{\"type\":\"MODIFIED\",\"object\":{a2}}}\nid: 8\n\n\
             data: {{\"type\":\"DELETED\",\"object\":{a2}}}\nid: 9\n\n"
        );
        let mut reflector = Reflector::default();
        assert_eq!(read(&stream, &mut reflector), ["ADDED a", "synced", "MODIFIED a", "DELETED a"]);
        assert_eq!(reflector.resume_point(), Some(9));
    }

    #[test]
    fn bookmarks_move_the_resume_point_and_show_nothing() {
        let a = tenant("a", 1);
        let bookmark = |revision: u64| {
            format!(
                "id: {revision}\ndata: {{\"type\":\"BOOKMARK\",\"object\":{{\"metadata\":{{\"resourceVersion\":\"{revision}\"}}}}}}\n\n"
            )
        };
        let stream = format!(
            "data: {{\"type\":\"ADDED\",\"object\":{a}}}\n\nid: 7\n\n{}{}",
            bookmark(12),
            bookmark(15)
        );
        let mut reflector = Reflector::default();
        assert_eq!(read(&stream, &mut reflector), ["ADDED a", "synced"]);
        assert_eq!(reflector.resume_point(), Some(15));

        // Resumed: the same change again is not shown twice.
        let again = format!("data: {{\"type\":\"MODIFIED\",\"object\":{a}}}\nid: 16\n\n");
        assert!(read(&again, &mut reflector).is_empty());
        assert_eq!(reflector.resume_point(), Some(16));
    }
}
