//! Printing results: aligned tables, JSON, YAML and `kind/name`.

use std::io::{self, Write};

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::cli::Output;
use crate::tables::Row;

/// Columns are separated by this many spaces.
const GAP: usize = 3;

/// Writes `text` to standard output. A closed pipe (`cms get tenants | head`)
/// is not an error.
pub(crate) fn out(text: &str) -> Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to standard output"),
    }
}

/// Renders rows under their headers, each column as wide as its widest cell.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let widths = widths(headers, rows);
    let mut text = line(&widths, headers.iter().map(|h| h.to_string()));
    for row in rows {
        text.push_str(&line(&widths, row.iter().cloned()));
    }
    text
}

/// The width of each column: its widest cell or header.
pub(crate) fn widths(headers: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    widths
}

/// One line of a table; the last column is not padded.
pub(crate) fn line(widths: &[usize], cells: impl Iterator<Item = String>) -> String {
    let cells: Vec<String> = cells.collect();
    let mut text = String::new();
    for (index, cell) in cells.iter().enumerate() {
        if index + 1 == cells.len() {
            text.push_str(cell);
        } else {
            let width = widths.get(index).copied().unwrap_or(0) + GAP;
            text.push_str(&format!("{cell:<width$}"));
        }
    }
    text.push('\n');
    text
}

/// Renders objects of one kind in the chosen format. `single` prints a lone
/// object rather than a list for JSON and YAML.
pub(crate) fn render<T: Row>(
    items: &[T],
    format: Output,
    single: bool,
    now: DateTime<Utc>,
) -> Result<String> {
    match format {
        Output::Table => {
            let rows: Vec<Vec<String>> = items.iter().map(|item| item.cells(now)).collect();
            if rows.is_empty() {
                return Ok(String::new());
            }
            Ok(table(T::HEADERS, &rows))
        }
        Output::Name => Ok(items.iter().map(|item| format!("{}/{}\n", T::KIND, item.name())).collect()),
        Output::Json | Output::Yaml if single && items.len() == 1 => encode(&items[0], format),
        Output::Json | Output::Yaml => encode(&ListOut { items, total: items.len() }, format),
    }
}

#[derive(Serialize)]
struct ListOut<'a, T> {
    items: &'a [T],
    total: usize,
}

/// A value as pretty JSON or YAML, ending with a newline.
pub(crate) fn encode<T: Serialize>(value: &T, format: Output) -> Result<String> {
    let mut text = match format {
        Output::Yaml => serde_saphyr::to_string(value).context("encoding YAML")?,
        _ => serde_json::to_string_pretty(value).context("encoding JSON")?,
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// Prints objects, or a note on standard error when a table would be empty.
pub(crate) fn show<T: Row>(items: &[T], format: Output, single: bool) -> Result<()> {
    if items.is_empty() && format == Output::Table {
        eprintln!("No {}s found.", T::KIND);
        return Ok(());
    }
    out(&render(items, format, single, Utc::now())?)
}
