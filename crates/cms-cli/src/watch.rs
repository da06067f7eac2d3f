//! `cms get tenants -w`: the tenants as a table, then one row per change.
//!
//! The opening burst is printed as one table once the server marks its end;
//! later rows keep the columns of that table (wider cells push the rest right).

use anyhow::Result;
use chrono::Utc;
use cms_model::Tenant;

use crate::cli::Output;
use crate::client::Client;
use crate::output::{encode, line, out, widths};
use crate::sse::{Item, WatchEvent, watch_tenants};
use crate::tables::Row;

/// Follows the tenant watch until the stream fails or the user stops it.
pub(crate) fn get_watch(client: &Client, name: Option<&str>, format: Output) -> Result<()> {
    let receiver = watch_tenants(client);
    let mut burst: Vec<WatchEvent> = Vec::new();
    let mut columns: Option<Vec<usize>> = None;
    for item in receiver {
        match item {
            Item::Event(event) if name.is_some_and(|name| name != event.object.metadata.name) => {}
            Item::Event(event) => match &columns {
                None if format == Output::Table => burst.push(*event),
                _ => out(&event_text(&event, format, columns.as_deref())?)?,
            },
            Item::Synced => {
                let now = Utc::now();
                let rows: Vec<Vec<String>> = burst.iter().map(|event| event.object.cells(now)).collect();
                let widths = widths(Tenant::HEADERS, &rows);
                let mut text = line(&widths, Tenant::HEADERS.iter().map(|h| h.to_string()));
                for row in rows {
                    text.push_str(&line(&widths, row.into_iter()));
                }
                out(&text)?;
                burst.clear();
                columns = Some(widths);
            }
            Item::Failed(err) => return Err(err),
        }
    }
    Ok(())
}

/// One event as a row, a JSON line, a YAML document or `tenant/NAME`.
fn event_text(event: &WatchEvent, format: Output, columns: Option<&[usize]>) -> Result<String> {
    match format {
        Output::Table => {
            let mut cells = event.object.cells(Utc::now());
            if event.kind == "DELETED" {
                // The PHASE column says the tenant is gone.
                cells[1] = "deleted".to_string();
            }
            Ok(line(columns.unwrap_or_default(), cells.into_iter()))
        }
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
