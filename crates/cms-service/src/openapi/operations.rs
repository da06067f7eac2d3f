//! What each route of the table does, for the document: its summary, query,
//! body and success responses. The error responses that follow from the
//! route's shape (its access, path parameters, body, query) are added by
//! [`super::operation`]; only the ones particular to a route are named here.

/// The query parameters a route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Query {
    /// `limit` and `offset`.
    Page,
    /// `labelSelector`.
    Labels,
    /// `watch`, `resourceVersion` and the `Last-Event-ID` header.
    Watch,
    /// `ttl` of a client-config download.
    Ttl,
    /// The audit log's `actor` and `tenant` filters.
    AuditFilters,
    /// `force` of a state lock's release.
    Force,
    /// `service` (required), `follow` and `tail` of a machine's log.
    Logs,
    /// `follow` and `tail` of a machine's kernel log.
    Dmesg,
}

/// What a successful response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Success {
    /// JSON of the named schema.
    Json(&'static str),
    /// A page of tenants as JSON, or with `watch` an event stream.
    ListOrWatch,
    /// A tenant as JSON, or with `watch` the event stream of that tenant.
    ObjectOrWatch,
    /// No body.
    Empty,
    /// A YAML file to save, with `Content-Disposition` and `Cache-Control`.
    Yaml,
    /// Plain text of the given media type.
    Text(&'static str),
    /// The interactive documentation page.
    Html,
    /// The OpenAPI document itself.
    Document,
}

/// One route, described.
#[derive(Debug, Clone)]
pub(super) struct Doc {
    pub(super) id: &'static str,
    pub(super) tag: &'static str,
    pub(super) summary: &'static str,
    pub(super) description: &'static str,
    pub(super) query: &'static [Query],
    /// The request body's schema.
    pub(super) body: Option<&'static str>,
    pub(super) status: u16,
    pub(super) success: Success,
    /// Errors particular to this route, with what they mean here.
    pub(super) errors: Vec<(u16, &'static str)>,
    /// Whether the route touches the store (and so may be 503 when it
    /// does not answer).
    pub(super) stateful: bool,
}

impl Doc {
    fn new(id: &'static str, tag: &'static str, summary: &'static str) -> Doc {
        Doc {
            id,
            tag,
            summary,
            description: "",
            query: &[],
            body: None,
            status: 200,
            success: Success::Empty,
            errors: Vec::new(),
            stateful: true,
        }
    }

    fn about(mut self, description: &'static str) -> Doc {
        self.description = description;
        self
    }

    fn query(mut self, query: &'static [Query]) -> Doc {
        self.query = query;
        self
    }

    fn body(mut self, schema: &'static str) -> Doc {
        self.body = Some(schema);
        self
    }

    fn ok(mut self, status: u16, success: Success) -> Doc {
        self.status = status;
        self.success = success;
        self
    }

    fn error(mut self, status: u16, meaning: &'static str) -> Doc {
        self.errors.push((status, meaning));
        self
    }

    fn stateless(mut self) -> Doc {
        self.stateful = false;
        self
    }
}

const OPS: &str = "operations";
const DOCS: &str = "documentation";
const AUTH: &str = "auth";
const TENANTS: &str = "tenants";
const GROUPS: &str = "node-groups";
const PATCHES: &str = "config-patches";
const MACHINES: &str = "machines";
const PROJECTED: &str = "projected";
const HEALTH: &str = "health";
const BACKUPS: &str = "backups";
const USERS: &str = "users";
const TOKENS: &str = "tokens";
const GRANTS: &str = "grants";
const AUDIT: &str = "audit";

/// The tags, in the order the page shows them, with what they hold.
pub(super) const TAGS: &[(&str, &str)] = &[
    (AUTH, "Logging in for a token."),
    (TENANTS, "Tenants (one cluster each), their watch stream and their downloads."),
    (GROUPS, "Node groups: machines of one role on one provider."),
    (PATCHES, "Config patches: overlays on the generated machine configs."),
    (MACHINES, "Machines, created by the reconciler."),
    (PROJECTED, "What the provisioning tool created, read-only."),
    (HEALTH, "Cluster health, probed on request."),
    (
        BACKUPS,
        "A tenant's etcd backups: taken on demand or on its schedule, kept encrypted, restored and deleted by admins.",
    ),
    (USERS, "Users and their roles (admins only)."),
    (TOKENS, "API tokens: each user manages their own, admins everyone's."),
    (GRANTS, "Grants: view or edit on chosen tenants for users, groups and workloads (admins only)."),
    (AUDIT, "The audit log of every mutation (admins only)."),
    (OPS, "Operational endpoints at the server root."),
    (DOCS, "This document and its interactive page."),
];

const PAGE: &[Query] = &[Query::Page];

/// The query of a list of labelled resources.
const LABELLED: &[Query] = &[Query::Page, Query::Labels];

const STALE: &str = "stale `metadata.resourceVersion`, or the tenant is being deleted";
const TAKEN: &str = "the name is taken, or the tenant is being deleted";

/// The description of the route `method path` (path as in the table).
pub(super) fn describe(method: &str, path: &str) -> Option<Doc> {
    let doc = match (method, path) {
        ("GET", "/healthz") => Doc::new("healthz", OPS, "Liveness: `ok` while the process is up")
            .ok(200, Success::Text("text/plain"))
            .stateless(),
        ("GET", "/readyz") => {
            Doc::new("readyz", OPS, "Readiness: `ready` once the store is migrated and answers")
                .ok(200, Success::Text("text/plain"))
        }
        ("GET", "/metrics") => Doc::new("metrics", OPS, "Prometheus metrics in the text format")
            .about(
                "Needs no credentials. The series labelled with tenant names (`tenant`) are left out unless \
                 the request carries a valid bearer token (of any role) or the server sets \
                 `CMS_METRICS_TENANT_LABELS=true`.",
            )
            .ok(200, Success::Text("text/plain"))
            .error(401, "a bearer token was sent and is not valid")
            .stateless(),
        ("GET", "/version") => Doc::new("version", OPS, "The build: version, git commit and build time")
            .ok(200, Success::Json("BuildInfo"))
            .stateless(),
        ("GET", "/openapi.json") => {
            Doc::new("openapi", DOCS, "This OpenAPI 3.1 document").ok(200, Success::Document).stateless()
        }
        ("GET", "/docs") => Doc::new("docs", DOCS, "An interactive page over this document")
            .ok(200, Success::Html)
            .stateless(),
        ("POST", "/auth/login") => {
            Doc::new("login", AUTH, "Exchange a user name and password for a login token")
                .about(
                    "The token is a JWT that lives `CMS_LOGIN_TOKEN_TTL` (1h by default). Wrong credentials \
                 get the same 401 whether or not the user exists; the sixth failure for one user within \
                 a minute gets 429 with `Retry-After`.",
                )
                .body("LoginRequest")
                .ok(200, Success::Json("LoginResponse"))
                .error(401, "wrong user name or password")
                .error(429, "too many failed logins for this user; retry after `Retry-After` seconds")
        }
        ("POST", "/auth/sso/start") => {
            Doc::new("startSso", AUTH, "Begin a sign-in at the identity provider")
                .about(
                    "For clients that receive the code on a loopback address, as `cms login --sso` does: \
                 answers the provider's authorization URL, whose signed `state` lives 10 minutes. The \
                 redirect URI must be `http://` on a loopback address; the client keeps the PKCE verifier \
                 and presents it to `POST /auth/sso/token`.",
                )
                .body("SsoStartRequest")
                .ok(200, Success::Json("SsoStartResponse"))
                .error(404, "single sign-on is not configured")
                .error(503, "the identity provider cannot be reached")
        }
        ("POST", "/auth/sso/token") => {
            Doc::new("finishSso", AUTH, "Exchange a sign-in's code for a login token")
                .about(
                    "The state must be one this server signed for the same redirect URI, the verifier must \
                 match its challenge, and the provider's ID token must verify. The user's groups must \
                 grant a role (`CMS_SSO_GROUP_ROLES`, `CMS_SSO_DEFAULT_ROLE`).",
                )
                .body("SsoTokenRequest")
                .ok(200, Success::Json("LoginResponse"))
                .error(401, "the state, verifier, code or ID token does not verify")
                .error(403, "the user signed in, but none of their groups grants a role")
                .error(404, "single sign-on is not configured")
                .error(503, "the identity provider cannot be reached")
        }
        ("GET", "/tenants") => Doc::new("listTenants", TENANTS, "List tenants, or watch them")
            .about(
                "A page of tenants sorted by name, of those `labelSelector` matches when given. With \
                 `watch=true` the answer is a server-sent-event \
                 stream instead: one `ADDED` frame per tenant, a frame with only `id: R`, then live \
                 `ADDED`, `MODIFIED` and `DELETED` frames each with `id: <revision>`, and a \
                 `: heartbeat` comment every 15 s. Resume with `resourceVersion` or `Last-Event-ID`. \
                 `fieldSelector=metadata.name=NAME` narrows the page or the stream to one tenant; \
                 `allowWatchBookmarks=true` adds `BOOKMARK` frames. With a selector, a tenant that starts \
                 matching arrives as `ADDED` and one that stops as `DELETED`.",
            )
            .query(&[Query::Page, Query::Labels, Query::Watch])
            .ok(200, Success::ListOrWatch)
            .error(410, "the event log no longer reaches back to the resume point; list and watch afresh")
            .error(
                429,
                "the caller's identity holds as many watch streams open as it may (`CMS_WATCHES_PER_IDENTITY`), \
                 or is over its request rate; retry after `Retry-After` seconds",
            ),
        ("POST", "/tenants") => Doc::new("createTenant", TENANTS, "Create a tenant")
            .about(
                "Generates and seals the tenant's Talos secrets bundle in the same transaction. Inline \
                 `spec.nodeGroups` create the node-group resources too.",
            )
            .body("Tenant")
            .ok(201, Success::Json("Tenant"))
            .error(409, TAKEN),
        ("GET", "/tenants/{name}") => Doc::new("getTenant", TENANTS, "Read a tenant, or watch it")
            .about(
                "The tenant. With `watch=true` the event stream of this tenant alone, as \
                 `GET /tenants?watch=true&fieldSelector=metadata.name=NAME`: its resume needs only its \
                 own changes to be in the event log.",
            )
            .query(&[Query::Watch])
            .ok(200, Success::ObjectOrWatch)
            .error(410, "the tenant's own changes since the resume point are no longer in the event log")
            .error(
                429,
                "the caller's identity holds as many watch streams open as it may (`CMS_WATCHES_PER_IDENTITY`), \
                 or is over its request rate; retry after `Retry-After` seconds",
            ),
        ("PUT", "/tenants/{name}") => Doc::new(
            "updateTenant",
            TENANTS,
            "Replace a tenant's spec, labels and annotations",
        )
        .about(
            "Send the object as read, changed: `metadata.resourceVersion` is required (422 without) and a \
                 stale one is 409. `metadata.name` must equal the path's name (400 otherwise). A \
                 `spec.nodeGroups` list replaces the tenant's groups; absent leaves them.",
        )
        .body("Tenant")
        .ok(200, Success::Json("Tenant"))
        .error(409, STALE),
        ("DELETE", "/tenants/{name}") => Doc::new("deleteTenant", TENANTS, "Delete a tenant")
            .about(
                "202 with the tenant marked for deletion (`deletionTimestamp` and the finalizers \
                 `service.io/machines` and `service.io/secrets`); the reconciler destroys the \
                 infrastructure and removes the record. Deleting again answers the same.",
            )
            .ok(202, Success::Json("Tenant")),
        ("GET", "/tenants/{name}/kubeconfig") => {
            Doc::new("getKubeconfig", TENANTS, "Download a kubeconfig for the tenant's cluster")
                .about(
                    "A fresh client certificate that follows the caller's role (`system:masters` for admin \
                     and edit, `cms:viewers` for view), living `ttl` (24h by default).",
                )
                .query(&[Query::Ttl])
                .ok(200, Success::Yaml)
                .error(409, "the tenant's secrets were dropped")
        }
        ("GET", "/tenants/{name}/talosconfig") => {
            Doc::new("getTalosconfig", TENANTS, "Download a talosconfig for the tenant's nodes")
                .about("A fresh client certificate with the role `os:admin`, `os:operator` or `os:reader`.")
                .query(&[Query::Ttl])
                .ok(200, Success::Yaml)
                .error(409, "the tenant's secrets were dropped")
        }
        ("GET", "/tenants/{name}/secrets") => {
            Doc::new("getSecrets", TENANTS, "Download the tenant's secrets bundle (break-glass)")
                .about("The bundle as `talosctl gen secrets` writes it. Admins only; every read is logged.")
                .ok(200, Success::Yaml)
                .error(409, "the tenant's secrets were dropped")
        }
        ("GET", "/tenants/{name}/autoscaler-identity") => Doc::new(
            "getAutoscalerIdentity",
            TENANTS,
            "Download the tenant's cluster autoscaler identity",
        )
        .about(
            "A Kubernetes Secret (`kube-system/cms-autoscaler`) holding the `externalgrpc` cloud config, \
             the autoscaler CA and a fresh client certificate (CN the tenant, O \
             `cms:autoscaler:<createdAt in Unix ms>`, 365 days) that lists and resizes only this tenant's \
             node groups. Admins only; each download issues a new certificate (docs/autoscaling.md).",
        )
        .ok(200, Success::Yaml)
        .error(409, "the tenant is being deleted")
        .error(503, "the server serves no autoscaler port"),
        ("GET", "/tenants/{name}/support") => {
            Doc::new("getSupportBundle", TENANTS, "Download the tenant's support bundle")
                .about(
                    "A zip streamed as it is made: the tenant, its node groups, config patches and machines \
                     with status; per machine its Talos version, services, recent logs and dmesg; the \
                     cluster's Nodes and newest events; the tool's last apply and plan; `errors.txt` for \
                     parts that could not be read. No secrets; at most 64 MiB of content. Editors and \
                     admins; every read is on the audit log (docs/support.md).",
                )
                .ok(200, Success::Text("application/zip"))
        }
        ("GET", "/tenants/{name}/health") => Doc::new("getTenantHealth", HEALTH, "Probe a tenant's nodes")
            .about("Asks the machines over the node API, 2 s each; results are cached 15 s per tenant.")
            .ok(200, Success::Json("Health")),
        ("DELETE", "/tenants/{name}/state-lock") => {
            Doc::new("releaseStateLock", TENANTS, "Release the tenant's tool state lock")
                .about(
                    "Admins only. Asks the replica reconciling the tenant to release the lock its status \
                     shows (`status.stateLock`): the holder's database session ended or the engine's lock \
                     undone, the record cleared, an audit record written (docs/provisioning.md, State locks).",
                )
                .query(&[Query::Force])
                .ok(202, Success::Json("StateLockRelease"))
                .error(404, "the tenant holds no tool state lock")
                .error(409, "the lock's holder is alive (it holds the tenant, mid-run), `force` or not: its run must end first")
        }
        ("POST", "/tenants/{name}/rotate-ca") => {
            Doc::new("rotateCa", TENANTS, "Rotate the tenant's certificate authorities")
                .about(
                    "Admins only. New CAs for the named authorities (`os`, `kubernetes`, one or both) are \
                     sealed beside the old; the replica reconciling the tenant carries the rotation through \
                     its phases, node by node, without a reboot. `status.caRotation` shows where it stands \
                     (docs/ca-rotation.md).",
                )
                .body("RotateCaRequest")
                .ok(202, Success::Json("CaRotationStatus"))
                .error(409, "the tenant is being deleted, or a rotation of its CAs is under way")
                .error(503, "rotating tenants' CAs is not configured on this server")
        }
        ("GET", "/tenants/{name}/backups") => {
            Doc::new("listBackups", BACKUPS, "List a tenant's etcd backups").ok(200, Success::Json("BackupList"))
        }
        ("POST", "/tenants/{name}/backups") => Doc::new("takeBackup", BACKUPS, "Take an etcd backup now")
            .about("From a healthy control plane, a follower before the leader; encrypted as it streams.")
            .ok(201, Success::Json("Backup"))
            .error(409, "no control plane answers, or a backup or restore of the tenant is running"),
        ("GET", "/tenants/{name}/backups/{id}") => {
            Doc::new("getBackup", BACKUPS, "Read a backup's record").ok(200, Success::Json("Backup"))
        }
        ("DELETE", "/tenants/{name}/backups/{id}") => Doc::new("deleteBackup", BACKUPS, "Delete a backup")
            .about("Admins only: a deleted backup cannot be restored. Its record goes first, then its file.")
            .ok(204, Success::Empty),
        ("GET", "/tenants/{name}/backups/{id}/download") => {
            Doc::new("downloadBackup", BACKUPS, "Download the etcd snapshot, decrypted")
                .about("Admins only: it holds every Secret of the cluster. Verified as it streams; a backup found altered ends the transfer early. `X-Content-SHA256` carries the recorded SHA-256.")
                .ok(200, Success::Text("application/octet-stream"))
                .error(409, "the backup does not verify")
        }
        ("POST", "/tenants/{name}/backups/{id}/restore") => {
            Doc::new("restoreBackup", BACKUPS, "Restore the tenant's etcd from a backup")
                .about("Admins only. Verifies the whole backup, uploads it to the first control plane whose etcd waits for its bootstrap, and bootstraps etcd from it (docs/backups.md).")
                .ok(200, Success::Json("RestoreResult"))
                .error(409, "the backup does not verify, a backup or restore is running, or no control plane takes it")
        }
        ("GET", "/health") => {
            Doc::new("listHealth", HEALTH, "Probe every tenant").ok(200, Success::Json("HealthList"))
        }
        ("GET", "/tenants/{tenant}/node-groups") => {
            Doc::new("listNodeGroups", GROUPS, "List a tenant's node groups")
                .query(LABELLED)
                .ok(200, Success::Json("NodeGroupList"))
        }
        ("POST", "/tenants/{tenant}/node-groups") => {
            Doc::new("createNodeGroup", GROUPS, "Create a node group")
                .about("`spec.name` may be left out; when given it must equal `metadata.name`.")
                .body("NodeGroup")
                .ok(201, Success::Json("NodeGroup"))
                .error(409, TAKEN)
        }
        ("GET", "/tenants/{tenant}/node-groups/{name}") => {
            Doc::new("getNodeGroup", GROUPS, "Read a node group").ok(200, Success::Json("NodeGroup"))
        }
        ("PUT", "/tenants/{tenant}/node-groups/{name}") => {
            Doc::new("updateNodeGroup", GROUPS, "Replace a node group's spec (scale, upgrade)")
                .about("Changing `count` scales the group; changing `talosVersion` rolls it.")
                .body("NodeGroup")
                .ok(200, Success::Json("NodeGroup"))
                .error(409, STALE)
        }
        ("DELETE", "/tenants/{tenant}/node-groups/{name}") => {
            Doc::new("deleteNodeGroup", GROUPS, "Delete a node group")
                .ok(204, Success::Empty)
                .error(409, STALE)
        }
        ("GET", "/tenants/{tenant}/configpatches") => {
            Doc::new("listConfigPatches", PATCHES, "List a tenant's config patches")
                .query(LABELLED)
                .ok(200, Success::Json("ConfigPatchList"))
        }
        ("POST", "/tenants/{tenant}/configpatches") => Doc::new(
            "createConfigPatch",
            PATCHES,
            "Create a config patch",
        )
        .about("Patches are checked with the Talos rules on write: a broken one is 422 naming the field.")
        .body("ConfigPatch")
        .ok(201, Success::Json("ConfigPatch"))
        .error(409, TAKEN),
        ("GET", "/tenants/{tenant}/configpatches/{name}") => {
            Doc::new("getConfigPatch", PATCHES, "Read a config patch").ok(200, Success::Json("ConfigPatch"))
        }
        ("PUT", "/tenants/{tenant}/configpatches/{name}") => {
            Doc::new("updateConfigPatch", PATCHES, "Replace a config patch")
                .body("ConfigPatch")
                .ok(200, Success::Json("ConfigPatch"))
                .error(409, STALE)
        }
        ("DELETE", "/tenants/{tenant}/configpatches/{name}") => {
            Doc::new("deleteConfigPatch", PATCHES, "Delete a config patch")
                .ok(204, Success::Empty)
                .error(409, STALE)
        }
        ("GET", "/machines") => Doc::new("listAllMachines", MACHINES, "List the machines of every tenant")
            .about("Sorted by tenant, then name.")
            .query(LABELLED)
            .ok(200, Success::Json("MachineList")),
        ("GET", "/tenants/{tenant}/machines") => {
            Doc::new("listMachines", MACHINES, "List a tenant's machines")
                .query(LABELLED)
                .ok(200, Success::Json("MachineList"))
        }
        ("GET", "/tenants/{tenant}/machines/{id}") => {
            Doc::new("getMachine", MACHINES, "Read a machine").ok(200, Success::Json("Machine"))
        }
        ("DELETE", "/tenants/{tenant}/machines/{id}") => {
            Doc::new("deleteMachine", MACHINES, "Delete a machine; the reconciler replaces it")
                .ok(202, Success::Json("Machine"))
                .error(409, "the tenant is being deleted")
        }
        ("GET", "/tenants/{tenant}/machines/{id}/config") => {
            Doc::new("getMachineConfig", MACHINES, "Download a machine's rendered Talos config")
                .about(
                    "The complete v1alpha1 document for the machine's role and Talos version, with the \
                     tenant's and the group's config patches applied. Holds secrets: edit and admin only.",
                )
                .ok(200, Success::Yaml)
                .error(409, "the machine's group is gone, a patch ref is missing, or a patch does not apply")
        }
        ("GET", "/tenants/{tenant}/machines/{id}/logs") => {
            Doc::new("getMachineLogs", MACHINES, "Read a service's log on a machine's node")
                .about(
                    "The log of one of Talos's services (`machined`, `apid`, `etcd`, `kubelet`, ...) from                      the machine's node over the node API, sent as the node sends it; with `follow`, the                      response stays open with what the service writes next, until the client goes away.                      Editors and admins; every read is on the audit log, with the service (docs/api.md).",
                )
                .query(&[Query::Logs])
                .ok(200, Success::Text("text/plain; charset=utf-8"))
                .error(404, "no such tenant or machine, or the node keeps no log of that service")
                .error(502, "the machine's node answered with an error")
                .error(503, "the machine has no address yet, its node does not answer, or no node client")
        }
        ("GET", "/tenants/{tenant}/machines/{id}/dmesg") => {
            Doc::new("getMachineDmesg", MACHINES, "Read the kernel log of a machine's node")
                .about(
                    "The node's kernel ring buffer, as `talosctl dmesg` reads it; with `follow`, the                      response stays open with what the kernel writes next. Editors and admins; every read                      is on the audit log (docs/api.md).",
                )
                .query(&[Query::Dmesg])
                .ok(200, Success::Text("text/plain; charset=utf-8"))
                .error(502, "the machine's node answered with an error")
                .error(503, "the machine has no address yet, its node does not answer, or no node client")
        }
        ("PUT", "/tenants/{tenant}/machines/{id}/status") => {
            Doc::new("updateMachineStatus", MACHINES, "Replace a machine's observed state (the controller)")
                .body("MachineStatusUpdate")
                .ok(200, Success::Json("Machine"))
                .error(409, STALE)
        }
        ("GET", "/projected") => {
            Doc::new("listAllProjected", PROJECTED, "What the provisioning tool created, every tenant")
                .about("Sorted by tenant, then name, and paged as every list is.")
                .query(PAGE)
                .ok(200, Success::Json("ProjectedList"))
                .error(503, "no provisioning run has completed yet")
        }
        ("GET", "/tenants/{tenant}/projected") => {
            Doc::new("listProjected", PROJECTED, "What the provisioning tool created for a tenant")
                .about("Sorted by name, and paged as every list is.")
                .query(PAGE)
                .ok(200, Success::Json("ProjectedList"))
                .error(503, "no provisioning run has completed yet")
        }
        ("GET", "/tenants/{tenant}/projected/{kind}") => {
            Doc::new("listProjectedKind", PROJECTED, "Projected resources of one kind, matched in any case")
                .about("Sorted by name, and paged as every list is.")
                .query(PAGE)
                .ok(200, Success::Json("ProjectedList"))
                .error(503, "no provisioning run has completed yet")
        }
        ("GET", "/users") => {
            Doc::new("listUsers", USERS, "List users").query(PAGE).ok(200, Success::Json("UserList"))
        }
        ("POST", "/users") => Doc::new("createUser", USERS, "Create a user")
            .body("NewUser")
            .ok(201, Success::Json("User"))
            .error(409, "the name is taken"),
        ("GET", "/users/{name}") => Doc::new("getUser", USERS, "Read a user").ok(200, Success::Json("User")),
        ("PUT", "/users/{name}") => {
            Doc::new("updateUser", USERS, "Change a user's role, and its password when given")
                .body("User")
                .ok(200, Success::Json("User"))
                .error(409, "stale `metadata.resourceVersion`, or demoting the last admin")
        }
        ("DELETE", "/users/{name}") => Doc::new("deleteUser", USERS, "Delete a user and its tokens")
            .ok(204, Success::Empty)
            .error(409, "deleting the last admin"),
        ("GET", "/users/{name}/tokens") => {
            Doc::new("listTokens", TOKENS, "List a user's API tokens, without values")
                .query(PAGE)
                .ok(200, Success::Json("ApiTokenList"))
        }
        ("POST", "/users/{name}/tokens") => Doc::new("createToken", TOKENS, "Create an API token")
            .about("201 with `status.token`, `cms_<id>_<secret>`: the only time the value is shown.")
            .body("ApiToken")
            .ok(201, Success::Json("ApiToken"))
            .error(409, "the user has a token of this name"),
        ("GET", "/grants") => {
            Doc::new("listGrants", GRANTS, "List grants").query(PAGE).ok(200, Success::Json("GrantList"))
        }
        ("POST", "/grants") => Doc::new("createGrant", GRANTS, "Create a grant")
            .about("`spec.role` is `view` or `edit`; `admin` is refused with 400.")
            .body("Grant")
            .ok(201, Success::Json("Grant"))
            .error(409, "the name is taken, or there are as many grants as the server keeps"),
        ("GET", "/grants/{name}") => Doc::new("getGrant", GRANTS, "Read a grant").ok(200, Success::Json("Grant")),
        ("PUT", "/grants/{name}") => Doc::new("updateGrant", GRANTS, "Replace a grant's spec")
            .body("Grant")
            .ok(200, Success::Json("Grant"))
            .error(409, "stale `metadata.resourceVersion`"),
        ("DELETE", "/grants/{name}") => {
            Doc::new("deleteGrant", GRANTS, "Delete a grant; what it gave ends at once").ok(204, Success::Empty)
        }
        ("GET", "/audit") => Doc::new("listAudit", AUDIT, "Read the audit log, newest first")
            .about("Every mutation with its caller, route, target, status and request id; never bodies or secrets.")
            .query(&[Query::Page, Query::AuditFilters])
            .ok(200, Success::Json("AuditRecordList")),
        ("DELETE", "/users/{name}/tokens/{tokenName}") => {
            Doc::new("revokeToken", TOKENS, "Revoke an API token at once").ok(204, Success::Empty)
        }
        _ => return None,
    };
    Some(doc)
}
