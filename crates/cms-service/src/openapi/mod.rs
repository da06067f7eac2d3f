//! The API's OpenAPI 3.1 document, built from the route table: every route of
//! [`ROUTES`] becomes one operation, with its security from the route's
//! access, its path parameters from its pattern, and the error responses
//! that follow from its shape; [`operations`] says what each route does and
//! [`schemas`] holds the wire types' schemas (derived with utoipa where the
//! types live). Served at `GET /openapi.json`, with an interactive page
//! (`assets/docs.html`, self-contained) at `GET /docs`.

mod operations;
mod schemas;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use actix_web::HttpResponse;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use bytes::Bytes;
use cms_auth::Permission;
use cms_model::UserRole;
use serde_json::json;
use utoipa::openapi::path::{
    HttpMethod, Operation, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    Components, ContentBuilder, HeaderBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathItem, Paths, Ref,
    RefOr, Required, Response, ResponseBuilder,
};

use crate::auth::Access;
use crate::ops::BUILD_INFO;
use crate::routes::{ROUTES, RouteInfo};
use crate::{API_PREFIX, reply};
use operations::{Doc, Query, Success};
use schemas::reference;

/// The security scheme of login tokens.
const LOGIN_TOKEN: &str = "loginToken";
/// The security scheme of API tokens.
const API_TOKEN: &str = "apiToken";

/// The interactive page, which fetches `/openapi.json` and renders it.
const DOCS_PAGE: &str = include_str!("../../assets/docs.html");

/// The document's path of a route: the API prefix joined, as clients call it.
pub(crate) fn full_path(route: &RouteInfo) -> String {
    match route.api {
        true => format!("{API_PREFIX}{}", route.path),
        false => route.path.to_string(),
    }
}

/// The whole document.
pub fn document() -> OpenApi {
    let mut paths = Paths::new();
    for route in ROUTES {
        let Some(doc) = operations::describe(route.method, route.path) else {
            // The tests walk the table, so an undescribed route fails them.
            tracing::error!(
                method = route.method,
                path = route.path,
                "route missing from the OpenAPI document"
            );
            continue;
        };
        let Some(method) = http_method(route.method) else { continue };
        let item = PathItem::new(method, operation(route, &doc));
        match paths.paths.get_mut(&full_path(route)) {
            Some(existing) => existing.merge_operations(item),
            None => {
                paths.paths.insert(full_path(route), item);
            }
        }
    }
    let mut components = schemas::components();
    add_security(&mut components);
    add_error_responses(&mut components);
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("cms")
                .version(BUILD_INFO.version)
                .description(Some(
                    "The management plane of Talos tenant clusters. Resources have the shape \
                     `{metadata, spec, status}`; errors have the body `{error, code, status}`. \
                     Authenticate with `Authorization: Bearer <token>`: a login token from \
                     `POST /api/v1/auth/login`, or an API token `cms_...`.",
                ))
                .build(),
        )
        .paths(paths)
        .components(Some(components))
        .tags(Some(
            operations::TAGS
                .iter()
                .map(|(name, about)| TagBuilder::new().name(*name).description(Some(*about)).build()),
        ))
        .build()
}

/// The document as JSON, serialized once.
fn document_json() -> &'static Bytes {
    static JSON: OnceLock<Bytes> = OnceLock::new();
    JSON.get_or_init(|| Bytes::from(document().to_pretty_json().unwrap_or_else(|_| "{}".to_string())))
}

/// `GET /openapi.json`.
pub(crate) async fn serve_document() -> HttpResponse {
    reply::json(actix_web::http::StatusCode::OK, document_json().clone())
}

/// `GET /docs`: the interactive page.
pub(crate) async fn serve_page() -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")))
        .body(DOCS_PAGE)
}

fn http_method(method: &str) -> Option<HttpMethod> {
    Some(match method {
        "GET" => HttpMethod::Get,
        "POST" => HttpMethod::Post,
        "PUT" => HttpMethod::Put,
        "DELETE" => HttpMethod::Delete,
        "PATCH" => HttpMethod::Patch,
        "HEAD" => HttpMethod::Head,
        _ => return None,
    })
}

/// One route's operation: what [`operations`] says, and what follows from
/// the route's access, path, query and body.
fn operation(route: &RouteInfo, doc: &Doc) -> Operation {
    let mut builder = OperationBuilder::new()
        .operation_id(Some(doc.id))
        .tag(doc.tag)
        .summary(Some(doc.summary))
        .description((!doc.description.is_empty()).then_some(doc.description));
    for name in path_parameters(route.path) {
        builder = builder.parameter(path_parameter(name));
    }
    for query in doc.query {
        for parameter in query_parameters(*query) {
            builder = builder.parameter(parameter);
        }
    }
    if let Some(schema) = doc.body {
        let content =
            ContentBuilder::new().schema(Some(reference(schema))).example(schemas::example(schema)).build();
        builder = builder.request_body(Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content("application/json", content)
                .build(),
        ));
    }
    let mut responses: BTreeMap<String, RefOr<Response>> = BTreeMap::new();
    responses.insert(doc.status.to_string(), RefOr::T(success(doc)));
    let mut common: Vec<u16> = Vec::new();
    if doc.body.is_some() {
        common.extend([400, 413, 415, 422]);
    }
    if !doc.query.is_empty() {
        common.push(400);
    }
    if let Some(permission) = route.access.permission() {
        builder = builder
            .security(SecurityRequirement::new(LOGIN_TOKEN, Vec::<String>::new()))
            .security(SecurityRequirement::new(API_TOKEN, Vec::<String>::new()));
        common.push(401);
        if forbids_someone(permission) || refuses_the_roleless(route.access) {
            common.push(403);
        }
        // Every authenticated request counts against its identity's rate.
        common.push(429);
    }
    if route.path.contains('{') {
        common.push(404);
    }
    common.push(500);
    if doc.stateful {
        common.push(503);
    }
    for status in common {
        responses.entry(status.to_string()).or_insert_with(|| RefOr::Ref(Ref::new(error_ref(status))));
    }
    for (status, meaning) in &doc.errors {
        responses.insert(status.to_string(), RefOr::T(error_response(*status, meaning)));
    }
    let mut operation = builder.build();
    operation.responses.responses.extend(responses);
    operation
}

/// Whether some caller with a valid token may be refused this permission:
/// a role without it, or (for tokens) another user's.
fn forbids_someone(permission: Permission) -> bool {
    permission == Permission::OwnTokens || !permission.allows(UserRole::View)
}

/// Whether a caller with no global role, whose access is its grants', may
/// be refused (403): beyond one tenant's routes, where a tenant it has no
/// access to is 404, it holds only its own tokens.
fn refuses_the_roleless(access: Access) -> bool {
    match access {
        Access::Public | Access::OnTenant(_) => false,
        Access::Requires(permission) | Access::OnTenants(permission) => !permission.allows_global(None),
    }
}

fn path_parameters(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter_map(|segment| segment.strip_prefix('{').and_then(|rest| rest.strip_suffix('}')))
}

fn path_parameter(name: &str) -> Parameter {
    let about = match name {
        "name" => "The name of the resource.",
        "tenant" => "The name of the tenant that holds the resource.",
        "id" => "The machine's id.",
        "kind" => "A projected kind such as `Machine` or `DataSource`, in any case.",
        "token" => "The token's name.",
        _ => "",
    };
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(about))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .build()
}

/// A non-negative integer up to the largest the server parses (`u64`).
fn integer(minimum: u64, maximum: Option<u64>, default: Option<u64>) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(minimum))
        .maximum(Some(maximum.unwrap_or(u64::MAX)))
        .default(default.map(|value| json!(value)))
        .into()
}

fn query_parameter(name: &str, about: &str, schema: Schema) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(Required::False)
        .description(Some(about))
        .schema(Some(schema))
        .build()
}

fn query_parameters(query: Query) -> Vec<Parameter> {
    match query {
        Query::Page => vec![
            query_parameter(
                "limit",
                "How many items to return, 1 to 1000.",
                integer(1, Some(1000), Some(100)),
            ),
            query_parameter("offset", "How many items to skip.", integer(0, None, Some(0))),
        ],
        Query::Labels => vec![query_parameter(
            "labelSelector",
            "Only the objects whose labels match this selector, in Kubernetes' syntax: `env=prod`, \
             `env!=prod`, `team in (a,b)`, `team notin (a)`, `tier` (exists), `!legacy` (does not exist), \
             `replicas>2`; requirements joined by `,` must all hold. `total` counts the matches. A \
             malformed selector is 400 naming it and what is wrong.",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(cms_model::MAX_SELECTOR_BYTES))
                .examples([json!("team in (a,b),env!=prod")])
                .into(),
        )],
        Query::Watch => vec![
            query_parameter(
                "watch",
                "`true` answers a `text/event-stream` of tenant events instead of a page.",
                ObjectBuilder::new().schema_type(Type::Boolean).default(Some(json!(false))).into(),
            ),
            query_parameter(
                "resourceVersion",
                "With `watch`: resume after this store revision (the last `id:` seen), replaying what \
                 changed since; wins over a `Last-Event-ID` header.",
                integer(0, None, None),
            ),
            query_parameter(
                "allowWatchBookmarks",
                "With `watch`: also send `BOOKMARK` frames (`id: R` and \
                 `{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"R\"}}}`), a resume \
                 point that misses nothing: every `CMS_WATCH_BOOKMARK_INTERVAL` (60 s), and soon after the \
                 store moved on while the stream had nothing to show.",
                ObjectBuilder::new().schema_type(Type::Boolean).default(Some(json!(false))).into(),
            ),
            query_parameter(
                "fieldSelector",
                "Only the tenant `metadata.name=NAME` (or `==`); any other selector is 400. A watch of \
                 one tenant resumes as long as that tenant's own changes since are in the log.",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^(metadata\\.name==?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$"))
                    .examples([json!("metadata.name=acme")])
                    .into(),
            ),
        ],
        Query::AuditFilters => vec![
            query_parameter(
                "actor",
                "Only records of this actor (a user name, or `anonymous`).",
                ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).into(),
            ),
            query_parameter(
                "tenant",
                "Only records about this tenant.",
                ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).into(),
            ),
        ],
        Query::Logs => {
            let mut service = query_parameter(
                "service",
                "The Talos service whose log to read, such as `machined`, `etcd` or `kubelet`.",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^[a-z0-9][a-z0-9._-]{0,62}$"))
                    .examples([json!("machined")])
                    .into(),
            );
            service.required = Required::True;
            let mut parameters = vec![service];
            parameters.extend(query_parameters(Query::Dmesg));
            parameters
        }
        Query::Dmesg => vec![
            query_parameter(
                "follow",
                "Keep the response open and send what is written next, until the client goes away.",
                ObjectBuilder::new().schema_type(Type::Boolean).default(Some(json!(false))).into(),
            ),
            query_parameter("tail", "Only the last lines, 1 to 10000.", integer(1, Some(10_000), Some(100))),
        ],
        Query::Force => vec![query_parameter(
            "force",
            "Release the lock even though its holder is alive.",
            ObjectBuilder::new().schema_type(Type::Boolean).into(),
        )],
        Query::Ttl => vec![query_parameter(
            "ttl",
            "The client certificate's lifetime, 1m to 24h (up to `CMS_CLIENT_CERT_MAX_TTL`); 24h by default.",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^(([1-9]|[1-5][0-9])m|([1-9]|1[0-9]|2[0-4])h)$"))
                .examples([json!("2h")])
                .into(),
        )],
    }
}

/// The success response of a route.
fn success(doc: &Doc) -> Response {
    let description = match doc.status {
        201 => "Created.",
        202 if doc.id == "releaseStateLock" => "Accepted: the replica reconciling the tenant releases it.",
        202 if doc.id == "rotateCa" => {
            "Accepted: the new CAs are sealed; the reconciler carries the rotation on."
        }
        202 => "Accepted: deletion has begun.",
        204 => "Done; no body.",
        _ => "OK.",
    };
    let builder = ResponseBuilder::new().description(description);
    let string = || -> Schema { ObjectBuilder::new().schema_type(Type::String).into() };
    // One server-sent event as a client parses it: its `data` (a
    // `WatchEvent`'s JSON) and, on live events, its `id`.
    let event = || -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("data", string())
            .property("id", string())
            .property("event", string())
            .into()
    };
    let builder = match doc.success {
        Success::Json(schema) => {
            builder.content("application/json", ContentBuilder::new().schema(Some(reference(schema))).build())
        }
        Success::ListOrWatch => builder
            .content("application/json", ContentBuilder::new().schema(Some(reference("TenantList"))).build())
            .content(
                "text/event-stream",
                ContentBuilder::new()
                    .schema(Some(event()))
                    .description(Some(
                        "With `watch=true`: `data: <WatchEvent>` frames, each followed by `id: <revision>`.",
                    ))
                    .build(),
            ),
        Success::ObjectOrWatch => builder
            .content("application/json", ContentBuilder::new().schema(Some(reference("Tenant"))).build())
            .content(
                "text/event-stream",
                ContentBuilder::new()
                    .schema(Some(event()))
                    .description(Some(
                        "With `watch=true`: the tenant's `data: <WatchEvent>` frames, as \
                         `GET /tenants?watch=true&fieldSelector=metadata.name=NAME`.",
                    ))
                    .build(),
            ),
        Success::Empty => builder,
        Success::Yaml => builder
            .content(
                "application/yaml",
                ContentBuilder::new()
                    .schema(Some(Schema::Object(ObjectBuilder::new().schema_type(Type::Object).build())))
                    .build(),
            )
            .header(
                "Content-Disposition",
                HeaderBuilder::new()
                    .schema(Some(string()))
                    .description(Some("`attachment; filename=\"<name>.yaml\"`"))
                    .build(),
            )
            .header(
                "Cache-Control",
                HeaderBuilder::new()
                    .schema(Some(string()))
                    .description(Some("`no-store`: it holds credentials."))
                    .build(),
            ),
        Success::Text(media) => builder.content(media, ContentBuilder::new().schema(Some(string())).build()),
        Success::Html => builder.content("text/html", ContentBuilder::new().schema(Some(string())).build()),
        Success::Document => builder.content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Schema::Object(ObjectBuilder::new().schema_type(Type::Object).build())))
                .build(),
        ),
    };
    builder.build()
}

/// The error classes of decisions §2, with their codes and generic meanings.
const ERRORS: &[(u16, &str, &str)] = &[
    (
        400,
        "BadRequest",
        "Malformed JSON, a bad query parameter, or a path name that differs from the body's.",
    ),
    (401, "Unauthorized", "A missing, malformed, expired or revoked token."),
    (403, "Forbidden", "The caller's role may not do this."),
    (404, "NotFound", "No such resource, or no such parent tenant."),
    (409, "Conflict", "The write conflicts with the stored state."),
    (410, "Gone", "The event log no longer holds the resume point."),
    (413, "PayloadTooLarge", "The body is over the limit (1 MiB by default)."),
    (415, "UnsupportedMediaType", "The body is not `application/json`."),
    (422, "Invalid", "The body parses but breaks a rule; the message names the field."),
    (
        429,
        "TooManyRequests",
        "Too many failed logins, too many requests from one identity, or too many open watch streams; \
         retry after `Retry-After` seconds.",
    ),
    (500, "Internal", "Something unexpected; the body carries the `requestId` under which it is logged."),
    (502, "BadGateway", "A machine's node answered with an error; the message is its one-line reason."),
    (
        503,
        "Unavailable",
        "A dependency is not ready: the store does not answer, or the state is not there yet.",
    ),
];

fn error_ref(status: u16) -> String {
    let code = ERRORS.iter().find(|(s, ..)| *s == status).map_or("Internal", |(_, code, _)| code);
    format!("#/components/responses/{code}")
}

/// An error response with the error body, and the headers some carry.
fn error_response(status: u16, description: &str) -> Response {
    let code = ERRORS.iter().find(|(s, ..)| *s == status).map_or("Internal", |(_, code, _)| code);
    let example = json!({"error": description, "code": code, "status": status});
    let mut builder = ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new().schema(Some(reference("Error"))).example(Some(example)).build(),
    );
    let integer = || -> Schema { ObjectBuilder::new().schema_type(Type::Integer).into() };
    match status {
        401 => {
            builder = builder.header(
                "WWW-Authenticate",
                HeaderBuilder::new()
                    .schema(Some(Schema::Object(ObjectBuilder::new().schema_type(Type::String).build())))
                    .description(Some("`Bearer`"))
                    .build(),
            );
        }
        429 => {
            builder = builder.header(
                "Retry-After",
                HeaderBuilder::new().schema(Some(integer())).description(Some("Seconds to wait.")).build(),
            );
        }
        _ => {}
    }
    builder.build()
}

fn add_error_responses(components: &mut Components) {
    for (status, code, description) in ERRORS {
        components.responses.insert(code.to_string(), RefOr::T(error_response(*status, description)));
    }
}

fn add_security(components: &mut Components) {
    let mut login = Http::new(HttpAuthScheme::Bearer);
    login.bearer_format = Some("JWT".to_string());
    login.description = Some("A login token from `POST /api/v1/auth/login`.".to_string());
    let mut api = Http::new(HttpAuthScheme::Bearer);
    api.bearer_format = Some("cms_<id>_<secret>".to_string());
    api.description = Some("An API token from `POST /api/v1/users/{name}/tokens`.".to_string());
    components.add_security_scheme(LOGIN_TOKEN, SecurityScheme::Http(login));
    components.add_security_scheme(API_TOKEN, SecurityScheme::Http(api));
}
