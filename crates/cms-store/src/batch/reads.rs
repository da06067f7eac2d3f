//! What a batch reads, and the runs of its writes that tell it what more
//! to read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cms_model::Kind;
use sea_orm::sea_query::LockType;
use sea_orm::{ColumnTrait, DatabaseTransaction, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use super::{CHUNK, Job};
use crate::api::{EventType, Key, Object};
use crate::dialect;
use crate::entity::object;
use crate::error::StoreError;
use crate::view::{Base, Needs, Outcome, Overlay, Side, View};

/// What a batch's writes changed, in order, and for each write the error that
/// made it write nothing.
pub(super) type Ran = (Overlay, Vec<Side>, Vec<(EventType, Arc<Object>)>, Vec<Option<StoreError>>);

/// Runs every write of the batch in order on `base`, each over the changes
/// of those before it. Should any look at what `base` has not read, the
/// writes' results are dropped and what they all needed is returned, so
/// that they run again once it is read.
pub(super) fn run_writes(
    jobs: &mut [Box<dyn Job>],
    fenced: &[Option<StoreError>],
    base: &Base,
    now: &str,
) -> Result<Ran, Needs> {
    let mut rows = Overlay::new();
    let mut side = Vec::new();
    let mut changes = Vec::new();
    let mut failures = Vec::with_capacity(jobs.len());
    let mut needs = Needs::default();
    for (job, lost) in jobs.iter_mut().zip(fenced) {
        if lost.is_some() {
            failures.push(None);
            continue;
        }
        let mut view = View::new(base, &rows, now);
        let result = job.run(&mut view);
        let needed = view.take_needs();
        if !needed.is_empty() || !needs.is_empty() {
            // The writes after this one still run, to learn what they need.
            needs.extend(needed);
            failures.push(None);
            continue;
        }
        match result.and_then(|()| view.finish()) {
            Ok(Outcome { rows: own, side: own_side, events }) => {
                rows.extend(own);
                side.extend(own_side);
                changes.extend(events);
                failures.push(None);
            }
            Err(err) => failures.push(Some(err)),
        }
    }
    match needs.is_empty() {
        true => Ok((rows, side, changes, failures)),
        false => Err(needs),
    }
}

/// Locks the tenant rows of `owners` and reads them into `base`.
pub(super) async fn lock_tenants(
    txn: &DatabaseTransaction,
    owners: &BTreeSet<String>,
    base: &mut Base,
) -> Result<(), StoreError> {
    if owners.is_empty() {
        return Ok(());
    }
    let mut tenants = object::Entity::find()
        .filter(object::Column::Kind.eq(Kind::Tenant.as_str()))
        .filter(object::Column::Tenant.eq(""))
        .filter(object::Column::Name.is_in(owners.iter().cloned()))
        .order_by_asc(object::Column::Name);
    if dialect::is_postgres(txn) {
        tenants = tenants.lock(LockType::Update);
    }
    let mut found: BTreeMap<String, object::Model> =
        tenants.all(txn).await?.into_iter().map(|row| (row.name.clone(), row)).collect();
    for owner in owners {
        base.add_key(Key::tenant(owner), found.remove(owner));
    }
    Ok(())
}

/// Reads what `needs` names into `base`: single rows, by the names of each
/// kind inside each tenant, and every row of a kind inside a tenant. The
/// reads come after the tenants' locks are held, so that on PostgreSQL they
/// see every row committed before them.
pub(super) async fn read(txn: &DatabaseTransaction, needs: Needs, base: &mut Base) -> Result<(), StoreError> {
    for (tenant, kind) in &needs.ranges {
        let rows = object::Entity::find()
            .filter(object::Column::Kind.eq(kind.as_str()))
            .filter(object::Column::Tenant.eq(tenant.as_str()))
            .all(txn)
            .await?;
        let rows = rows.into_iter().map(|row| Ok((crate::render::key_of(&row)?, row)));
        base.add_range(tenant, *kind, rows.collect::<Result<Vec<_>, StoreError>>()?);
    }
    let mut groups: BTreeMap<(Kind, String), Vec<String>> = BTreeMap::new();
    for key in needs.keys {
        if !needs.ranges.contains(&(key.tenant.clone(), key.kind)) {
            groups.entry((key.kind, key.tenant)).or_default().push(key.name);
        }
    }
    for ((kind, tenant), names) in groups {
        for chunk in names.chunks(CHUNK) {
            let mut found: BTreeMap<String, object::Model> = object::Entity::find()
                .filter(object::Column::Kind.eq(kind.as_str()))
                .filter(object::Column::Tenant.eq(tenant.as_str()))
                .filter(object::Column::Name.is_in(chunk.iter().cloned()))
                .all(txn)
                .await?
                .into_iter()
                .map(|row| (row.name.clone(), row))
                .collect();
            for name in chunk {
                let row = found.remove(name);
                base.add_key(Key { kind, tenant: tenant.clone(), name: name.clone() }, row);
            }
        }
    }
    Ok(())
}

/// Reads every row inside `owners` into `base`, which then holds all there is
/// of them: the way out for writes that keep needing more.
pub(super) async fn read_whole(
    txn: &DatabaseTransaction,
    owners: &BTreeSet<String>,
    base: &mut Base,
) -> Result<(), StoreError> {
    let mut needs = Needs::default();
    for owner in owners {
        for kind in Kind::ALL.into_iter().filter(|kind| *kind != Kind::Tenant) {
            needs.ranges.insert((owner.clone(), kind));
        }
    }
    read(txn, needs, base).await
}
