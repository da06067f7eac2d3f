//! The backups page's forms and the download, each with the permission of
//! the API's route for the same thing, checked after the session and (for
//! forms) the form token, and each through the same `cms_backup::Backups`
//! call as that route:
//!
//! - `POST /tenants/{name}/backups/new` takes a backup now, as
//!   `POST /api/v1/tenants/{name}/backups` (`Write`);
//! - `GET /tenants/{name}/backups/{id}/download` streams the decrypted
//!   snapshot, as `GET .../backups/{id}/download` (`ReadSecrets`), with its
//!   headers, on the audit log as that read is;
//! - `POST /tenants/{name}/backups/{id}/restore` restores it, as
//!   `POST .../backups/{id}/restore` (`RestoreBackup`), when `confirm` is
//!   the tenant's name;
//! - `POST /tenants/{name}/backups/{id}/delete` deletes it, as
//!   `DELETE .../backups/{id}` (`RestoreBackup`), when `confirm` is the
//!   tenant's name.
//!
//! A backup or a restore runs in a task of its own, so that a browser that
//! goes away does not cut it off halfway (a restore holds the tenant's
//! `Restoring` condition until it ends). A backup is waited for, then the
//! page shows it. A restore is waited for until it ends or until the
//! tenant's `Restoring` condition says it runs, whichever comes first: the
//! page then shows the condition, which follows the restore live. A
//! refusal shows the page again with the message at its form.

use cms_auth::Permission;
use cms_backup::{Backups, RESTORING};
use cms_model::{Kind, Tenant};
use cms_store::{WatchItem, WatchStream};
use futures_util::StreamExt;
use http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};

use super::running::{Operation, Work};
use super::{Problem, configured, render};
use crate::failure::Failure;
use crate::reply::{self, Outcome};
use crate::session;
use crate::{Body, Console, CreatedName, Recorded, Request, Response};

/// Takes a backup of tenant `name` now.
pub(crate) async fn take(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, _) = session::posted(console, request, Permission::Write).await?;
    let backups = configured(console, &session)?.clone();
    console.tenancy.tenant(name).map_err(|err| Failure::from(err).page(Some(&session)))?;
    let refused = async |status: StatusCode, message: String| {
        render(console, &session, name, status, &Problem::Take(message)).await
    };
    let guard = match console.running.start(name, Work::Take, &session.caller.user) {
        Ok(guard) => guard,
        Err(running) => return refused(StatusCode::CONFLICT, busy(name, &running)).await,
    };
    let tenant = name.to_string();
    let task = tokio::spawn(async move {
        let _guard = guard;
        backups.take(&tenant).await
    });
    match task.await {
        Ok(Ok(backup)) => {
            let id = backup.id;
            tracing::info!(user = %session.caller.user, tenant = name, backup = %id, "took a backup from the console");
            let mut done =
                session.mark(reply::redirect(&format!("/tenants/{name}/backups?taken={id}#backup-{id}")));
            done.extensions_mut().insert(CreatedName(id));
            Ok(done)
        }
        Ok(Err(err)) => match Failure::from(err) {
            failure if failure.status == StatusCode::CONFLICT => {
                refused(failure.status, failure.message).await
            }
            failure => Err(failure.page(Some(&session)).into()),
        },
        Err(err) => Err(Failure::internal(&err).page(Some(&session)).into()),
    }
}

/// Restores tenant `name`'s etcd from the backup `id`, when the form's
/// `confirm` is the tenant's name.
pub(crate) async fn restore(console: &Console, request: &Request, name: &str, id: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::RestoreBackup).await?;
    let backups = configured(console, &session)?.clone();
    backups.get(name, id).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    let refused = async |status: StatusCode, message: String| {
        let problem = Problem::Restore { id: id.to_string(), message };
        render(console, &session, name, status, &problem).await
    };
    if form.get("confirm").trim() != name {
        let message = format!("Type {name} exactly to restore backup {id}; nothing was restored.");
        return refused(StatusCode::UNPROCESSABLE_ENTITY, message).await;
    }
    let guard = match console.running.start(name, Work::Restore(id.to_string()), &session.caller.user) {
        Ok(guard) => guard,
        Err(running) => return refused(StatusCode::CONFLICT, busy(name, &running)).await,
    };
    // Changes after this revision tell when the restore has begun.
    let store = console.store();
    let watch = store.watch(Kind::Tenant, Some(store.revision())).await.ok();
    tracing::info!(user = %session.caller.user, tenant = name, backup = id, "restoring a backup from the console");
    let (tenant, backup) = (name.to_string(), id.to_string());
    let mut task = tokio::spawn(async move {
        let _guard = guard;
        backups.restore(&tenant, &backup).await
    });
    let begun = restore_begun(watch, name, id);
    let page = |state: &str| format!("/tenants/{name}/backups?{state}={id}#restoring-condition");
    tokio::select! {
        biased;
        joined = &mut task => match joined {
            Ok(Ok(restored)) => {
                tracing::info!(user = %session.caller.user, tenant = name, backup = id,
                    machine = %restored.machine, "restored a backup from the console");
                Ok(session.mark(reply::redirect(&page("restored"))))
            }
            Ok(Err(err)) => match Failure::from(err) {
                failure if failure.status == StatusCode::CONFLICT => refused(failure.status, failure.message).await,
                failure => Err(failure.page(Some(&session)).into()),
            },
            Err(err) => Err(Failure::internal(&err).page(Some(&session)).into()),
        },
        () = begun => Ok(session.mark(reply::redirect(&page("restoring")))),
    }
}

/// Resolves once the tenant's `Restoring` condition says that the restore
/// of `id` runs; never, when the watch could not start or ends first.
async fn restore_begun(watch: Option<WatchStream>, tenant: &str, id: &str) {
    let Some(mut watch) = watch else { return std::future::pending().await };
    while let Some(Ok(item)) = watch.next().await {
        let WatchItem::Event(event) = item else { continue };
        if event.object.key.name != tenant {
            continue;
        }
        let Ok(changed) = event.object.parse::<Tenant>() else { continue };
        let restoring = changed.status.conditions.iter().find(|condition| condition.kind == RESTORING);
        if restoring
            .is_some_and(|condition| condition.status == "True" && super::names(&condition.message, id))
        {
            return;
        }
    }
    std::future::pending().await
}

/// Deletes the backup `id` of tenant `name`, when the form's `confirm` is
/// the tenant's name.
pub(crate) async fn delete(console: &Console, request: &Request, name: &str, id: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::RestoreBackup).await?;
    let backups = configured(console, &session)?;
    backups.get(name, id).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    let refused = async |status: StatusCode, message: String| {
        let problem = Problem::Delete { id: id.to_string(), message };
        render(console, &session, name, status, &problem).await
    };
    if form.get("confirm").trim() != name {
        let message = format!("Type {name} exactly to delete backup {id}; nothing was deleted.");
        return refused(StatusCode::UNPROCESSABLE_ENTITY, message).await;
    }
    if let Some(running) = console.running.get(name)
        && running.work == Work::Restore(id.to_string())
    {
        let message = format!("{} Delete the backup once the restore has ended.", busy(name, &running));
        return refused(StatusCode::CONFLICT, message).await;
    }
    backups.delete(name, id).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    tracing::info!(user = %session.caller.user, tenant = name, backup = id, "deleted a backup from the console");
    Ok(session.mark(reply::redirect(&format!("/tenants/{name}/backups?deleted={id}"))))
}

/// The snapshot of the backup `id` of tenant `name`, decrypted and
/// verified as it streams: a backup found altered midway cuts the
/// transfer off, so the browser never saves a whole file from it.
pub(crate) async fn download(console: &Console, request: &Request, name: &str, id: &str) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::ReadSecrets)?;
    let backups: &Backups = configured(console, &session)?;
    let (backup, chunks) =
        backups.download(name, id).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    tracing::info!(user = %session.caller.user, tenant = name, backup = id, "downloaded a backup from the console");
    let (tenant, backup_id) = (name.to_string(), backup.id.clone());
    let body = chunks.map(move |chunk| {
        chunk.map_err(|err| {
            tracing::warn!(tenant = %tenant, backup = %backup_id, "backup download failed: {err}");
            std::io::Error::other(err.to_string())
        })
    });
    let mut response = Response::new(Body::Fallible(Box::pin(body)));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    let disposition = format!("attachment; filename=\"{name}-{}.db\"", backup.id);
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(CONTENT_DISPOSITION, value);
    }
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(&backup.sha256) {
        headers.insert("x-content-sha256", value);
    }
    // The snapshot holds every Secret of the cluster: the audit log keeps
    // this read, as it keeps the API's.
    response.extensions_mut().insert(Recorded);
    Ok(session.mark(response))
}

/// Why a form waits: the operation running for the tenant.
fn busy(name: &str, running: &Operation) -> String {
    let what = match &running.work {
        Work::Take => "a backup".to_string(),
        Work::Restore(id) => format!("a restore of backup {id}"),
    };
    let since = running.since.format("%Y-%m-%d %H:%M:%S UTC");
    format!(
        "{} started {what} of {name} at {since}, which still runs; nothing new was started.",
        running.user
    )
}
