//! The document's components: the wire types' derived schemas, and the few
//! built here because they are generic (`{metadata, spec, status}`, lists)
//! or differ between requests and responses (a user's write-only password).

use cms_backup::Backup;
use cms_model::{
    ApiTokenSpec, ApiTokenStatus, AuditRecord, CaRotationStatus, ConfigPatchSpec, ConfigPatchStatus,
    GrantSpec, GrantStatus, LoginRequest, LoginResponse, MachineSpec, MachineStatus, MetalHost,
    NodeGroupSpec, NodeGroupStatus, ObjectMeta, OciConfig, OpenStackConfig, ProjectedList, SsoStartRequest,
    SsoStartResponse, SsoTokenRequest, TenantSpec, TenantStatus, UserRole, UserStatus,
};
use cms_prober::Health;
use serde_json::json;
use utoipa::OpenApi;
use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::{ComponentsBuilder, RefOr};

use crate::backups::{BackupList, RestoreResult};
use crate::error::ErrorBody;
use crate::ops::BuildInfo;
use crate::rotate_ca::RotateCaRequest;
use crate::state_lock::StateLockRelease;

/// The derived schemas, with every schema they refer to.
#[derive(OpenApi)]
#[openapi(components(schemas(
    ObjectMeta,
    TenantSpec,
    TenantStatus,
    NodeGroupSpec,
    NodeGroupStatus,
    OciConfig,
    OpenStackConfig,
    MetalHost,
    ConfigPatchSpec,
    ConfigPatchStatus,
    MachineSpec,
    MachineStatus,
    ProjectedList,
    UserRole,
    UserStatus,
    GrantSpec,
    GrantStatus,
    ApiTokenSpec,
    ApiTokenStatus,
    LoginRequest,
    LoginResponse,
    SsoStartRequest,
    SsoStartResponse,
    SsoTokenRequest,
    AuditRecord,
    Health,
    Backup,
    BackupList,
    RestoreResult,
    StateLockRelease,
    RotateCaRequest,
    CaRotationStatus,
    BuildInfo,
    ErrorBody,
)))]
struct Derived;

/// A reference to the component `name`.
pub(super) fn reference(name: &str) -> RefOr<Schema> {
    RefOr::Ref(utoipa::openapi::Ref::from_schema_name(name))
}

/// `{metadata, spec, status}` over the named spec and status schemas.
fn resource(description: &str, spec: &str, status: &str) -> Schema {
    ObjectBuilder::new()
        .description(Some(description))
        .property("metadata", reference("ObjectMeta"))
        .property("spec", reference(spec))
        .property("status", reference(status))
        .required("metadata")
        .required("spec")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .into()
}

/// `{items, total}` of the named item schema.
fn list(item: &str) -> Schema {
    ObjectBuilder::new()
        .description(Some(format!("A page of {item} objects, sorted by name; `total` counts them all.")))
        .property("items", ArrayBuilder::new().items(reference(item)))
        .property(
            "total",
            ObjectBuilder::new().schema_type(Type::Integer).format(Some(int64())).minimum(Some(0)),
        )
        .required("items")
        .required("total")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .into()
}

fn int64() -> utoipa::openapi::SchemaFormat {
    utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Int64)
}

/// A user's spec: `password` is required on create, optional on update and
/// never returned, which the derived schema (that follows serialization)
/// cannot say.
fn user_spec(password_required: bool) -> Schema {
    let builder = ObjectBuilder::new()
        .description(Some("The desired state of a user."))
        .property("role", reference("GlobalRole"))
        .property(
            "password",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(cms_model::MIN_PASSWORD_CHARS))
                .max_length(Some(cms_model::MAX_PASSWORD_BYTES))
                .write_only(true)
                .description(Some(
                    "At least 8 characters and at most 72 bytes. Required on create; on update, absent keeps the current password. \
                     Never returned.",
                )),
        )
        .required("role")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    match password_required {
        true => builder.required("password").into(),
        false => builder.into(),
    }
}

/// A user's global role: `none` leaves it what its grants give.
fn global_role() -> Schema {
    ObjectBuilder::new()
        .description(Some(
            "The global role: what the user may do on every tenant and beyond. `none` for a user \
             whose access is its grants' alone.",
        ))
        .schema_type(Type::String)
        .enum_values(Some(["none", "view", "edit", "admin"]))
        .into()
}

/// The body of a machine status write: its `status` replaces the stored
/// one; `spec` may be sent back as read and is ignored.
fn machine_status_update() -> Schema {
    ObjectBuilder::new()
        .description(Some("A machine whose `status` replaces the stored one; `spec` is ignored."))
        .property("metadata", reference("ObjectMeta"))
        .property("spec", Schema::Object(Default::default()))
        .property("status", reference("MachineStatus"))
        .required("metadata")
        .required("status")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .into()
}

fn health_list() -> Schema {
    ObjectBuilder::new()
        .description(Some("One health result per tenant, in name order."))
        .property("tenants", ArrayBuilder::new().items(reference("Health")))
        .required("tenants")
        .into()
}

/// A frame of the tenant watch stream, as JSON after `data: `.
fn watch_event() -> Schema {
    ObjectBuilder::new()
        .description(Some(
            "One `data:` frame of the tenant watch stream. Frames carrying only `id: R` mark the \
             revision after the initial burst; `: heartbeat` comments keep the stream open. A `BOOKMARK` \
             (with `allowWatchBookmarks`) carries no tenant, only `{\"metadata\":{\"resourceVersion\":\"R\"}}`, \
             R being its `id`.",
        ))
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"])),
        )
        .property("object", reference("Tenant"))
        .required("type")
        .required("object")
        .into()
}

/// Every schema of the document, by name.
pub(super) fn components() -> utoipa::openapi::Components {
    let derived = Derived::openapi().components.unwrap_or_default();
    let mut builder = ComponentsBuilder::from(derived)
        .schema("Tenant", resource("A tenant: one Talos cluster.", "TenantSpec", "TenantStatus"))
        .schema(
            "NodeGroup",
            resource("A set of machines of one role on one provider.", "NodeGroupSpec", "NodeGroupStatus"),
        )
        .schema(
            "ConfigPatch",
            resource("An overlay on the generated machine configs.", "ConfigPatchSpec", "ConfigPatchStatus"),
        )
        .schema(
            "Machine",
            resource(
                "A machine, created by the reconciler. Its name is its id.",
                "MachineSpec",
                "MachineStatus",
            ),
        )
        .schema("User", resource("A user and its role.", "UserSpec", "UserStatus"))
        .schema("UserSpec", user_spec(false))
        .schema("NewUserSpec", user_spec(true))
        .schema(
            "NewUser",
            resource("A user to create: the password is required.", "NewUserSpec", "UserStatus"),
        )
        .schema(
            "ApiToken",
            resource(
                "An API token; `status.token` is shown only in the create response.",
                "ApiTokenSpec",
                "ApiTokenStatus",
            ),
        )
        .schema("GlobalRole", global_role())
        .schema(
            "Grant",
            resource(
                "A role (view or edit) on the tenants chosen by names and a label selector, for users, groups and workloads.",
                "GrantSpec",
                "GrantStatus",
            ),
        )
        .schema("MachineStatusUpdate", machine_status_update())
        .schema("HealthList", health_list())
        .schema("WatchEvent", watch_event());
    for item in ["Tenant", "NodeGroup", "ConfigPatch", "Machine", "User", "ApiToken", "Grant", "AuditRecord"]
    {
        builder = builder.schema(format!("{item}List"), list(item));
    }
    builder.build()
}

/// An example body for each writable resource, shown in the document and
/// used by the interactive page.
pub(super) fn example(schema: &str) -> Option<serde_json::Value> {
    let value = match schema {
        "Tenant" => json!({
            "metadata": {"name": "demo", "labels": {"team": "platform"}},
            "spec": {
                "kubernetesVersion": "1.31.0",
                "talosVersion": "1.14.0",
                "controlPlaneEndpoint": "https://10.0.0.10:6443"
            }
        }),
        "NodeGroup" => json!({
            "metadata": {"name": "workers"},
            "spec": {
                "role": "worker",
                "count": 1,
                "providerClass": "metal:bare",
                "providerConfig": {"hosts": [{"address": "10.0.0.21"}]}
            }
        }),
        "ConfigPatch" => json!({
            "metadata": {"name": "sysctls"},
            "spec": {
                "format": "strategic",
                "target": "all",
                "patches": [{"machine": {"sysctls": {"vm.max_map_count": "262144"}}}]
            }
        }),
        "NewUser" | "User" => {
            json!({"metadata": {"name": "alice"}, "spec": {"role": "view", "password": "correct-horse-battery"}})
        }
        "ApiToken" => json!({"metadata": {"name": "ci"}, "spec": {"expiresIn": "24h"}}),
        "Grant" => json!({
            "metadata": {"name": "a-devs-edit"},
            "spec": {
                "role": "edit",
                "subjects": [{"kind": "Group", "name": "a-devs"}, {"kind": "User", "name": "alice"}],
                "tenants": {"names": ["shared"], "selector": "team=a"}
            }
        }),
        "LoginRequest" => json!({"username": "admin", "password": "<password>"}),
        "SsoStartRequest" => json!({"redirectUri": "http://127.0.0.1:8000/callback",
            "codeChallenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}),
        "SsoTokenRequest" => json!({"code": "<code>", "state": "<state>",
            "codeVerifier": "<verifier>", "redirectUri": "http://127.0.0.1:8000/callback"}),
        _ => return None,
    };
    Some(value)
}
