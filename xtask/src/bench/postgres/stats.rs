//! What the database did per write during a scenario: statements and calls
//! (`pg_stat_statements`, reset before the scenario), commits
//! (`pg_stat_database`), WAL (`pg_stat_wal`, reset before the scenario) and
//! the statements that took the most time.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::shell::output;

/// The statements the server needs loaded for these figures.
pub(crate) const SETTINGS: [&str; 2] =
    ["shared_preload_libraries=pg_stat_statements", "pg_stat_statements.max=1000"];

/// How long backends may take to publish their counters once idle: they
/// flush them at most once a second.
const SETTLE: Duration = Duration::from_millis(1500);

/// Statements shown in the report.
const TOP: usize = 6;

/// The counters at the start of a scenario.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start {
    commits: u64,
    audit: u64,
    revision: u64,
}

/// What the database did during one scenario.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    /// Writes: audit records appended, one per request.
    pub(crate) writes: u64,
    /// Events logged (revisions taken).
    pub(crate) events: u64,
    pub(crate) commits: u64,
    /// Distinct statements, and their executions, the server's only.
    pub(crate) statements: u64,
    pub(crate) calls: u64,
    pub(crate) wal_bytes: u64,
    pub(crate) wal_records: u64,
    /// The statements that took the most time, most first.
    pub(crate) top: Vec<Top>,
}

/// One statement of [`Stats::top`].
#[derive(Debug, Clone)]
pub(crate) struct Top {
    pub(crate) query: String,
    pub(crate) calls: u64,
    pub(crate) total_ms: f64,
    pub(crate) rows: u64,
    pub(crate) wal_bytes: u64,
}

/// Statements of the probe itself, left out of the figures.
const OWN: &str = "query NOT LIKE '%pg_stat%' AND query NOT LIKE '%cms_probe%'";

/// Runs `sql` with `psql` on `url`; returns its rows, fields split on tabs.
fn query(url: &str, sql: &str) -> Result<Vec<Vec<String>>> {
    let text = output(
        Command::new(cms_pgtest::client_tool("psql"))
            .args(["-X", "-q", "-A", "-t", "-F", "\t", "-c", sql, url]),
        Duration::from_secs(60),
    )
    .with_context(|| format!("psql: {sql}"))?;
    Ok(text
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| line.split('\t').map(str::to_string).collect())
        .collect())
}

fn number(rows: &[Vec<String>], row: usize, column: usize) -> u64 {
    rows.get(row)
        .and_then(|row| row.get(column))
        .and_then(|value| value.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Loads the extension into the database of `url`.
pub(crate) fn install(url: &str) -> Result<()> {
    query(url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements").map(drop)
}

/// Resets the counters and notes those that are not reset.
pub(crate) fn start(url: &str) -> Result<Start> {
    std::thread::sleep(SETTLE);
    query(url, "SELECT pg_stat_statements_reset(), pg_stat_reset_shared('wal')")?;
    let rows = counters(url)?;
    Ok(Start { commits: number(&rows, 0, 0), audit: number(&rows, 0, 1), revision: number(&rows, 0, 2) })
}

/// `xact_commit` of this database, the newest audit id, the revision.
fn counters(url: &str) -> Result<Vec<Vec<String>>> {
    query(
        url,
        "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()), \
         (SELECT coalesce(max(id), 0) FROM audit), \
         (SELECT value FROM counters WHERE name = 'revision')",
    )
}

/// What happened since `start`.
pub(crate) fn finish(url: &str, start: Start) -> Result<Stats> {
    std::thread::sleep(SETTLE);
    let rows = counters(url)?;
    let wal = query(url, "SELECT wal_records, wal_bytes FROM pg_stat_wal")?;
    let totals = query(
        url,
        &format!(
            "SELECT count(*), coalesce(sum(calls), 0) FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND {OWN}"
        ),
    )?;
    let top = query(
        url,
        &format!(
            "SELECT calls, total_exec_time, rows, wal_bytes, \
             regexp_replace(left(query, 110), '\\s+', ' ', 'g') FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND {OWN} \
             ORDER BY total_exec_time DESC LIMIT {TOP}"
        ),
    )?;
    Ok(Stats {
        writes: number(&rows, 0, 1).saturating_sub(start.audit),
        events: number(&rows, 0, 2).saturating_sub(start.revision),
        commits: number(&rows, 0, 0).saturating_sub(start.commits),
        statements: number(&totals, 0, 0),
        calls: number(&totals, 0, 1),
        wal_records: number(&wal, 0, 0),
        wal_bytes: number(&wal, 0, 1),
        top: top
            .iter()
            .map(|row| Top {
                calls: row.first().and_then(|v| v.parse().ok()).unwrap_or(0),
                total_ms: row.get(1).and_then(|v| v.parse().ok()).unwrap_or(0.0),
                rows: row.get(2).and_then(|v| v.parse().ok()).unwrap_or(0),
                wal_bytes: row.get(3).and_then(|v| v.parse::<f64>().ok()).map_or(0, |v| v as u64),
                query: row.get(4).cloned().unwrap_or_default(),
            })
            .collect(),
    })
}

impl Stats {
    fn per_write(&self, value: u64) -> f64 {
        value as f64 / self.writes.max(1) as f64
    }

    /// Calls per committed transaction: the round trips of a batch, each
    /// statement one, `BEGIN` and `COMMIT` included.
    pub(crate) fn calls_per_commit(&self) -> f64 {
        self.calls as f64 / self.commits.max(1) as f64
    }

    /// Writes per committed transaction.
    pub(crate) fn writes_per_commit(&self) -> f64 {
        self.writes as f64 / self.commits.max(1) as f64
    }

    /// The table row of this scenario.
    pub(crate) fn row(&self, name: &str) -> String {
        format!(
            "| {name} | {} | {} | {:.2} | {:.1} | {:.2} | {:.1} | {:.0} B | {:.1} |\n",
            self.writes,
            self.statements,
            self.per_write(self.events),
            self.writes_per_commit(),
            self.per_write(self.calls),
            self.calls_per_commit(),
            self.per_write(self.wal_bytes),
            self.per_write(self.wal_records),
        )
    }

    /// The top statements of this scenario, as table rows.
    pub(crate) fn top_rows(&self, name: &str) -> String {
        self.top
            .iter()
            .map(|top| {
                format!(
                    "| {name} | `{}` | {:.2} | {:.0} µs | {:.0} µs | {:.1} | {:.0} B |\n",
                    top.query.replace('|', "\\|").replace('`', "'"),
                    self.per_write(top.calls),
                    top.total_ms * 1000.0 / self.writes.max(1) as f64,
                    top.total_ms * 1000.0 / top.calls.max(1) as f64,
                    top.rows as f64 / top.calls.max(1) as f64,
                    self.per_write(top.wal_bytes),
                )
            })
            .collect()
    }
}

/// The header of [`Stats::row`]'s table.
pub(crate) const HEADER: &str = "| Scenario | Writes | Statements | Events per write | Writes per commit | Calls per write | \
     Calls per commit | WAL per write | WAL records per write |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";

/// The header of [`Stats::top_rows`]'s table.
pub(crate) const TOP_HEADER: &str = "| Scenario | Statement | Calls per write | Time per write | \
     Time per call | Rows per call | WAL per write |\n|---|---|---:|---:|---:|---:|---:|\n";
