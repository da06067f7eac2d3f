//! CPU time from `/proc`, to show where a benchmark's cores went: the
//! server, the database and the load generator share one machine.

use std::time::Instant;

/// Clock ticks per second of `/proc/*/stat` (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// CPU seconds used so far by the three parties of a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    at: Instant,
    server: f64,
    database: f64,
    client: f64,
}

/// CPU seconds per second of wall time, and per operation, between two
/// samples.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Usage {
    /// Cores busy, on average.
    pub(crate) server: f64,
    pub(crate) database: f64,
    pub(crate) client: f64,
}

impl Usage {
    /// Microseconds of CPU per operation at `rate` operations per second.
    pub(crate) fn micros_per_op(&self, rate: f64) -> (f64, f64, f64) {
        let per = |cores: f64| cores * 1e6 / rate.max(f64::EPSILON);
        (per(self.server), per(self.database), per(self.client))
    }
}

impl Sample {
    /// Now: `server` is a process id, if a server runs; the database is
    /// every `postgres` process with the backends they reaped; the client
    /// is this process with the children it waited for.
    pub(crate) fn take(server: Option<u32>) -> Sample {
        Sample::take_of(server, None)
    }

    /// [`Sample::take`], with the database only the server whose postmaster
    /// is `postmaster`, when given: that postmaster, the processes it
    /// started and those it reaped, and not the other PostgreSQL servers of
    /// the machine.
    pub(crate) fn take_of(server: Option<u32>, postmaster: Option<u32>) -> Sample {
        let server = server.and_then(|pid| ticks(&pid.to_string())).map_or(0.0, |(own, _)| own);
        let client = ticks("self").map_or(0.0, |(own, children)| own + children);
        let database = match postmaster {
            Some(postmaster) => cluster(postmaster),
            None => database(),
        };
        Sample { at: Instant::now(), server, database, client }
    }

    /// The usage from `self` until `later`.
    pub(crate) fn until(&self, later: &Sample) -> Usage {
        let wall = later.at.duration_since(self.at).as_secs_f64().max(f64::EPSILON);
        Usage {
            server: (later.server - self.server) / wall,
            database: (later.database - self.database) / wall,
            client: (later.client - self.client) / wall,
        }
    }
}

/// `(own, waited-for children)` CPU seconds of `/proc/<pid>`.
fn ticks(pid: &str) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |index: usize| fields.get(index).and_then(|v| v.parse::<f64>().ok());
    // utime, stime, cutime, cstime are fields 14 to 17; `fields[0]` is 3.
    let own = field(11)? + field(12)?;
    let children = field(13)? + field(14)?;
    Some((own / TICKS, children / TICKS))
}

/// The CPU seconds of the PostgreSQL server of `postmaster`.
fn cluster(postmaster: u32) -> f64 {
    let parent = postmaster.to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0.0 };
    let started: f64 = entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|pid| pid.chars().all(|c| c.is_ascii_digit()))
        .filter(|pid| parent_of(pid).is_some_and(|ppid| ppid == parent))
        .filter_map(|pid| ticks(&pid))
        .map(|(own, children)| own + children)
        .sum();
    started + ticks(&parent).map_or(0.0, |(own, children)| own + children)
}

/// The parent process id of `/proc/<pid>`.
fn parent_of(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The field after the state, after the command name in parentheses.
    stat.rsplit_once(')')?.1.split_whitespace().nth(1).map(str::to_string)
}

fn database() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0.0 };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().into_string().ok()?;
            pid.chars().all(|c| c.is_ascii_digit()).then_some(pid)
        })
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "postgres")
        })
        .filter_map(|pid| ticks(&pid))
        .map(|(own, children)| own + children)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_found_under_its_parent() {
        let parent = std::os::unix::process::parent_id().to_string();
        assert_eq!(parent_of(&std::process::id().to_string()), Some(parent.clone()));
        // The parent's own time at least: it has run to start this process.
        assert!(cluster(parent.parse().expect("a pid")) > 0.0);
    }

    #[test]
    fn this_process_uses_cpu() {
        // Spins until this process has used CPU time it can see, however
        // busy the machine is (within a minute), then checks that both the
        // "server" and the "client" reading of it counted that time.
        let pid = Some(std::process::id());
        let before = Sample::take(pid);
        let mut x = 0u64;
        let start = Instant::now();
        let mut now = before;
        while now.client - before.client < 0.1 && start.elapsed().as_secs() < 60 {
            for _ in 0..1_000_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            now = Sample::take(pid);
        }
        let usage = before.until(&now);
        assert!(x > 0);
        assert!(now.server - before.server >= 0.1 && now.client - before.client >= 0.1, "{before:?} {now:?}");
        assert!(usage.server > 0.0 && usage.client > 0.0, "{usage:?}");
    }
}
