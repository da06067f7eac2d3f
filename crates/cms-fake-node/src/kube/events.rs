//! core/v1 Events as a cluster's components write them: the kubelet's
//! `Starting` and `NodeReady`/`NodeNotReady`, the node controller's
//! `RegisteredNode`, `NodeNotSchedulable`/`NodeSchedulable` on a cordon, and
//! `Killing` of a pod evicted; served by `GET /api/v1/events` and
//! `GET /api/v1/namespaces/{namespace}/events` in key order (namespace,
//! then name), with `limit` and `continue` as the real API pages lists.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::kube::state::Data;

/// The most events kept; the oldest go first, as the API server's TTL
/// drops them.
const KEPT: usize = 1000;

/// One event as the fake holds it.
#[derive(Debug, Clone)]
pub(crate) struct EventRecord {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) resource_version: u64,
    pub(crate) at: SystemTime,
    /// `Normal` or `Warning`.
    pub(crate) kind: &'static str,
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) component: &'static str,
    pub(crate) host: String,
    pub(crate) object_kind: &'static str,
    pub(crate) object_name: String,
    /// The involved object's namespace; none for a Node.
    pub(crate) object_namespace: Option<String>,
    pub(crate) object_uid: String,
}

/// What happened to an object, for [`record`].
#[derive(Debug)]
pub(crate) struct Happened<'a> {
    pub(crate) kind: &'static str,
    pub(crate) reason: &'a str,
    pub(crate) message: String,
    pub(crate) component: &'static str,
    pub(crate) host: &'a str,
}

/// Records an event about Node `node` (namespace `default`, as the kubelet
/// and the node controller write them).
pub(crate) fn about_node(data: &mut Data, node: &str, happened: Happened<'_>) {
    record(data, "default", ("Node", node, None, node.to_string()), happened);
}

/// Records an event about Pod `namespace/name` whose uid is `uid`.
pub(crate) fn about_pod(data: &mut Data, namespace: &str, name: &str, uid: &str, happened: Happened<'_>) {
    record(data, namespace, ("Pod", name, Some(namespace.to_string()), uid.to_string()), happened);
}

fn record(
    data: &mut Data,
    namespace: &str,
    (object_kind, object_name, object_namespace, object_uid): (&'static str, &str, Option<String>, String),
    happened: Happened<'_>,
) {
    let at = SystemTime::now();
    let nanos = at.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
    data.changed();
    let uid = data.uid();
    // Names as client-go's recorder makes them: the object's name and the time in hex.
    let name = format!("{object_name}.{nanos:x}{:04x}", data.resource_version % 0x1_0000);
    data.events.push(EventRecord {
        namespace: namespace.to_string(),
        name,
        uid,
        resource_version: data.resource_version,
        at,
        kind: happened.kind,
        reason: happened.reason.to_string(),
        message: happened.message,
        component: happened.component,
        host: happened.host.to_string(),
        object_kind,
        object_name: object_name.to_string(),
        object_namespace,
        object_uid,
    });
    if data.events.len() > KEPT {
        data.events.remove(0);
    }
}

/// An `EventList` of `namespace` (or every namespace), paged by `limit`
/// and `continue`; a bad `limit` or `continue` is `Err` with the message
/// of the API's 400.
pub(crate) fn list(
    data: &Data,
    namespace: Option<&str>,
    query: &[(String, String)],
) -> Result<Value, String> {
    let param = |key: &str| query.iter().find(|(name, _)| name == key).map(|(_, value)| value.as_str());
    let limit = match param("limit") {
        None | Some("0") => None,
        Some(text) => Some(text.parse::<usize>().map_err(|_| format!("invalid limit: {text:?}"))?),
    };
    let after = param("continue").filter(|token| !token.is_empty());
    if let Some(token) = after
        && !token.contains('/')
    {
        return Err("continue key is not valid: malformed".to_string());
    }
    let mut events: Vec<&EventRecord> = data
        .events
        .iter()
        .filter(|event| namespace.is_none_or(|namespace| event.namespace == namespace))
        .collect();
    events.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let key = |event: &EventRecord| format!("{}/{}", event.namespace, event.name);
    let start =
        after.map_or(0, |token| events.iter().take_while(|event| key(event).as_str() <= token).count());
    let rest = &events[start..];
    let page = limit.map_or(rest.len(), |limit| limit.min(rest.len()));
    let items: Vec<Value> = rest[..page].iter().map(|event| event_json(event)).collect();
    let mut metadata = json!({"resourceVersion": data.resource_version.to_string()});
    if page < rest.len() {
        metadata["continue"] = json!(key(rest[page - 1]));
        metadata["remainingItemCount"] = json!(rest.len() - page);
    }
    Ok(json!({"kind": "EventList", "apiVersion": "v1", "metadata": metadata, "items": items}))
}

fn event_json(event: &EventRecord) -> Value {
    let at = humantime::format_rfc3339_seconds(event.at).to_string();
    let mut object = json!({
        "kind": event.object_kind,
        "name": event.object_name,
        "uid": event.object_uid,
        "apiVersion": "v1",
    });
    if let Some(namespace) = &event.object_namespace {
        object["namespace"] = json!(namespace);
    }
    json!({
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": event.name,
            "namespace": event.namespace,
            "uid": event.uid,
            "resourceVersion": event.resource_version.to_string(),
            "creationTimestamp": at,
        },
        "involvedObject": object,
        "reason": event.reason,
        "message": event.message,
        "source": {"component": event.component, "host": event.host},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
        "type": event.kind,
        "eventTime": null,
        "reportingComponent": event.component,
        "reportingInstance": event.host,
    })
}
