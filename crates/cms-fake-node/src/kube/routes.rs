//! The fake Kubernetes API's answers: one function from a request to a
//! reply, routing on the method and the path's segments.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::kube::state::{KubeRequest, Store, pod_key};
use crate::kube::{events, objects};

/// What a route answers.
#[derive(Debug)]
enum Reply {
    Json(StatusCode, Value),
    Text(StatusCode, String),
}

impl Reply {
    fn ok(value: Value) -> Reply {
        Reply::Json(StatusCode::OK, value)
    }

    /// A `Status` failure with this code, reason (such as `NotFound`) and message.
    fn failure(code: StatusCode, reason: &str, message: &str) -> Reply {
        Reply::Json(code, objects::status(code.as_u16(), reason, message))
    }

    fn not_found(resource: &str, name: &str) -> Reply {
        Reply::Json(StatusCode::NOT_FOUND, objects::not_found(resource, name))
    }

    fn bad_request(message: &str) -> Reply {
        Reply::failure(StatusCode::BAD_REQUEST, "BadRequest", message)
    }
}

/// What a route reads from the request.
#[derive(Debug)]
struct Asked<'a> {
    method: &'a str,
    /// The query's pairs, decoded.
    query: Vec<(String, String)>,
    /// Whether the client asked for a `meta.k8s.io` Table (kubectl does).
    table: bool,
    content_type: &'a str,
    body: Bytes,
}

/// Records the request, then answers it.
pub(crate) async fn answer(
    store: &Store,
    client: Option<String>,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_string(), |p| p.to_string());
    store.data().requests.push(KubeRequest { method: parts.method.to_string(), path, client });
    let header = |name| parts.headers.get(name).and_then(|value: &HeaderValue| value.to_str().ok());
    let reply = match body.collect().await {
        Ok(body) => {
            let asked = Asked {
                method: parts.method.as_str(),
                query: parts.uri.query().map(query_pairs).unwrap_or_default(),
                table: header(ACCEPT).is_some_and(|accept| accept.contains("as=Table")),
                content_type: header(CONTENT_TYPE).unwrap_or_default(),
                body: body.to_bytes(),
            };
            let segments: Vec<&str> = parts.uri.path().split('/').filter(|s| !s.is_empty()).collect();
            route(store, &segments, &asked)
        }
        Err(err) => Reply::bad_request(&format!("reading the body: {err}")),
    };
    response(reply)
}

fn response(reply: Reply) -> Response<Full<Bytes>> {
    let (code, content_type, body) = match reply {
        Reply::Json(code, value) => (code, "application/json", value.to_string()),
        Reply::Text(code, text) => (code, "text/plain; charset=utf-8", text),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = code;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn route(store: &Store, segments: &[&str], asked: &Asked<'_>) -> Reply {
    if let ["readyz"] = segments {
        return readyz(store);
    }
    if let Some(why) = store.etcd_down() {
        return Reply::failure(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", why);
    }
    match (asked.method, segments) {
        ("GET", ["livez" | "healthz"]) => Reply::Text(StatusCode::OK, "ok".into()),
        ("GET", ["version"]) => Reply::ok(objects::version()),
        ("GET", ["api"]) => Reply::ok(objects::api_versions(store.addr)),
        ("GET", ["apis"]) => Reply::ok(objects::api_groups()),
        ("GET", ["api", "v1"]) => Reply::ok(objects::api_resources()),
        ("GET", ["api", "v1", "nodes"]) => list_nodes(store, asked),
        ("GET", ["api", "v1", "nodes", name]) => get_node(store, name, asked),
        ("PATCH", ["api", "v1", "nodes", name]) => patch_node(store, name, asked),
        ("DELETE", ["api", "v1", "nodes", name]) => delete_node(store, name),
        ("GET", ["api", "v1", "events"]) => list_events(store, None, asked),
        ("GET", ["api", "v1", "namespaces", namespace, "events"]) => {
            list_events(store, Some(namespace), asked)
        }
        ("GET", ["api", "v1", "pods"]) => list_pods(store, None, asked),
        ("GET", ["api", "v1", "namespaces", namespace, "pods"]) => list_pods(store, Some(namespace), asked),
        ("GET", ["api", "v1", "namespaces", namespace, "pods", name]) => {
            get_pod(store, namespace, name, asked)
        }
        ("POST", ["api", "v1", "namespaces", namespace, "pods", name, "eviction"]) => {
            evict(store, namespace, name, asked)
        }
        (_, ["api", "v1", "nodes", ..] | ["api", "v1", "namespaces", _, "pods", ..]) => Reply::failure(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            &format!("the server does not allow this method on the requested resource ({})", asked.method),
        ),
        _ => Reply::failure(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        ),
    }
}

/// `/readyz`: `ok`, or a 500 naming the check that fails.
fn readyz(store: &Store) -> Reply {
    let failing = match store.etcd_down() {
        Some(why) => Some(format!("etcd failed: {why}")),
        None if !store.data().api_ready => Some("api failed: the API server is not ready".to_string()),
        None => None,
    };
    match failing {
        Some(check) => Reply::Text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[+]ping ok\n[-]{check}\nreadyz check failed\n"),
        ),
        None => Reply::Text(StatusCode::OK, "ok".into()),
    }
}

fn list_nodes(store: &Store, asked: &Asked<'_>) -> Reply {
    let data = store.data();
    let nodes: Vec<Value> =
        data.nodes.values().map(|record| objects::node(record, data.resource_version)).collect();
    match asked.table {
        true => Reply::ok(objects::node_table(&nodes, data.resource_version)),
        false => Reply::ok(objects::list("NodeList", nodes, data.resource_version)),
    }
}

/// Events, of one namespace or all, paged by `limit` and `continue`.
fn list_events(store: &Store, namespace: Option<&str>, asked: &Asked<'_>) -> Reply {
    match events::list(&store.data(), namespace, &asked.query) {
        Ok(list) => Reply::ok(list),
        Err(message) => Reply::bad_request(&message),
    }
}

fn get_node(store: &Store, name: &str, asked: &Asked<'_>) -> Reply {
    let data = store.data();
    let Some(record) = data.nodes.get(name) else { return Reply::not_found("nodes", name) };
    let node = objects::node(record, data.resource_version);
    match asked.table {
        true => Reply::ok(objects::node_table(&[node], data.resource_version)),
        false => Reply::ok(node),
    }
}

/// A merge, strategic-merge or JSON patch of `spec.unschedulable` (cordon
/// and uncordon), or a merge patch of `spec.providerID`, which, as the API
/// server allows, may only go from empty to a value; other fields are
/// ignored.
fn patch_node(store: &Store, name: &str, asked: &Asked<'_>) -> Reply {
    let media_type = asked.content_type.split(';').next().unwrap_or_default().trim();
    let unschedulable = match media_type {
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => merge_patch(&asked.body),
        "application/json-patch+json" => json_patch(&asked.body),
        other => {
            let message = format!("the body of the request was in an unknown format: {other:?}");
            return Reply::failure(StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", &message);
        }
    };
    let unschedulable = match unschedulable {
        Ok(unschedulable) => unschedulable,
        Err(message) => return Reply::bad_request(&message),
    };
    let provider_id = match media_type {
        "application/json-patch+json" => Ok(None),
        _ => provider_id_patch(&asked.body),
    };
    let provider_id = match provider_id {
        Ok(provider_id) => provider_id,
        Err(message) => return Reply::bad_request(&message),
    };
    let mut data = store.data();
    let Some(record) = data.nodes.get_mut(name) else { return Reply::not_found("nodes", name) };
    if let Some(provider_id) = provider_id {
        if !record.node.provider_id.is_empty() && record.node.provider_id != provider_id {
            let message = format!(
                "Node \"{name}\" is invalid: spec.providerID: Forbidden: node updates may not change providerID \
                 except from \"\" to valid"
            );
            return Reply::failure(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", &message);
        }
        record.node.provider_id = provider_id;
    }
    let cordoned = unschedulable.filter(|unschedulable| *unschedulable != record.node.unschedulable);
    if let Some(unschedulable) = unschedulable {
        record.node.unschedulable = unschedulable;
    }
    let record = record.clone();
    data.changed();
    if let Some(unschedulable) = cordoned {
        let reason = if unschedulable { "NodeNotSchedulable" } else { "NodeSchedulable" };
        let message = format!("Node {name} status is now: {reason}");
        let happened = events::Happened { kind: "Normal", reason, message, component: "kubelet", host: name };
        events::about_node(&mut data, name, happened);
    }
    Reply::ok(objects::node(&record, data.resource_version))
}

/// What a merge patch sets `spec.unschedulable` to (`null` clears it).
fn merge_patch(body: &[u8]) -> Result<Option<bool>, String> {
    let patch: Value = serde_json::from_slice(body).map_err(|err| format!("the patch is not JSON: {err}"))?;
    match patch.get("spec").and_then(|spec| spec.get("unschedulable")) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(false)),
        Some(Value::Bool(value)) => Ok(Some(*value)),
        Some(other) => Err(format!("spec.unschedulable must be a boolean, not {other}")),
    }
}

/// What a merge patch sets `spec.providerID` to.
fn provider_id_patch(body: &[u8]) -> Result<Option<String>, String> {
    let patch: Value = serde_json::from_slice(body).map_err(|err| format!("the patch is not JSON: {err}"))?;
    match patch.get("spec").and_then(|spec| spec.get("providerID")) {
        None => Ok(None),
        Some(Value::String(id)) => Ok(Some(id.clone())),
        Some(other) => Err(format!("spec.providerID must be a string, not {other}")),
    }
}

/// What a JSON patch's operations on `/spec/unschedulable` leave it at.
fn json_patch(body: &[u8]) -> Result<Option<bool>, String> {
    let patch: Vec<Value> =
        serde_json::from_slice(body).map_err(|err| format!("the patch is not a JSON patch: {err}"))?;
    let mut unschedulable = None;
    for operation in patch.iter().filter(|op| op["path"] == "/spec/unschedulable") {
        unschedulable = match (operation["op"].as_str(), &operation["value"]) {
            (Some("remove"), _) => Some(false),
            (Some("add" | "replace"), Value::Bool(value)) => Some(*value),
            _ => return Err(format!("unsupported operation on /spec/unschedulable: {operation}")),
        };
    }
    Ok(unschedulable)
}

fn delete_node(store: &Store, name: &str) -> Reply {
    let mut data = store.data();
    if data.nodes.remove(name).is_none() {
        return Reply::not_found("nodes", name);
    }
    data.deleted_nodes.push(name.to_string());
    data.changed();
    let mut status = objects::status(200, "", "");
    status["details"] = json!({"name": name, "kind": "nodes"});
    Reply::ok(status)
}

/// Pods, of one namespace or all, filtered by a `fieldSelector` on
/// `spec.nodeName`, `metadata.name`, `metadata.namespace` or `status.phase`.
fn list_pods(store: &Store, namespace: Option<&str>, asked: &Asked<'_>) -> Reply {
    let selector =
        asked.query.iter().find(|(key, _)| key == "fieldSelector").map(|(_, value)| value.as_str());
    let terms = match selector.map(field_terms).transpose() {
        Ok(terms) => terms.unwrap_or_default(),
        Err(message) => return Reply::bad_request(&message),
    };
    let data = store.data();
    let pods: Vec<Value> = data
        .pods
        .values()
        .filter(|record| namespace.is_none_or(|namespace| record.pod.namespace == namespace))
        .map(|record| objects::pod(record, data.resource_version))
        .filter(|pod| terms.iter().all(|term| term.matches(pod)))
        .collect();
    match asked.table {
        true => Reply::ok(objects::pod_table(&pods, data.resource_version)),
        false => Reply::ok(objects::list("PodList", pods, data.resource_version)),
    }
}

fn get_pod(store: &Store, namespace: &str, name: &str, asked: &Asked<'_>) -> Reply {
    let data = store.data();
    let Some(record) = data.pods.get(&pod_key(namespace, name)) else {
        return Reply::not_found("pods", name);
    };
    let pod = objects::pod(record, data.resource_version);
    match asked.table {
        true => Reply::ok(objects::pod_table(&[pod], data.resource_version)),
        false => Reply::ok(pod),
    }
}

/// An eviction: 201 and the pod is gone, or 429 while blocked as a
/// PodDisruptionBudget would.
fn evict(store: &Store, namespace: &str, name: &str, asked: &Asked<'_>) -> Reply {
    if !asked.body.is_empty() && serde_json::from_slice::<Value>(&asked.body).is_err() {
        return Reply::bad_request("the body is not an Eviction");
    }
    let key = pod_key(namespace, name);
    let mut data = store.data();
    if !data.pods.contains_key(&key) {
        return Reply::not_found("pods", name);
    }
    if let Some(times) = data.blocked.get_mut(&key)
        && *times > 0
    {
        *times -= 1;
        let mut status = objects::status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        );
        status["details"] = json!({"causes": [{
            "reason": "DisruptionBudget",
            "message": "The disruption budget needs 1 healthy pods and has 1 currently",
        }]});
        return Reply::Json(StatusCode::TOO_MANY_REQUESTS, status);
    }
    if let Some(evicted) = data.pods.remove(&key) {
        let message = "Stopping container main".to_string();
        let host = evicted.pod.node.clone();
        let happened = events::Happened {
            kind: "Normal",
            reason: "Killing",
            message,
            component: "kubelet",
            host: &host,
        };
        events::about_pod(&mut data, namespace, name, &evicted.uid, happened);
    }
    data.evictions.push(key);
    data.changed();
    Reply::Json(StatusCode::CREATED, objects::status(201, "", ""))
}

/// One term of a field selector: `field=value`, `field==value` or
/// `field!=value`.
#[derive(Debug)]
struct FieldTerm {
    /// The JSON pointer of the field.
    pointer: &'static str,
    value: String,
    equal: bool,
}

impl FieldTerm {
    fn matches(&self, object: &Value) -> bool {
        (object.pointer(self.pointer).and_then(Value::as_str) == Some(self.value.as_str())) == self.equal
    }
}

fn field_terms(selector: &str) -> Result<Vec<FieldTerm>, String> {
    let mut terms = Vec::new();
    for term in selector.split(',').filter(|term| !term.is_empty()) {
        let (field, value, equal) = if let Some((field, value)) = term.split_once("!=") {
            (field, value, false)
        } else if let Some((field, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
            (field, value, true)
        } else {
            return Err(format!("invalid selector: {term:?}"));
        };
        let pointer = match field {
            "spec.nodeName" => "/spec/nodeName",
            "metadata.name" => "/metadata/name",
            "metadata.namespace" => "/metadata/namespace",
            "status.phase" => "/status/phase",
            other => return Err(format!("field label not supported: {other}")),
        };
        terms.push(FieldTerm { pointer, value: value.to_string(), equal });
    }
    Ok(terms)
}

/// The pairs of a query string, percent-decoded.
fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

/// Undoes URL encoding: `%XX` escapes and `+` for a space.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|hex| std::str::from_utf8(hex).ok());
        match (bytes[i], hex.and_then(|hex| u8::from_str_radix(hex, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_and_field_selectors_match() {
        let pairs = query_pairs("fieldSelector=spec.nodeName%3Dw-0%2Cstatus.phase!%3DSucceeded&limit=500");
        assert_eq!(pairs[0], ("fieldSelector".into(), "spec.nodeName=w-0,status.phase!=Succeeded".into()));
        let terms = field_terms(&pairs[0].1).unwrap();
        let pod = json!({"spec": {"nodeName": "w-0"}, "status": {"phase": "Running"}});
        assert!(terms.iter().all(|term| term.matches(&pod)));
        let other = json!({"spec": {"nodeName": "w-1"}, "status": {"phase": "Running"}});
        assert!(!terms.iter().all(|term| term.matches(&other)));
        assert!(field_terms("spec.schedulerName=x").is_err());
    }

    #[test]
    fn patches_set_and_clear_unschedulable() {
        assert_eq!(merge_patch(br#"{"spec":{"unschedulable":true}}"#), Ok(Some(true)));
        assert_eq!(merge_patch(br#"{"spec":{"unschedulable":null}}"#), Ok(Some(false)));
        assert_eq!(merge_patch(br#"{"metadata":{}}"#), Ok(None));
        assert!(merge_patch(b"nope").is_err());
        let json = br#"[{"op":"replace","path":"/spec/unschedulable","value":true}]"#;
        assert_eq!(json_patch(json), Ok(Some(true)));
        assert_eq!(json_patch(br#"[{"op":"remove","path":"/spec/unschedulable"}]"#), Ok(Some(false)));
    }
}
