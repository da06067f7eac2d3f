//! Reads of one tenant under a two-thread load, as a new user's first
//! benchmark (`wrk -t2 -c64`) shapes it: a load generator of two threads
//! and 64 connections, sharing the machine's cores with the server. Beside
//! the rate, the server's CPU time per request (from `/proc`) says what
//! each request costs beyond the hello.

use std::fmt::Write;
use std::time::Duration;

use anyhow::Result;

use super::cpu;
use super::load::{self, Shape, Target, WorkloadFactory};
use super::report::{self, Measurement};
use super::servers::Process;
use super::workloads;

/// The load generator's threads and connections in this shape.
pub(crate) const THREADS: usize = 2;
pub(crate) const CONNECTIONS: usize = 64;

/// One scenario of the shape: its rate and the server's CPU per request.
#[derive(Debug, Clone)]
pub(crate) struct Read {
    pub(crate) measurement: Measurement,
    /// Microseconds of the server's CPU per request.
    pub(crate) server_micros: f64,
}

/// The servers the scenarios read from.
pub(crate) struct Servers<'a> {
    pub(crate) hello: &'a Process,
    pub(crate) open: &'a Process,
    pub(crate) server: &'a Process,
    /// Targets of `server`: with a login token, and with an API token.
    pub(crate) login: Target,
    pub(crate) api_token: Target,
}

/// The scenarios' names, in the order they run; the first is the baseline.
pub(crate) const SCENARIOS: [&str; 4] =
    ["hello (actix-web baseline)", super::GET_UNAUTHENTICATED, super::GET_JWT, super::GET_API_TOKEN];

/// Runs every scenario `rounds` times, interleaved, on a runtime of
/// [`THREADS`] threads with [`CONNECTIONS`] connections, and returns each
/// one's median round.
pub(crate) fn measure(
    servers: &Servers<'_>,
    tenants: usize,
    warmup: Duration,
    seconds: Duration,
    rounds: usize,
) -> Result<Vec<Read>> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(THREADS).enable_all().build()?;
    let shape = Shape { connections: CONNECTIONS, warmup, measure: seconds };
    let hello = Target::new(servers.hello.addr);
    let open = Target::new(servers.open.addr);
    let mut all: Vec<Vec<Read>> = Vec::new();
    for round in 0..rounds {
        println!("two-thread round {} of {rounds}", round + 1);
        let runs: [(&Process, &Target, WorkloadFactory); 4] = [
            (servers.hello, &hello, workloads::get_path(hello.clone(), "/hello")),
            (servers.open, &open, workloads::get_tenant(open.clone(), tenants)),
            (servers.server, &servers.login, workloads::get_tenant(servers.login.clone(), tenants)),
            (servers.server, &servers.api_token, workloads::get_tenant(servers.api_token.clone(), tenants)),
        ];
        let mut measured = Vec::new();
        for ((process, target, workload), name) in runs.into_iter().zip(SCENARIOS) {
            println!("running {name} (two threads, {CONNECTIONS} connections)");
            let before = cpu::Sample::take(Some(process.pid()));
            let outcome = runtime.block_on(load::run(target.addr, shape, workload))?;
            let usage = before.until(&cpu::Sample::take(Some(process.pid())));
            println!("  {:.0} requests/s", outcome.per_second());
            measured.push(Read {
                measurement: Measurement::new(name, &outcome),
                server_micros: usage.micros_per_op(outcome.per_second()).0,
            });
        }
        all.push(measured);
    }
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(medians(all))
}

/// Per scenario, the round with the median rate.
fn medians(rounds: Vec<Vec<Read>>) -> Vec<Read> {
    let Some(first) = rounds.first() else { return Vec::new() };
    (0..first.len())
        .filter_map(|index| {
            let mut runs: Vec<&Read> = rounds.iter().filter_map(|round| round.get(index)).collect();
            runs.sort_by(|a, b| a.measurement.per_second().total_cmp(&b.measurement.per_second()));
            runs.get(runs.len() / 2).map(|read| (*read).clone())
        })
        .collect()
}

/// The report section: each scenario's rate, ratio to hello and the
/// server's CPU per request, and the extra CPU beyond the hello's.
pub(crate) fn markdown(reads: &[Read], single: &[Measurement]) -> String {
    let mut text = format!(
        "\n## Reads under a two-thread load\n\n\
         The same GETs with a load generator of {THREADS} threads and {CONNECTIONS} connections \
         (the shape of `wrk -t{THREADS} -c{CONNECTIONS}`), which leaves the server less of the \
         machine than the single-thread generator above, so the server's own work per request \
         shows more. Beside each rate, the server's CPU time per request, from `/proc`, over the \
         whole scenario. Target: an authenticated GET at 0.60× hello or better.\n\n\
         | Scenario | Requests/s | Ratio to hello | Single-thread ratio | Server CPU per request | Beyond hello | p99 |\n\
         |---|---:|---:|---:|---:|---:|---:|\n"
    );
    let baseline = reads.first().map(|read| (read.measurement.per_second(), read.server_micros));
    let single_baseline = single.first().map(Measurement::per_second).unwrap_or(0.0);
    for read in reads {
        let (rate, micros) = baseline.unwrap_or((0.0, 0.0));
        let single_ratio = single
            .iter()
            .find(|m| m.name() == read.measurement.name())
            .map(|m| report::ratio(m.per_second(), single_baseline))
            .map_or_else(|| "".to_string(), |ratio| format!("{ratio:.2}×"));
        let _ = writeln!(
            text,
            "| {} | {:.0} | {:.2}× | {} | {:.1} µs | {:+.1} µs | {:.2} ms |",
            read.measurement.name(),
            read.measurement.per_second(),
            report::ratio(read.measurement.per_second(), rate),
            single_ratio,
            read.server_micros,
            read.server_micros - micros,
            f64::from(read.measurement.p99_micros()) / 1000.0,
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::load::Outcome;

    fn read(name: &str, requests: u64, server_micros: f64) -> Read {
        let outcome = Outcome { requests, elapsed: Duration::from_secs(1), ..Outcome::default() };
        Read { measurement: Measurement::new(name, &outcome), server_micros }
    }

    #[test]
    fn the_section_gives_ratios_to_the_hello_of_its_own_shape_and_the_cpu_beyond_it() {
        let reads = [read(SCENARIOS[0], 1000, 20.0), read(SCENARIOS[2], 600, 32.5)];
        let single = [
            Measurement::new(
                SCENARIOS[0],
                &Outcome { requests: 400, elapsed: Duration::from_secs(1), ..Outcome::default() },
            ),
            Measurement::new(
                SCENARIOS[2],
                &Outcome { requests: 300, elapsed: Duration::from_secs(1), ..Outcome::default() },
            ),
        ];
        let text = markdown(&reads, &single);
        assert!(
            text.contains("| GET one tenant, login token (JWT) | 600 | 0.60× | 0.75× | 32.5 µs | +12.5 µs |"),
            "{text}"
        );
        assert!(
            text.contains("| hello (actix-web baseline) | 1000 | 1.00× | 1.00× | 20.0 µs | +0.0 µs |"),
            "{text}"
        );
    }

    #[test]
    fn the_median_round_is_kept_per_scenario() {
        let rounds = vec![
            vec![read("a", 10, 1.0), read("b", 300, 1.0)],
            vec![read("a", 30, 2.0), read("b", 100, 2.0)],
            vec![read("a", 20, 3.0), read("b", 200, 3.0)],
        ];
        let kept = medians(rounds);
        assert_eq!(kept.iter().map(|read| read.server_micros).collect::<Vec<_>>(), [3.0, 3.0]);
        assert_eq!(kept[1].measurement.per_second(), 200.0);
    }
}
