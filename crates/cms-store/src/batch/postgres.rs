//! A batch's statements on PostgreSQL, few and of fixed text, so that each is
//! prepared once per connection and a batch costs the same handful of round
//! trips however many writes and tenants it carries:
//!
//! 1. the tenants' rows, locked (`FOR UPDATE`, in name order);
//! 2. what the writes look at, every key and every range in one statement
//!    (again for each further round of [`super::reads`]);
//! 3. one statement that takes the batch's revisions from the counter row and
//!    announces the last (`pg_notify`), deletes, inserts and replaces the rows
//!    with the revision of their last change already on them, appends the
//!    events and the audit records, and returns the new records' ids.
//!
//! Rows travel as arrays (`unnest`), audit records as one JSON array.
//!
//! The counter row is still the last lock the transaction waits for: the
//! rows the third statement writes belong to tenants whose rows the batch
//! holds locked, or are new tenants, which only the one transaction holding
//! the counter can be inserting at a time; events and audit records are
//! appended under new keys. Nothing after the counter waits on another
//! transaction that waits for the counter.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use cms_model::Kind;
use sea_orm::{
    ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, EntityTrait, SqlErr, Statement, Value,
};

use super::Record;
use crate::api::{EventType, Key, Object, WatchEvent};
use crate::dialect::EVENTS_CHANNEL;
use crate::entity::object;
use crate::error::StoreError;
use crate::view::{Base, Needs, Overlay};

/// Locks the tenant rows of `owners`, in name order, and reads them into
/// `base`.
pub(super) async fn lock_tenants(
    txn: &DatabaseTransaction,
    owners: &BTreeSet<String>,
    base: &mut Base,
) -> Result<(), StoreError> {
    if owners.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = owners.iter().cloned().collect();
    let statement = Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT * FROM objects WHERE kind = $1 AND tenant = '' AND name = ANY($2::text[]) \
         ORDER BY name FOR UPDATE",
        [Kind::Tenant.as_str().into(), Value::from(names)],
    );
    let mut found: BTreeMap<String, object::Model> = object::Entity::find()
        .from_raw_sql(statement)
        .all(txn)
        .await?
        .into_iter()
        .map(|row| (row.name.clone(), row))
        .collect();
    for owner in owners {
        base.add_key(Key::tenant(owner), found.remove(owner));
    }
    Ok(())
}

/// Reads what `needs` names into `base` in one statement: single rows by key,
/// and every row of a kind inside a tenant. It runs after the tenants' locks
/// are held, so it sees every row committed before them.
pub(super) async fn read(txn: &DatabaseTransaction, needs: Needs, base: &mut Base) -> Result<(), StoreError> {
    let keys: Vec<Key> = needs
        .keys
        .into_iter()
        .filter(|key| !needs.ranges.contains(&(key.tenant.clone(), key.kind)))
        .collect();
    if keys.is_empty() && needs.ranges.is_empty() {
        return Ok(());
    }
    let statement = Statement::from_sql_and_values(
        DbBackend::Postgres,
        // Lateral joins that are not flattened (`OFFSET 0`), so that each
        // key and range is looked up in the primary key's index, whatever
        // the plan's guess of their number.
        "SELECT o.* FROM unnest($1::text[], $2::text[], $3::text[]) AS k(kind, tenant, name), \
         LATERAL (SELECT * FROM objects WHERE kind = k.kind AND tenant = k.tenant AND name = k.name OFFSET 0) o \
         UNION ALL \
         SELECT o.* FROM unnest($4::text[], $5::text[]) AS r(kind, tenant), \
         LATERAL (SELECT * FROM objects WHERE kind = r.kind AND tenant = r.tenant OFFSET 0) o",
        [
            strings(keys.iter().map(|key| key.kind.as_str())),
            strings(keys.iter().map(|key| key.tenant.as_str())),
            strings(keys.iter().map(|key| key.name.as_str())),
            strings(needs.ranges.iter().map(|(_, kind)| kind.as_str())),
            strings(needs.ranges.iter().map(|(tenant, _)| tenant.as_str())),
        ],
    );
    let mut found: BTreeMap<Key, object::Model> = BTreeMap::new();
    for row in object::Entity::find().from_raw_sql(statement).all(txn).await? {
        found.insert(crate::render::key_of(&row)?, row);
    }
    for (tenant, kind) in &needs.ranges {
        let from = Key::child(*kind, tenant, "");
        let rows: Vec<(Key, object::Model)> = found
            .range(from..)
            .take_while(|(key, _)| key.kind == *kind && key.tenant == *tenant)
            .map(|(key, row)| (key.clone(), row.clone()))
            .collect();
        base.add_range(tenant, *kind, rows);
    }
    for key in keys {
        let row = found.get(&key).cloned();
        base.add_key(key, row);
    }
    Ok(())
}

/// What the batch's one writing statement did.
pub(super) struct Written {
    pub(super) events: Vec<WatchEvent>,
    /// The last revision taken, when the batch changed anything.
    pub(super) last: Option<u64>,
    /// The audit records' ids, in the order of the records.
    pub(super) ids: Vec<u64>,
}

/// Rows, as the columns of `unnest`.
#[derive(Default)]
struct Columns {
    kind: Vec<String>,
    tenant: Vec<String>,
    name: Vec<String>,
    resource_version: Vec<i64>,
    generation: Vec<i64>,
    created_at: Vec<String>,
    updated_at: Vec<String>,
    /// Empty for none.
    deletion_timestamp: Vec<String>,
    finalizers: Vec<String>,
    labels: Vec<String>,
    annotations: Vec<String>,
    spec: Vec<String>,
    status: Vec<String>,
    revision: Vec<i64>,
    /// The position (from 1) in the batch's events of the row's last change,
    /// whose revision it takes; 0 keeps `revision`.
    stamp: Vec<i64>,
    new: Vec<bool>,
}

impl Columns {
    fn push(&mut self, row: object::Model, stamp: i64, new: bool) {
        self.kind.push(row.kind);
        self.tenant.push(row.tenant);
        self.name.push(row.name);
        self.resource_version.push(row.resource_version);
        self.generation.push(row.generation);
        self.created_at.push(row.created_at);
        self.updated_at.push(row.updated_at);
        self.deletion_timestamp.push(row.deletion_timestamp.unwrap_or_default());
        self.finalizers.push(row.finalizers);
        self.labels.push(row.labels);
        self.annotations.push(row.annotations);
        self.spec.push(row.spec);
        self.status.push(row.status);
        self.revision.push(row.revision);
        self.stamp.push(stamp);
        self.new.push(new);
    }
}

/// The batch's one writing statement; `{base}` is the revision before the
/// batch's first, `{counter}` the CTE that takes the revisions.
const WRITE: &str = "WITH taken AS ({counter}), \
removed AS (DELETE FROM objects o USING unnest($2::text[], $3::text[], $4::text[]) AS d(kind, tenant, name) \
    WHERE o.kind = d.kind AND o.tenant = d.tenant AND o.name = d.name), \
changed AS (SELECT * FROM unnest($5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::text[], \
    $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::bigint[], \
    $19::bigint[], $20::bool[]) AS r(kind, tenant, name, resource_version, generation, created_at, updated_at, \
    deletion_timestamp, finalizers, labels, annotations, spec, status, revision, stamp, new)), \
inserted AS (INSERT INTO objects (kind, tenant, name, resource_version, generation, created_at, updated_at, \
    deletion_timestamp, finalizers, labels, annotations, spec, status, revision) \
    SELECT kind, tenant, name, resource_version, generation, created_at, updated_at, \
    NULLIF(deletion_timestamp, ''), finalizers, labels, annotations, spec, status, \
    CASE WHEN stamp > 0 THEN (SELECT base FROM taken) + stamp ELSE revision END \
    FROM changed WHERE new), \
updated AS (UPDATE objects o SET resource_version = r.resource_version, generation = r.generation, \
    created_at = r.created_at, updated_at = r.updated_at, deletion_timestamp = NULLIF(r.deletion_timestamp, ''), \
    finalizers = r.finalizers, labels = r.labels, annotations = r.annotations, spec = r.spec, status = r.status, \
    revision = CASE WHEN r.stamp > 0 THEN (SELECT base FROM taken) + r.stamp ELSE o.revision END \
    FROM changed r WHERE NOT r.new AND o.kind = r.kind AND o.tenant = r.tenant AND o.name = r.name), \
logged AS (INSERT INTO events (revision, kind, tenant, name, event_type, object, previous) \
    SELECT (SELECT base FROM taken) + e.n, e.kind, e.tenant, e.name, e.event_type, e.object, \
    CASE WHEN e.before > 0 THEN (SELECT base FROM taken) + e.before ELSE NULLIF(e.previous, -1) END \
    FROM unnest($21::text[], $22::text[], $23::text[], $24::text[], $25::text[], $26::bigint[], $27::bigint[]) \
    WITH ORDINALITY AS e(kind, tenant, name, event_type, object, before, previous, n)), \
audited AS (INSERT INTO audit (\"time\", actor, actor_role, actor_token, actor_source, actor_issuer, \
    actor_subject, method, route, path, target_kind, target_tenant, target_name, status, outcome, request_id) \
    SELECT \"time\", actor, actor_role, actor_token, actor_source, actor_issuer, actor_subject, method, route, \
    path, target_kind, target_tenant, target_name, status, outcome, request_id \
    FROM json_to_recordset($28::json) AS a(\"time\" text, actor text, actor_role text, actor_token text, \
    actor_source text, actor_issuer text, actor_subject text, method text, route text, path text, \
    target_kind text, target_tenant text, target_name text, status integer, outcome text, request_id text) \
    RETURNING id) \
SELECT t.value, {notify} ARRAY(SELECT id FROM audited) AS ids FROM taken t";

/// Takes `$1` revisions from the counter row.
const TAKE: &str =
    "UPDATE counters SET value = value + $1 WHERE name = 'revision' RETURNING value - $1 AS base, value";

/// [`WRITE`] for a batch that changed rows: it takes revisions and announces
/// them.
fn write_taking() -> String {
    WRITE
        .replace("{counter}", TAKE)
        .replace("{notify}", &format!("pg_notify('{EVENTS_CHANNEL}', t.value::text) AS notified,"))
}

/// [`WRITE`] for a batch that changed nothing (audit records only, or writes
/// that all failed): it takes no revision, so it never waits on the counter.
fn write_quiet() -> String {
    WRITE.replace("{counter}", "SELECT $1::bigint AS base, NULL::bigint AS value").replace("{notify}", "")
}

/// Writes the batch in one statement: its rows as `rows` leaves them over
/// `base`, its events (`changes`, in order) with the revisions it takes, and
/// the audit records.
pub(super) async fn write(
    txn: &DatabaseTransaction,
    base: &Base,
    rows: Overlay,
    changes: Vec<(EventType, Arc<Object>)>,
    records: &[Record],
) -> Result<Written, StoreError> {
    let count = changes.len() as i64;
    // Each change's position, from 1; the revision of a row's last change.
    let mut latest: HashMap<Key, i64> = HashMap::new();
    let mut stamps: HashMap<Key, i64> = HashMap::new();
    let mut before = Vec::with_capacity(changes.len());
    let mut previous = Vec::with_capacity(changes.len());
    for (position, (event_type, object)) in (1..).zip(&changes) {
        let key = &object.key;
        let (earlier, stored) = match latest.get(key) {
            Some(position) => (*position, -1),
            None if *event_type == EventType::Added => (0, -1),
            None => (0, base.get(key).map_or(-1, |row| row.revision)),
        };
        before.push(earlier);
        previous.push(stored);
        latest.insert(key.clone(), position);
        match event_type {
            EventType::Deleted => stamps.remove(key),
            EventType::Added | EventType::Modified => stamps.insert(key.clone(), position),
        };
    }
    let mut removed: Vec<Key> = Vec::new();
    let mut inserts: Vec<object::Model> = Vec::new();
    let mut updates: Vec<(object::Model, i64)> = Vec::new();
    for (key, row) in rows {
        let stamp = stamps.get(&key).copied().unwrap_or(0);
        match (base.get(&key), row) {
            (None, Some(row)) => inserts.push(row),
            (Some(stored), Some(row)) if *stored != row || stamp > 0 => updates.push((row, stamp)),
            (Some(_), None) => removed.push(key),
            _ => {}
        }
    }
    super::tenants_first(&mut inserts);
    let first_insert = inserts.first().map(crate::render::key_of).transpose()?;
    let mut columns = Columns::default();
    for row in inserts {
        let stamp = stamps.get(&crate::render::key_of(&row)?).copied().unwrap_or(0);
        columns.push(row, stamp, true);
    }
    for (row, stamp) in updates {
        columns.push(row, stamp, false);
    }
    if count == 0 && removed.is_empty() && columns.new.is_empty() && records.is_empty() {
        // Writes that all failed: nothing to write.
        return Ok(Written { events: Vec::new(), last: None, ids: Vec::new() });
    }
    let audit = serde_json::Value::Array(records.iter().map(|record| audit_json(&record.row)).collect());
    let sql = if count > 0 { write_taking() } else { write_quiet() };
    let values: Vec<Value> = vec![
        count.into(),
        strings(removed.iter().map(|key| key.kind.as_str())),
        strings(removed.iter().map(|key| key.tenant.as_str())),
        strings(removed.iter().map(|key| key.name.as_str())),
        columns.kind.into(),
        columns.tenant.into(),
        columns.name.into(),
        columns.resource_version.into(),
        columns.generation.into(),
        columns.created_at.into(),
        columns.updated_at.into(),
        columns.deletion_timestamp.into(),
        columns.finalizers.into(),
        columns.labels.into(),
        columns.annotations.into(),
        columns.spec.into(),
        columns.status.into(),
        columns.revision.into(),
        columns.stamp.into(),
        columns.new.into(),
        strings(changes.iter().map(|(_, object)| object.key.kind.as_str())),
        strings(changes.iter().map(|(_, object)| object.key.tenant.as_str())),
        strings(changes.iter().map(|(_, object)| object.key.name.as_str())),
        strings(changes.iter().map(|(event_type, _)| event_type.as_str())),
        Value::from(
            changes
                .iter()
                .map(|(_, object)| String::from_utf8_lossy(&object.json).into_owned())
                .collect::<Vec<String>>(),
        ),
        before.into(),
        previous.into(),
        audit.to_string().into(),
    ];
    let statement = Statement::from_sql_and_values(DbBackend::Postgres, sql, values);
    let row = match txn.query_one_raw(statement).await {
        Ok(row) => row.ok_or_else(|| StoreError::Corrupt("the revision counter is missing".into()))?,
        Err(err) => return Err(exists(err, first_insert)),
    };
    let last: Option<i64> = row.try_get("", "value")?;
    let mut ids: Vec<i64> = row.try_get("", "ids")?;
    // One statement numbers its rows in order; the order they are returned
    // in is the database's.
    ids.sort_unstable();
    let events = match last {
        Some(last) => (last - count + 1..)
            .zip(changes)
            .map(|(revision, (event_type, object))| WatchEvent {
                revision: revision as u64,
                event_type,
                object,
            })
            .collect(),
        None => Vec::new(),
    };
    Ok(Written {
        events,
        last: last.map(|last| last as u64),
        ids: ids.into_iter().map(|id| id as u64).collect(),
    })
}

/// A text array of `items`.
fn strings<'a>(items: impl Iterator<Item = &'a str>) -> Value {
    Value::from(items.map(str::to_string).collect::<Vec<String>>())
}

/// An insert that found a row there: another replica created the tenant
/// since the batch read the rows. In a batch of several writes, the error
/// makes each of them run again alone.
fn exists(err: DbErr, first: Option<Key>) -> StoreError {
    match (err.sql_err(), first) {
        (Some(SqlErr::UniqueConstraintViolation(message)), Some(key)) if message.contains("objects") => {
            StoreError::AlreadyExists(key.to_string())
        }
        _ => err.into(),
    }
}

/// An audit record as the JSON object `json_to_recordset` reads.
fn audit_json(row: &crate::entity::audit::ActiveModel) -> serde_json::Value {
    use sea_orm::ActiveValue;
    fn get<T: Clone + Into<Value>>(value: &ActiveValue<T>) -> Option<T> {
        match value {
            ActiveValue::Set(value) | ActiveValue::Unchanged(value) => Some(value.clone()),
            ActiveValue::NotSet => None,
        }
    }
    serde_json::json!({
        "time": get(&row.time),
        "actor": get(&row.actor),
        "actor_role": get(&row.actor_role).flatten(),
        "actor_token": get(&row.actor_token).flatten(),
        "actor_source": get(&row.actor_source).flatten(),
        "actor_issuer": get(&row.actor_issuer).flatten(),
        "actor_subject": get(&row.actor_subject).flatten(),
        "method": get(&row.method),
        "route": get(&row.route).flatten(),
        "path": get(&row.path),
        "target_kind": get(&row.target_kind).flatten(),
        "target_tenant": get(&row.target_tenant).flatten(),
        "target_name": get(&row.target_name).flatten(),
        "status": get(&row.status),
        "outcome": get(&row.outcome),
        "request_id": get(&row.request_id),
    })
}
