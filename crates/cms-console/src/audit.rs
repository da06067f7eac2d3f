//! `GET /audit` (admins only, `Permission::ReadAudit`): the audit log,
//! newest first, 50 records to a page, optionally only one actor's records
//! (`actor`) or one tenant's (`tenant`). It reads with the store's
//! `Audit::list`, the call behind `GET /api/v1/audit`, so both show the same
//! records with the same filters; a blank filter here matches everything.

use cms_auth::Permission;
use cms_model::{AuditRecord, Page};
use cms_store::AuditFilter;
use http::StatusCode;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::Outcome;
use crate::session;
use crate::{Console, Request, layout};

/// How many records a page shows.
pub(crate) const PER_PAGE: usize = 50;

/// The audit page's query: the filters, trimmed (blank for none), and the
/// page, from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Query {
    actor: String,
    tenant: String,
    page: usize,
}

impl Query {
    fn parse(query: &Form) -> Result<Query, String> {
        let page = match query.optional("page") {
            None => 1,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|page| (1..=usize::MAX / PER_PAGE).contains(page))
                .ok_or_else(|| format!("The page must be a number from 1, not {text:?}."))?,
        };
        let actor = query.get("actor").trim().to_string();
        let tenant = query.get("tenant").trim().to_string();
        Ok(Query { actor, tenant, page })
    }

    /// The store's filter: a blank field does not filter.
    fn filter(&self) -> AuditFilter {
        let given = |value: &str| Some(value.to_string()).filter(|value| !value.is_empty());
        AuditFilter { actor: given(&self.actor), tenant: given(&self.tenant) }
    }

    fn offset(&self) -> usize {
        (self.page - 1) * PER_PAGE
    }

    /// The audit page with the same filters on `page`.
    fn link(&self, page: usize) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if !self.actor.is_empty() {
            query.append_pair("actor", &self.actor);
        }
        if !self.tenant.is_empty() {
            query.append_pair("tenant", &self.tenant);
        }
        if page > 1 {
            query.append_pair("page", &page.to_string());
        }
        match query.finish() {
            query if query.is_empty() => "/audit".to_string(),
            query => format!("/audit?{query}"),
        }
    }
}

/// The audit page.
pub(crate) async fn page(console: &Console, request: &Request) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::ReadAudit)?;
    let query = Query::parse(&Form::query(request))
        .map_err(|message| Failure::new(StatusCode::BAD_REQUEST, message).page(Some(&session)))?;
    let page = Page { limit: PER_PAGE, offset: query.offset() };
    let (records, total) = console
        .audit
        .list(page, query.filter())
        .await
        .map_err(|err| Failure::from(err).page(Some(&session)))?;
    let total = usize::try_from(total).unwrap_or(usize::MAX);
    Ok(layout::respond(StatusCode::OK, "Audit log", Some(&session), content(&query, &records, total)))
}

fn content(query: &Query, records: &[AuditRecord], total: usize) -> Markup {
    let first = query.offset() + 1;
    let last = query.offset() + records.len();
    html! {
        h1 { "Audit log" }
        p { "Every change asked of the service, through the API or this console, newest first." }
        (filter_form(query))
        table #audit data-page=(query.page) data-per-page=(PER_PAGE) data-total=(total) {
            caption {
                @if records.is_empty() { "Audit records: none on this page" }
                @else { "Audit records " (first) " to " (last) " of " (total) }
            }
            thead {
                tr {
                    th scope="col" { "Time" }
                    th scope="col" { "Actor" }
                    th scope="col" { "Role" }
                    th scope="col" { "Method" }
                    th scope="col" { "Path" }
                    th scope="col" { "Target" }
                    th scope="col" { "Status" }
                    th scope="col" { "Outcome" }
                }
            }
            tbody {
                @for record in records { (row(record)) }
            }
        }
        @if records.is_empty() {
            p #no-records {
                @if query.filter() != AuditFilter::default() || query.page > 1 { "No records match." }
                @else { "Nothing has been recorded yet." }
            }
        }
        (pager(query, last < total))
    }
}

fn row(record: &AuditRecord) -> Markup {
    let entry = &record.entry;
    html! {
        tr data-audit-id=(record.id) {
            td .time {
                (layout::timestamp(entry.time))
            }
            th scope="row" .actor { (entry.actor) }
            td .role { (entry.actor_role.map(|role| role.as_str()).unwrap_or("")) }
            td .method { (entry.method) }
            td .path { code { (entry.path) } }
            td .target {
                @if let Some(target) = &entry.target {
                    (target.kind)
                    @if let Some(tenant) = target.tenant.as_ref().filter(|tenant| Some(*tenant) != target.name.as_ref()) {
                        " " span .tenant { (tenant) } " /"
                    }
                    @if let Some(name) = &target.name { " " span .name { (name) } }
                }
            }
            td .status { (entry.status) }
            td .outcome data-outcome=(entry.outcome.as_str()) { (entry.outcome.as_str()) }
        }
    }
}

fn filter_form(query: &Query) -> Markup {
    html! {
        form #audit-filters .inline role="search" method="get" action="/audit" {
            div .field data-field="actor" {
                label for="actor" { "Actor" }
                input #actor name="actor" type="search" value=(query.actor);
            }
            div .field data-field="tenant" {
                label for="tenant" { "Tenant" }
                input #tenant name="tenant" type="search" value=(query.tenant);
            }
            button type="submit" { "Filter" }
        }
    }
}

fn pager(query: &Query, more: bool) -> Markup {
    html! {
        nav #pages aria-label="Pages" {
            @if query.page > 1 {
                a rel="prev" href=(query.link(query.page - 1)) { "Previous page" }
            }
            " "
            span { "Page " (query.page) }
            " "
            @if more {
                a rel="next" href=(query.link(query.page + 1)) { "Next page" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_keeps_its_filters_across_pages() {
        let query = Query::parse(&Form::of(&[("actor", " alice "), ("tenant", ""), ("page", "2")]));
        let query = query.expect("a query");
        assert_eq!(query.filter(), AuditFilter { actor: Some("alice".into()), tenant: None });
        assert_eq!(query.offset(), 50);
        assert_eq!(query.link(1), "/audit?actor=alice");
        assert_eq!(query.link(3), "/audit?actor=alice&page=3");
        for bad in ["0", "x", "-1", "99999999999999999999"] {
            assert!(Query::parse(&Form::of(&[("page", bad)])).is_err(), "{bad}");
        }
    }
}
