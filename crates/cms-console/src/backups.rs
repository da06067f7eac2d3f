//! A tenant's etcd backups (`docs/backups.md`): the tenant page's summary
//! and `GET /tenants/{name}/backups`, the page that lists them.
//!
//! The list is read from the backup store (`cms_backup::Backups::list`,
//! as `GET /api/v1/tenants/{name}/backups`), which may be a bucket across
//! the network, so it has a page of its own: the tenant page, which never
//! waits on the network, shows what the tenant records (the schedule, the
//! last success and failure, the `Restoring` condition) and links here.
//! The page shows each backup's time, size, status and where it is kept,
//! a backup or restore running from this console, and the controls the
//! caller's role may use: take a backup (`Write`), download one
//! (`ReadSecrets`), restore or delete one (`RestoreBackup`), each with the
//! permission of the API's route. The forms and the download are in
//! `backups/actions.rs`, and check again.

mod actions;
mod running;

use cms_auth::Permission;
use cms_backup::{Backup, RESTORING};
use cms_model::{Condition, Tenant};
use http::StatusCode;
use maud::{Markup, html};

pub(crate) use actions::{delete, download, restore, take};
pub(crate) use running::Running;
use running::{Operation, Work};

use crate::failure::Failure;
use crate::form::Form;
use crate::layout::{self, timestamp};
use crate::reply::{Outcome, Refused};
use crate::session::{self, Session};
use crate::{Console, Request};

/// A form of the page that was posted and refused, to show at its form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    None,
    /// The form that takes a backup.
    Take(String),
    /// The restore form of the backup `id`.
    Restore {
        id: String,
        message: String,
    },
    /// The delete form of the backup `id`.
    Delete {
        id: String,
        message: String,
    },
}

/// What the page says happened, after a form went through: the query of
/// the redirect, `?taken=`, `?restoring=`, `?restored=` or `?deleted=`
/// with the backup's id. Shown only when the list agrees with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Notice<'a> {
    None,
    Taken(&'a str),
    Restoring(&'a str),
    Restored(&'a str),
    Deleted(&'a str),
}

impl<'a> Notice<'a> {
    fn of(query: &'a Form) -> Notice<'a> {
        let ids = [
            ("taken", Notice::Taken as fn(&'a str) -> Notice<'a>),
            ("restoring", Notice::Restoring),
            ("restored", Notice::Restored),
            ("deleted", Notice::Deleted),
        ];
        ids.into_iter()
            .find_map(|(field, notice)| query.optional(field).filter(|id| plain_id(id)).map(notice))
            .unwrap_or(Notice::None)
    }
}

/// Whether `id` could be a backup id: what a query may name and the page
/// repeats (`cms_backup`'s rule).
fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The backups page.
pub(crate) async fn page(console: &Console, request: &Request, name: &str) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::Read)?;
    let query = Form::query(request);
    show(console, &session, name, StatusCode::OK, &Problem::None, Notice::of(&query)).await
}

/// The backups page of tenant `name` with `status`, showing `problem` at
/// its form.
pub(crate) async fn render(
    console: &Console,
    session: &Session,
    name: &str,
    status: StatusCode,
    problem: &Problem,
) -> Outcome {
    show(console, session, name, status, problem, Notice::None).await
}

async fn show(
    console: &Console,
    session: &Session,
    name: &str,
    status: StatusCode,
    problem: &Problem,
    notice: Notice<'_>,
) -> Outcome {
    let backups = configured(console, session)?;
    // Read first: a change of the tenant after this is sent again.
    let revision = console.store().revision();
    let tenant = console.tenancy.tenant(name).map_err(|err| Failure::from(err).page(Some(session)))?;
    let list = backups.list(name).await.map_err(|err| Failure::from(err).page(Some(session)))?;
    let rows: Vec<(Backup, String)> = list
        .into_iter()
        .map(|backup| {
            let location = backups.location(name, &backup.id);
            (backup, location)
        })
        .collect();
    let running = console.running.get(name);
    let view = View { session, tenant: &tenant, rows: &rows, running: running.as_ref(), problem };
    let content = html! {
        h1 { "Backups of " (name) }
        p { a #back-to-tenant href={ "/tenants/" (name) } { "Back to tenant " (name) } }
        section #backups data-tenant=(name) data-revision=(revision) aria-labelledby="backups-facts-heading" {
            (view.notice(notice))
            h2 #backups-facts-heading { "Schedule and restores" }
            (facts(&tenant))
            (view.running())
            (view.take_form())
            (view.list())
        }
    };
    Ok(layout::respond(status, &format!("Backups of {name}"), Some(session), content))
}

/// The backups, or the 503 page the API's `503` is when the server keeps none.
fn configured<'a>(console: &'a Console, session: &Session) -> Result<&'a cms_backup::Backups, Refused> {
    console.backups.as_ref().ok_or_else(|| {
        let message = "This server keeps no backups of tenants: they are not configured.";
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, message).page(Some(session)).into()
    })
}

/// The tenant page's section: what the tenant records of its backups and
/// the link to the page that lists them.
pub(crate) fn summary(console: &Console, tenant: &Tenant) -> Markup {
    let name = &tenant.metadata.name;
    html! {
        h2 #backups-heading { "Backups" }
        (facts(tenant))
        @if console.backups.is_some() {
            p {
                a #backups-link href={ "/tenants/" (name) "/backups" } { "Backups of " (name) }
                ": list, take, download and restore"
            }
        } @else {
            p #backups-unavailable { "This server keeps no backups of tenants: they are not configured." }
        }
    }
}

/// The schedule, the last backup that succeeded and failed, and the
/// `Restoring` condition in words.
fn facts(tenant: &Tenant) -> Markup {
    let status = tenant.status.backups.clone().unwrap_or_default();
    let restoring = tenant.status.conditions.iter().find(|condition| condition.kind == RESTORING);
    html! {
        dl #backup-facts .facts {
            dt { "Schedule" }
            dd #backup-schedule {
                @match &tenant.spec.backups {
                    Some(schedule) => {
                        code { (schedule.schedule) } " (UTC), keeping the newest " (schedule.retain)
                    }
                    None => "none: backups are taken on demand",
                }
            }
            dt { "Next scheduled backup" }
            dd #backup-next-run {
                @match status.next_run { Some(time) => (timestamp(time)), None => "none" }
            }
            dt { "Last backup" }
            dd #backup-last-success {
                @match &status.last_success {
                    Some(success) => {
                        (timestamp(success.time)) ", " code { (success.id) } ", " (size(success.size))
                    }
                    None => "none recorded",
                }
            }
            dt { "Last failed backup" }
            dd #backup-last-failure {
                @match &status.last_failure {
                    Some(failure) => { (timestamp(failure.time)) ": " (failure.reason) }
                    None => "none recorded",
                }
            }
            dt { "Restore" }
            dd {
                p #restoring-condition .procedure-condition data-condition=(RESTORING)
                    data-status=(restoring.map_or("", |condition| condition.status.as_str()))
                    data-reason=(restoring.map_or("", |condition| condition.reason.as_str()))
                    role="status" {
                    (restoring_text(restoring))
                }
            }
        }
    }
}

/// The `Restoring` condition in words; `console.js` writes the same.
pub(crate) fn restoring_text(condition: Option<&Condition>) -> String {
    let Some(condition) = condition else { return "No restore has run.".to_string() };
    let message = &condition.message;
    match (condition.status.as_str(), condition.reason.as_str()) {
        ("True", _) => format!("Restoring: {message}"),
        (_, "Restored") => format!("Restored: {message}"),
        _ => format!("Restore failed: {message}"),
    }
}

/// A size in bytes for people: bytes, KiB, MiB or GiB.
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

struct View<'a> {
    session: &'a Session,
    tenant: &'a Tenant,
    /// Each backup with where it is kept, oldest first.
    rows: &'a [(Backup, String)],
    running: Option<&'a Operation>,
    problem: &'a Problem,
}

impl View<'_> {
    fn name(&self) -> &str {
        &self.tenant.metadata.name
    }

    fn listed(&self, id: &str) -> Option<&Backup> {
        self.rows.iter().map(|(backup, _)| backup).find(|backup| backup.id == id)
    }

    fn notice(&self, notice: Notice<'_>) -> Markup {
        let text = match notice {
            Notice::None => None,
            Notice::Taken(id) => self
                .listed(id)
                .map(|backup| format!("Backup {id} taken: {} from {}.", size(backup.size), backup.machine)),
            Notice::Restoring(id) => self
                .listed(id)
                .map(|_| format!("The restore of backup {id} started; the restore line below follows it.")),
            Notice::Restored(id) => self.listed(id).map(|_| format!("Backup {id} restored.")),
            Notice::Deleted(id) => self.listed(id).is_none().then(|| format!("Backup {id} deleted.")),
        };
        html! {
            @if let Some(text) = text { p #backup-notice .notice role="status" { (text) } }
        }
    }

    fn running(&self) -> Markup {
        let Some(operation) = self.running else { return html! {} };
        html! {
            p #backup-running .notice data-work=(match operation.work { Work::Take => "take", Work::Restore(_) => "restore" }) {
                @match &operation.work {
                    Work::Take => "A backup is being taken",
                    Work::Restore(id) => { "Backup " code { (id) } " is being restored" },
                }
                ", started " (timestamp(operation.since)) " by " (operation.user)
                @match operation.work {
                    Work::Take => ". Reload the page to see it end.",
                    Work::Restore(_) => "; the restore line above follows it.",
                }
            }
        }
    }

    fn take_form(&self) -> Markup {
        if !self.session.may(Permission::Write) {
            return html! {};
        }
        let error = match self.problem {
            Problem::Take(message) => Some(message.as_str()),
            _ => None,
        };
        html! {
            form #take-backup method="post" action={ "/tenants/" (self.name()) "/backups/new" } {
                (layout::csrf_field(self.session))
                @if let Some(message) = error {
                    div #take-backup-error .failure role="alert" { p { (message) } }
                }
                button type="submit" { "Take a backup now" }
            }
        }
    }

    fn list(&self) -> Markup {
        let may_download = self.session.may(Permission::ReadSecrets);
        let may_restore = self.session.may(Permission::RestoreBackup);
        html! {
            h2 #backup-list-heading { "Stored backups" }
            @if self.rows.is_empty() {
                p #no-backups { "The tenant has no backups yet." }
            } @else {
                @if may_restore {
                    p .hint #restore-hint {
                        "A restore starts etcd from the backup on the first control plane whose etcd waits \
                         for its bootstrap, after a loss of every control plane; it never replaces a running \
                         etcd. Deleting a backup removes its file for good."
                    }
                }
                table #backups-list aria-labelledby="backup-list-heading" {
                    thead {
                        tr {
                            th scope="col" { "ID" }
                            th scope="col" { "Time" }
                            th scope="col" { "Size" }
                            th scope="col" { "Status" }
                            th scope="col" { "Machine" }
                            th scope="col" { "Stored at" }
                            @if may_download { th scope="col" { "Download" } }
                            @if may_restore { th scope="col" { "Restore or delete" } }
                        }
                    }
                    tbody {
                        @for (backup, location) in self.rows.iter().rev() {
                            (self.row(backup, location, may_download, may_restore))
                        }
                    }
                }
            }
        }
    }

    fn row(&self, backup: &Backup, location: &str, may_download: bool, may_restore: bool) -> Markup {
        let id = &backup.id;
        let (state, text) = self.status(backup);
        html! {
            tr #{ "backup-" (id) } data-backup=(id) {
                th scope="row" .id { code { (id) } }
                td .time { (timestamp(backup.time)) }
                td .size data-bytes=(backup.size) { (size(backup.size)) }
                td .status data-status=(state) { (text) }
                td .machine {
                    (backup.machine)
                    @if let Some(talos) = &backup.talos_version { ", Talos " (talos) }
                    @if let Some(etcd) = &backup.etcd_version { ", etcd " (etcd) }
                }
                td .location { code { (location) } }
                @if may_download {
                    td {
                        a .download href={ "/tenants/" (self.name()) "/backups/" (id) "/download" } download {
                            "Download" span .visually-hidden { " backup " (id) }
                        }
                    }
                }
                @if may_restore { td .actions { (self.actions(backup)) } }
            }
        }
    }

    /// Where the backup stands: stored, or what the `Restoring` condition
    /// and this console's running restore say of it.
    fn status(&self, backup: &Backup) -> (&'static str, &'static str) {
        if let Some(Operation { work: Work::Restore(id), .. }) = self.running
            && *id == backup.id
        {
            return ("restoring", "being restored");
        }
        let conditions = &self.tenant.status.conditions;
        let restoring = conditions.iter().find(|condition| condition.kind == RESTORING);
        match restoring.filter(|condition| names(&condition.message, &backup.id)) {
            Some(condition) if condition.status == "True" => ("restoring", "being restored"),
            Some(condition) if condition.reason == "Restored" => ("restored", "stored; restored last"),
            Some(_) => ("restore-failed", "stored; its last restore failed"),
            None => ("stored", "stored"),
        }
    }

    /// The restore and delete forms of a backup, each confirmed by typing
    /// the tenant's name.
    fn actions(&self, backup: &Backup) -> Markup {
        let id = &backup.id;
        let (restore_error, delete_error) = match self.problem {
            Problem::Restore { id: refused, message } if refused == id => (Some(message.as_str()), None),
            Problem::Delete { id: refused, message } if refused == id => (None, Some(message.as_str())),
            _ => (None, None),
        };
        let open = restore_error.is_some() || delete_error.is_some();
        html! {
            details .backup-actions #{ "backup-" (id) "-actions" } open[open] {
                summary { "Restore or delete" span .visually-hidden { " backup " (id) } }
                (self.confirmed_form("restore", id, restore_error))
                (self.confirmed_form("delete", id, delete_error))
            }
        }
    }

    /// The form that restores or deletes the backup `id` (`action` is
    /// `restore` or `delete`), with the field the tenant's name is typed in.
    fn confirmed_form(&self, action: &str, id: &str, error: Option<&str>) -> Markup {
        let name = self.name();
        let field = format!("{action}-{id}-confirm");
        let (what, button) = match action {
            "restore" => ("to restore its etcd from this backup", "Restore"),
            _ => ("to delete this backup for good", "Delete backup"),
        };
        html! {
            form class={ (action) "-backup stacked" } method="post" data-name=(name)
                action={ "/tenants/" (name) "/backups/" (id) "/" (action) } {
                (layout::csrf_field(self.session))
                div .field data-field="confirm" {
                    label for=(field) { "Type the tenant's name, " code { (name) } ", " (what) }
                    input #(field) name="confirm" type="text" autocomplete="off" required
                        aria-invalid=[error.map(|_| "true")]
                        aria-describedby=[error.map(|_| format!("{field}-error"))];
                    @if let Some(message) = error {
                        p .field-error id={ (field) "-error" } { (message) }
                    }
                }
                button .danger type="submit" { (button) }
            }
        }
    }
}

/// Whether a condition's `message` names the backup `id` as a word.
fn names(message: &str, id: &str) -> bool {
    message.split(|c: char| c.is_whitespace() || c == ':' || c == ',').any(|word| word == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_read_them() {
        for (bytes, text) in
            [(0, "0 B"), (1023, "1023 B"), (262_144, "256.00 KiB"), (52_428_800, "50.00 MiB")]
        {
            assert_eq!(size(bytes), text);
        }
        assert_eq!(size(3 * 1024 * 1024 * 1024 * 1024), "3072.00 GiB");
    }

    #[test]
    fn only_plain_ids_are_repeated() {
        let query = Form::of(&[("taken", "20261125t074211123z-3f9a")]);
        assert_eq!(Notice::of(&query), Notice::Taken("20261125t074211123z-3f9a"));
        for bad in ["<script>", "../x", "A", &"a".repeat(65)] {
            assert_eq!(Notice::of(&Form::of(&[("deleted", bad)])), Notice::None, "{bad}");
        }
    }

    #[test]
    fn the_restoring_condition_reads_in_words() {
        let condition = |status: &str, reason: &str| Condition {
            kind: RESTORING.into(),
            status: status.into(),
            reason: reason.into(),
            message: "restoring backup b-1 onto cp-0".into(),
            last_transition_time: chrono::Utc::now(),
        };
        assert_eq!(restoring_text(None), "No restore has run.");
        assert_eq!(
            restoring_text(Some(&condition("True", "Restoring"))),
            "Restoring: restoring backup b-1 onto cp-0"
        );
        assert!(restoring_text(Some(&condition("False", "Restored"))).starts_with("Restored: "));
        assert!(restoring_text(Some(&condition("False", "RestoreFailed"))).starts_with("Restore failed: "));
        assert!(names("restoring backup b-1 onto cp-0", "b-1"));
        assert!(!names("restoring backup b-10 onto cp-0", "b-1"));
    }
}
