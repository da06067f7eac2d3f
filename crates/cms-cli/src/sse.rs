//! Following the tenant watch stream: server-sent-events frames read on a
//! thread of their own, resumed from the last `id` when the connection drops.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::Duration;

use cms_model::Tenant;
use serde::Deserialize;

use crate::client::Client;

/// How often a dropped stream is reopened before the watch gives up.
const RECONNECTS: u32 = 5;
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// One frame of `GET /api/v1/tenants?watch=true`.
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

/// Starts watching tenants; items arrive on the returned channel.
pub(crate) fn watch_tenants(client: &Client) -> Receiver<Item> {
    let (sender, receiver) = mpsc::channel();
    let client = client.clone();
    thread::spawn(move || follow(&client, &sender));
    receiver
}

fn follow(client: &Client, sender: &Sender<Item>) {
    let mut last_id: Option<u64> = None;
    let mut failures = 0;
    loop {
        let path = match last_id {
            Some(id) => format!("/api/v1/tenants?watch=true&resourceVersion={id}"),
            None => "/api/v1/tenants?watch=true".to_string(),
        };
        let response = match client.stream(&path) {
            Ok(response) => response,
            Err(err) => {
                // A server that answered with an error will answer the same again.
                let _ = sender.send(Item::Failed(err));
                return;
            }
        };
        let synced_before = last_id.is_some();
        match read_frames(response, sender, &mut last_id, synced_before) {
            Flow::Stop => return,
            Flow::Ended if failures < RECONNECTS && last_id.is_some() => {
                failures += 1;
                thread::sleep(RECONNECT_DELAY);
            }
            Flow::Ended => {
                let message = format!("the server at {} closed the watch stream", client.server());
                let _ = sender.send(Item::Failed(anyhow::anyhow!(message)));
                return;
            }
        }
    }
}

enum Flow {
    /// The receiver is gone.
    Stop,
    /// The server closed the stream.
    Ended,
}

/// Reads frames until the stream ends: `data:` lines make an event, a frame
/// with only `id:` closes the opening burst, `:` lines are comments.
fn read_frames(
    response: impl Read,
    sender: &Sender<Item>,
    last_id: &mut Option<u64>,
    mut synced: bool,
) -> Flow {
    let mut reader = BufReader::new(response);
    let mut data = String::new();
    let mut id: Option<u64> = None;
    let mut line = String::new();
    loop {
        line.clear();
        let read = match reader.read_line(&mut line) {
            Ok(read) => read,
            Err(_) => return Flow::Ended,
        };
        if read == 0 {
            return Flow::Ended;
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
        if let Some(id) = id.take() {
            *last_id = Some(id);
        }
        let item = if data.is_empty() {
            if synced || last_id.is_none() {
                continue;
            }
            synced = true;
            Item::Synced
        } else {
            match serde_json::from_str::<WatchEvent>(&std::mem::take(&mut data)) {
                Ok(event) => Item::Event(Box::new(event)),
                Err(err) => Item::Failed(anyhow::anyhow!("a watch frame this client cannot read: {err}")),
            }
        };
        if sender.send(item).is_err() {
            return Flow::Stop;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_make_events_and_the_id_frame_ends_the_burst() {
        let tenant = r#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.1"}}"#;
        let stream = format!(
            "data: {{\"type\":\"ADDED\",\"object\":{tenant}}}\n\nid: 7\n\n: heartbeat\n\ndata: {{\"type\":\"DELETED\",\"object\":{tenant}}}\nid: 8\n\n"
        );
        let (sender, receiver) = mpsc::channel();
        let mut last = None;
        assert!(matches!(read_frames(stream.as_bytes(), &sender, &mut last, false), Flow::Ended));
        drop(sender);
        let items: Vec<Item> = receiver.iter().collect();
        assert!(matches!(&items[0], Item::Event(e) if e.kind == "ADDED" && e.object.metadata.name == "a"));
        assert!(matches!(items[1], Item::Synced));
        assert!(matches!(&items[2], Item::Event(e) if e.kind == "DELETED"));
        assert_eq!(items.len(), 3);
        assert_eq!(last, Some(8));
    }
}
