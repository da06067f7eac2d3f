//! The benchmark report: a markdown table of throughput and ratios to hello.

use std::fmt::Write;

use super::load::Outcome;

/// One scenario's figures.
#[derive(Debug, Clone)]
pub(crate) struct Measurement {
    name: String,
    requests: u64,
    per_second: f64,
    failures: u64,
    p50_micros: u32,
    p99_micros: u32,
}

impl Measurement {
    pub(crate) fn new(name: &str, outcome: &Outcome) -> Measurement {
        Measurement {
            name: name.to_string(),
            requests: outcome.requests,
            per_second: outcome.per_second(),
            failures: outcome.failures,
            p50_micros: outcome.latency(0.50),
            p99_micros: outcome.latency(0.99),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn per_second(&self) -> f64 {
        self.per_second
    }

    pub(crate) fn p99_micros(&self) -> u32 {
        self.p99_micros
    }
}

/// `rate` as a ratio of `baseline`; 0 without a baseline.
pub(crate) fn ratio(rate: f64, baseline: f64) -> f64 {
    if baseline > 0.0 { rate / baseline } else { 0.0 }
}

/// Per scenario, the round with the median throughput. `rounds` holds the
/// same scenarios in the same order, round after round.
pub(crate) fn medians(rounds: Vec<Vec<Measurement>>) -> Vec<Measurement> {
    let Some(first) = rounds.first() else { return Vec::new() };
    let mut medians = Vec::new();
    for index in 0..first.len() {
        let mut runs: Vec<&Measurement> = rounds.iter().filter_map(|round| round.get(index)).collect();
        runs.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
        if let Some(median) = runs.get(runs.len() / 2) {
            medians.push((*median).clone());
        }
    }
    medians
}

/// Every scenario of one run; the first is the hello baseline.
#[derive(Debug)]
pub(crate) struct Report {
    setup: String,
    measurements: Vec<Measurement>,
}

impl Report {
    pub(crate) fn new(setup: String, measurements: Vec<Measurement>) -> Report {
        Report { setup, measurements }
    }

    /// The whole `docs/performance.md`.
    pub(crate) fn markdown(&self, commit: &str) -> String {
        let baseline = self.measurements.first().map(|m| m.per_second).unwrap_or(0.0);
        let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
        let mut text = String::new();
        let _ = writeln!(text, "# Performance\n");
        let _ = writeln!(
            text,
            "Written by `cargo xtask bench` on {date} at commit `{commit}`. Each figure is the \
             throughput of release builds on loopback, and its ratio to a bare actix-web hello \
             endpoint (the `hello` example of `cms-service`) measured in the same run, so the \
             ratios travel between machines better than the absolute figures.\n"
        );
        let _ = writeln!(text, "Setup: {}.\n", self.setup);
        let _ = writeln!(text, "| Scenario | Requests | Requests/s | Ratio to hello | p50 | p99 | Non-2xx |");
        let _ = writeln!(text, "|---|---:|---:|---:|---:|---:|---:|");
        for m in &self.measurements {
            let ratio = ratio(m.per_second, baseline);
            let _ = writeln!(
                text,
                "| {} | {} | {:.0} | {ratio:.2}× | {} | {} | {} |",
                m.name,
                m.requests,
                m.per_second,
                millis(m.p50_micros),
                millis(m.p99_micros),
                m.failures
            );
        }
        let rate = |name: &str| self.measurements.iter().find(|m| m.name == name).map(|m| m.per_second);
        if let Some(open) = rate(super::GET_UNAUTHENTICATED).filter(|open| *open > 0.0) {
            let _ =
                writeln!(text, "\nCost of authentication, against the same GET with authentication off:\n");
            for name in [super::GET_JWT, super::GET_API_TOKEN] {
                if let Some(with) = rate(name) {
                    let _ = writeln!(text, "- {name}: {:+.1}% throughput", (with / open - 1.0) * 100.0);
                }
            }
        }
        let _ = writeln!(
            text,
            "\nThe target for GET one tenant is at least 0.50× hello. Reads are served from an \
             in-memory cache that the store's event log keeps coherent; writes are durable SQLite \
             transactions, the writes waiting committed together (group commit). The load generator runs on the same machine and shares \
             its cores with the server, so on a small machine the hello baseline is partly bounded \
             by the generator and ratios near 1 understate the gap. Run `cargo xtask bench --help` \
             for the knobs. Tenants are stored before the servers start, each with three node groups \
             (four machines' worth of metal hosts) and a sealed secrets \
             bundle; the bundles share one service-account key, since generating 10,000 RSA-4096 \
             keys would take most of an hour. Authentication is measured on a second server over \
             the same data with `CMS_INSECURE_DISABLE_AUTH`, which only benchmarks use."
        );
        text
    }
}

fn millis(micros: u32) -> String {
    format!("{:.2} ms", f64::from(micros) / 1000.0)
}
