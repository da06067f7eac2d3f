//! `cms get tenants -w` and `cms watch`: the tenants as a table, then one
//! row per change (`cms watch` adds an `EVENT` column).
//!
//! The opening burst is printed as one table once the server marks its end;
//! later rows keep the columns of that table (wider cells push the rest right).
//! The watch underneath is a reflector (`sse.rs`): a change is printed once,
//! even when the watch lists again after 410 `Gone`.

use anyhow::Result;
use chrono::Utc;
use cms_model::Tenant;

use crate::cli::{Output, WatchArgs};
use crate::client::Client;
use crate::failure::usage;
use crate::output::{encode, line, out, widths};
use crate::sse::{Item, WatchEvent, watch_tenants};
use crate::tables::Row;

/// Follows the tenant watch (of the tenant named `name`, or of the tenants
/// `selector` matches, which the server judges) until the stream fails or
/// the user stops it.
pub(crate) fn get_watch(
    client: &Client,
    name: Option<&str>,
    selector: Option<&str>,
    format: Output,
) -> Result<()> {
    print_watch(client, name, selector, format, Columns::Tenant)
}

/// `cms watch [NAME] [-l SELECTOR]`: each change as an event, its type first.
pub(crate) fn watch(client: &Client, args: &WatchArgs, format: Output) -> Result<()> {
    if args.selector.is_some() && args.name.is_some() {
        return Err(usage("a NAME and --selector cannot be given together"));
    }
    print_watch(client, args.name.as_deref(), args.selector.as_deref(), format, Columns::Event)
}

/// The columns of a watch's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Columns {
    /// The tenant's, as `cms get tenants`.
    Tenant,
    /// `EVENT`, then the tenant's.
    Event,
}

impl Columns {
    fn headers(self) -> Vec<&'static str> {
        match self {
            Columns::Tenant => Tenant::HEADERS.to_vec(),
            Columns::Event => [&["EVENT"][..], Tenant::HEADERS].concat(),
        }
    }

    fn cells(self, event: &WatchEvent) -> Vec<String> {
        let mut cells = event.object.cells(Utc::now());
        if event.kind == "DELETED" {
            // The PHASE column says the tenant is gone.
            cells[1] = "deleted".to_string();
        }
        if self == Columns::Event {
            cells.insert(0, event.kind.clone());
        }
        cells
    }
}

fn print_watch(
    client: &Client,
    name: Option<&str>,
    selector: Option<&str>,
    format: Output,
    columns: Columns,
) -> Result<()> {
    let receiver = watch_tenants(client, name, selector);
    let mut burst: Vec<WatchEvent> = Vec::new();
    let mut widths_shown: Option<Vec<usize>> = None;
    for item in receiver {
        match item {
            Item::Event(event) => match &widths_shown {
                None if format == Output::Table => burst.push(*event),
                _ => out(&event_text(&event, format, columns, widths_shown.as_deref())?)?,
            },
            Item::Synced if format != Output::Table => widths_shown = Some(Vec::new()),
            Item::Synced => {
                let headers = columns.headers();
                let rows: Vec<Vec<String>> = burst.iter().map(|event| columns.cells(event)).collect();
                let widths = widths(&headers, &rows);
                let mut text = line(&widths, headers.iter().map(|h| h.to_string()));
                for row in rows {
                    text.push_str(&line(&widths, row.into_iter()));
                }
                out(&text)?;
                burst.clear();
                widths_shown = Some(widths);
            }
            Item::Failed(err) => return Err(err),
        }
    }
    Ok(())
}

/// One event as a row, a JSON line, a YAML document or `tenant/NAME`.
fn event_text(
    event: &WatchEvent,
    format: Output,
    columns: Columns,
    widths: Option<&[usize]>,
) -> Result<String> {
    match format {
        Output::Table => Ok(line(widths.unwrap_or_default(), columns.cells(event).into_iter())),
        Output::Name => Ok(format!("tenant/{}\n", event.object.metadata.name)),
        Output::Json => {
            let frame = serde_json::json!({"type": event.kind, "object": event.object});
            Ok(format!("{}\n", serde_json::to_string(&frame)?))
        }
        Output::Yaml => {
            let frame = serde_json::json!({"type": event.kind, "object": event.object});
            Ok(format!("---\n{}", encode(&frame, format)?))
        }
    }
}
