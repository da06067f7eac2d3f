//! `GET /` (and `/tenants`): the tenants table, filtered and paged on the
//! server, 50 to a page, read from the store's cache. Without filters a
//! page is one `Store::list` call; with them, one pass over the cached
//! tenants. The table carries the store revision it was read at, from
//! which the script's live updates resume, and the filters, which decide
//! whether a tenant added meanwhile belongs on it (the label selector's
//! verdict comes with each update: the stream is opened with it). A
//! malformed label selector is a 400 page that shows the form, the message
//! at the field, and no table.

use chrono::Utc;
use cms_auth::Permission;
use cms_model::{Kind, Page};
use http::StatusCode;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::filters::{BadQuery, Filters, PER_PAGE};
use crate::form::Form;
use crate::reply::Outcome;
use crate::session::{self, Session};
use crate::summary::{PHASES, Summary, age, phase_name, reason_text, yes_no};
use crate::{Console, Request, layout};

/// The tenants page.
pub(crate) async fn page(console: &Console, request: &Request) -> Outcome {
    let session = session::require(console, request).await?;
    session.require_somewhere(Permission::Read)?;
    let filters = Filters::parse(&Form::query(request))
        .map_err(|BadQuery(message)| Failure::new(StatusCode::BAD_REQUEST, message).page(Some(&session)))?;
    if filters.label_error.is_some() {
        let content = html! { h1 { "Tenants" } (filter_form(&filters)) };
        return Ok(layout::respond(StatusCode::BAD_REQUEST, "Tenants", Some(&session), content));
    }
    let store = console.store();
    // Read first: an update between this and the list is sent again, never lost.
    let revision = store.revision();
    // A caller whose grants give it some tenants sees those only.
    let sees_all = session.caller.holds_everywhere(Permission::Read);
    let (objects, total) = if filters.narrows() || !sees_all {
        let matching: Vec<_> = store
            .all(Kind::Tenant, None)
            .into_iter()
            .filter(|object| filters.matches(object) && session.caller.holds_on(Permission::Read, object))
            .collect();
        let total = matching.len();
        (matching.into_iter().skip(filters.offset()).take(PER_PAGE).collect(), total)
    } else {
        let listing = store.list(Kind::Tenant, None, Page { limit: PER_PAGE, offset: filters.offset() });
        let total = usize::try_from(listing.total).unwrap_or(usize::MAX);
        (listing.items, total)
    };
    let default_talos = &console.tenancy.secrets().options().default_talos_version;
    let rows: Vec<Summary> =
        objects.iter().map(|object| Summary::of_object(object, store.as_ref(), default_talos)).collect();
    let content = content(&session, &filters, &rows, total, revision);
    Ok(layout::respond(StatusCode::OK, "Tenants", Some(&session), content))
}

fn content(session: &Session, filters: &Filters, rows: &[Summary], total: usize, revision: u64) -> Markup {
    let now = Utc::now();
    let first = filters.offset() + 1;
    let last = filters.offset() + rows.len();
    let phase = filters.phase.map(phase_name).unwrap_or_default();
    html! {
        h1 { "Tenants" }
        @if session.may_somewhere(Permission::Write) {
            p { a #create-tenant .button href="/tenants/new" { "Create tenant" } }
        }
        (filter_form(filters))
        table #tenants data-revision=(revision) data-q=(filters.q) data-label=(filters.label)
            data-phase=(phase) data-page=(filters.page) data-per-page=(PER_PAGE) data-total=(total) {
            caption {
                @if rows.is_empty() { "Tenants: none on this page" }
                @else { "Tenants " (first) " to " (last) " of " (total) }
            }
            thead {
                tr {
                    th scope="col" { "Name" }
                    th scope="col" { "Phase" }
                    th scope="col" { "Ready" }
                    th scope="col" { "Why not ready" }
                    th scope="col" { "Kubernetes" }
                    th scope="col" { "Talos" }
                    th scope="col" { "Machines" }
                    th scope="col" { "Age" }
                }
            }
            tbody {
                @for summary in rows { (row(summary, now)) }
            }
        }
        @if rows.is_empty() {
            p #no-tenants {
                @if filters.narrows() || filters.page > 1 { "No tenants match." }
                @else { "There are no tenants yet." }
            }
        }
        (pager(filters, last < total))
    }
}

/// One tenant's row; `console.js` builds the same shape for a tenant added
/// while the page is open. A tenant that is not ready says so, and why
/// (its first blocker); a ready one leaves that cell empty.
fn row(summary: &Summary, now: chrono::DateTime<Utc>) -> Markup {
    let ready = yes_no(summary.ready);
    let why = match summary.ready {
        true => "",
        false => reason_text(false, summary.message.as_deref()),
    };
    html! {
        tr data-tenant=(summary.name) data-ready=(ready) {
            th scope="row" .name { a href={ "/tenants/" (summary.name) } { (summary.name) } }
            td .phase data-phase=(summary.phase) { (summary.phase) }
            td .ready data-ready=(ready) { (ready) }
            td .message { (why) }
            td .kubernetes { (summary.kubernetes) }
            td .talos { (summary.talos) }
            td .machines { (summary.machines) }
            td .age {
                @if let Some(created) = summary.created_at {
                    time datetime=(created.to_rfc3339()) { (age(created, now)) }
                }
            }
        }
    }
}

fn filter_form(filters: &Filters) -> Markup {
    let error = filters.label_error.as_deref();
    let described = if error.is_some() { "label-hint label-error" } else { "label-hint" };
    html! {
        form #filters .inline role="search" method="get" action="/" {
            div .field data-field="q" {
                label for="q" { "Name contains" }
                input #q name="q" type="search" value=(filters.q);
            }
            div .field .invalid[error.is_some()] data-field="label" {
                label for="label" { "Labels" }
                p .hint #label-hint { "A label selector, such as " code { "team in (a,b),env!=prod" } }
                input #label name="label" type="text" value=(filters.label) spellcheck="false"
                    aria-describedby=(described) aria-invalid=[error.map(|_| "true")];
                @if let Some(message) = error {
                    p .field-error #label-error { (message) }
                }
            }
            div .field data-field="phase" {
                label for="phase" { "Phase" }
                select #phase name="phase" {
                    option value="" selected[filters.phase.is_none()] { "Any" }
                    @for phase in PHASES {
                        option value=(phase_name(phase)) selected[filters.phase == Some(phase)] { (phase_name(phase)) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}

fn pager(filters: &Filters, more: bool) -> Markup {
    html! {
        nav #pages aria-label="Pages" {
            @if filters.page > 1 {
                a rel="prev" href=(link(filters, filters.page - 1)) { "Previous page" }
            }
            " "
            span { "Page " (filters.page) }
            " "
            @if more {
                a rel="next" href=(link(filters, filters.page + 1)) { "Next page" }
            }
        }
    }
}

/// The tenants page with the same filters on `page`.
fn link(filters: &Filters, page: usize) -> String {
    match filters.query_for(page) {
        query if query.is_empty() => "/".to_string(),
        query => format!("/?{query}"),
    }
}
