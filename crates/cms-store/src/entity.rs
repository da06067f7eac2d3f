//! The tables, as sea-orm entities. The derive macros need their items public
//! inside these crate-private modules.

/// Every resource, keyed by `(kind, tenant, name)`; `tenant` is empty for tenants.
#[allow(unreachable_pub)]
pub(crate) mod object {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "objects")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub kind: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub tenant: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub name: String,
        pub resource_version: i64,
        pub generation: i64,
        pub created_at: String,
        pub updated_at: String,
        pub deletion_timestamp: Option<String>,
        /// JSON array of strings.
        pub finalizers: String,
        /// JSON object of strings.
        pub labels: String,
        /// JSON object of strings.
        pub annotations: String,
        /// JSON; for tenants, without `nodeGroups`, which are rows of their own.
        pub spec: String,
        /// JSON.
        pub status: String,
        /// The store-wide revision of the row's last change: set by the
        /// batch that logs the change, after the row is written.
        pub revision: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The event log: one row per change, in revision order.
#[allow(unreachable_pub)]
pub(crate) mod event {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub revision: i64,
        pub kind: String,
        pub tenant: String,
        pub name: String,
        pub event_type: String,
        /// The object after the change (before it, for a deletion).
        pub object: String,
        /// The revision of the object's change before this one; `None` when
        /// unknown, as for a create.
        pub previous: Option<i64>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Named counters: `revision` (the newest store-wide revision) and
/// `compacted` (the newest revision dropped from the event log).
#[allow(unreachable_pub)]
pub(crate) mod counter {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "counters")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub name: String,
        pub value: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}

    pub(crate) const REVISION: &str = "revision";
    pub(crate) const COMPACTED: &str = "compacted";
}

/// The projected resources of each tenant's last provisioning run.
#[allow(unreachable_pub)]
pub(crate) mod projection {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "projections")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub tenant: String,
        /// JSON array of projected resources.
        pub items: String,
        pub recorded_at: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Users and their bcrypt password hashes.
#[allow(unreachable_pub)]
pub(crate) mod user {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "users")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub name: String,
        pub role: String,
        pub password_hash: String,
        pub resource_version: i64,
        pub created_at: String,
        pub updated_at: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// API tokens, by id; only a hash of each secret is kept.
#[allow(unreachable_pub)]
pub(crate) mod api_token {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "api_tokens")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub user_name: String,
        pub name: String,
        pub secret_hash: String,
        pub expires_at: String,
        pub created_at: String,
        pub last_used_at: Option<String>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Named values the service generates once, such as the login signing key.
#[allow(unreachable_pub)]
pub(crate) mod setting {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "settings")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub name: String,
        pub value: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Each tenant's secrets bundle, sealed by the service: the store never sees
/// the plaintext.
#[allow(unreachable_pub)]
pub(crate) mod tenant_secret {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "tenant_secrets")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub tenant: String,
        /// The sealed blob, opaque to the store.
        pub sealed: Vec<u8>,
        pub created_at: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Work leases: who may do the work named `name` (a tenant's reconcile), in
/// which epoch, until when (milliseconds since the Unix epoch, by the
/// database's clock).
#[allow(unreachable_pub)]
pub(crate) mod lease {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "leases")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub name: String,
        /// Empty when released.
        pub holder: String,
        /// Grows by one each time the lease changes hands.
        pub epoch: i64,
        pub expires_at: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The audit log: one row per mutating request, by growing id. It holds no
/// request body, password, token or secret.
#[allow(unreachable_pub)]
pub(crate) mod audit {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "audit")]
    pub struct Model {
        #[sea_orm(primary_key)]
        pub id: i64,
        pub time: String,
        pub actor: String,
        pub actor_role: Option<String>,
        pub actor_token: Option<String>,
        pub actor_source: Option<String>,
        pub actor_issuer: Option<String>,
        pub actor_subject: Option<String>,
        pub method: String,
        pub route: Option<String>,
        pub path: String,
        pub target_kind: Option<String>,
        pub target_tenant: Option<String>,
        pub target_name: Option<String>,
        pub status: i32,
        pub outcome: String,
        pub request_id: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Grants: a role on a set of tenants for users, groups and workloads.
#[allow(unreachable_pub)]
pub(crate) mod grant {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "grants")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub name: String,
        /// JSON: the grant's spec.
        pub spec: String,
        pub resource_version: i64,
        pub created_at: String,
        pub updated_at: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}
