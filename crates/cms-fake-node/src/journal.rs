//! The fake node's logs: each service's log and the kernel's buffer, as
//! Talos keeps them in memory (machined's `circular.go` logging manager
//! and the kernel's ring buffer), and the lines that say what happens to
//! the node.
//!
//! - A service's log exists once the service wrote to it: asking for one
//!   that never did is refused as Talos refuses it (`logs.rs`).
//! - machined's lines carry machined's own time stamp,
//!   `2006/01/02 15:04:05.000000 [talos] ...`; the other services' an
//!   RFC 3339 one; the kernel's read as `talosctl dmesg` shows them,
//!   `kern:    info: [2026-01-02T15:04:05.000000Z]: ...`.
//! - What happens to the node is written as it happens: the boot, a config
//!   taken, an upgrade, a reboot and the boot after it, a reset, etcd's
//!   bootstrap, joins and leaves.
//! - Every running service, and the kernel, writes a line each
//!   [`crate::FakeNodeOptions::log_interval`] (`tick N`, numbered per node),
//!   so a follower sees lines arrive.
//! - Each log keeps its last [`KEPT_LINES`] lines. Unlike a real node's,
//!   they survive the fake's reboots, so a test can read what led to one.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::broadcast;

use crate::service::Shared;

/// How many lines each log keeps.
pub const KEPT_LINES: usize = 5000;

/// Which log a line is in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Source {
    /// A service's, by its id.
    Service(String),
    /// The kernel's.
    Kernel,
}

/// The logs of one node.
#[derive(Debug)]
pub(crate) struct Journal {
    book: Mutex<Book>,
    /// Every line as it is written, to followers.
    lines: broadcast::Sender<(Source, Arc<str>)>,
    /// How many followed streams are open now.
    pub(crate) followers: Arc<AtomicUsize>,
}

#[derive(Debug, Default)]
struct Book {
    logs: BTreeMap<Source, VecDeque<Arc<str>>>,
    ticks: u64,
}

/// The lines a reader gets: those kept now and, when it follows, the ones
/// written after.
pub(crate) struct Reading {
    pub(crate) kept: Vec<Arc<str>>,
    pub(crate) next: Option<broadcast::Receiver<(Source, Arc<str>)>>,
}

impl Journal {
    pub(crate) fn new() -> Journal {
        let (lines, _) = broadcast::channel(1024);
        Journal { book: Mutex::new(Book::default()), lines, followers: Arc::default() }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes a line to a service's log (creating it).
    pub(crate) fn service(&self, id: &str, message: &str) {
        let now = SystemTime::now();
        let line = match id {
            "machined" => format!("{} [talos] {message}\n", machined_time(now)),
            _ => format!("{} {message}\n", humantime::format_rfc3339_micros(now)),
        };
        self.write(Source::Service(id.to_string()), line);
    }

    /// Writes a line to the kernel's buffer.
    pub(crate) fn kernel(&self, message: &str) {
        let now = humantime::format_rfc3339_micros(SystemTime::now());
        self.write(Source::Kernel, format!("kern:    info: [{now}]: {message}\n"));
    }

    fn write(&self, source: Source, line: String) {
        let line: Arc<str> = line.into();
        let mut book = self.book();
        let log = book.logs.entry(source.clone()).or_default();
        if log.len() == KEPT_LINES {
            log.pop_front();
        }
        log.push_back(line.clone());
        // Sent under the lock, so that a reader that took the kept lines
        // and subscribed under it neither misses nor repeats a line.
        let _ = self.lines.send((source, line));
    }

    /// Whether the log was ever written.
    pub(crate) fn exists(&self, source: &Source) -> bool {
        self.book().logs.contains_key(source)
    }

    /// The log's last `tail` lines (all with `None`) and, if `follow`, what
    /// comes after them.
    pub(crate) fn read(&self, source: &Source, tail: Option<usize>, follow: bool) -> Reading {
        let book = self.book();
        let log = book.logs.get(source);
        let all = log.map_or(0, VecDeque::len);
        let skip = tail.map_or(0, |tail| all.saturating_sub(tail));
        let kept = log.map(|log| log.iter().skip(skip).cloned().collect()).unwrap_or_default();
        let next = follow.then(|| self.lines.subscribe());
        Reading { kept, next }
    }

    /// The next tick's number.
    fn tick(&self) -> u64 {
        let mut book = self.book();
        book.ticks += 1;
        book.ticks
    }
}

/// machined's time stamp: `2006/01/02 15:04:05.000000`, in UTC.
fn machined_time(at: SystemTime) -> String {
    let text = humantime::format_rfc3339_micros(at).to_string();
    let text = text.trim_end_matches('Z');
    match text.split_once('T') {
        Some((date, time)) => format!("{} {time}", date.replace('-', "/")),
        None => text.to_string(),
    }
}

impl Shared {
    /// What the node writes as it boots: the kernel's first lines, and
    /// machined and apid starting, into maintenance mode or not.
    pub(crate) fn log_boot(&self) {
        let version = self.behaviour().version.clone();
        let journal = &self.journal;
        journal.kernel("Linux version 6.12.0-talos (fake-node) #1 SMP");
        journal.kernel("Command line: talos.platform=metal console=ttyS0 printk.devkmsg=on");
        journal.kernel("Run /sbin/init as init process");
        journal.service("machined", &format!("booting Talos {version}"));
        journal.service("udevd", "starting version 257");
        journal.service("apid", "apid started, listening on :50000");
        if self.maintenance.load(Ordering::SeqCst) {
            journal.service("machined", "entering maintenance mode: waiting for a machine config");
        }
    }

    /// What the node writes as it takes a config: machined applies it,
    /// containerd and the kubelet start, and on a control plane trustd and
    /// etcd.
    pub(crate) fn log_configured(&self, control_plane: bool) {
        let journal = &self.journal;
        let kind = if control_plane { "controlplane" } else { "worker" };
        journal.service("machined", &format!("applied machine configuration (type {kind})"));
        journal.service("containerd", "containerd successfully booted");
        journal.service("cri", "containerd CRI plugin started");
        journal.service("kubelet", "kubelet started");
        if control_plane {
            journal.service("trustd", "trustd started");
            journal.service("etcd", "etcd waits to join the cluster or for its bootstrap");
        }
    }

    /// A line in machined's log and, on a control plane, etcd's.
    pub(crate) fn log_etcd(&self, message: &str) {
        self.journal.service("machined", message);
        self.journal.service("etcd", message);
    }
}

/// Every `interval`, a line from each running service and from the
/// kernel, while the node is up; ends once the node is gone.
pub(crate) async fn tick(shared: Weak<Shared>, interval: Duration) {
    let interval = interval.max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(interval).await;
        let Some(shared) = shared.upgrade() else { return };
        if shared.rebooted().is_err() {
            continue;
        }
        let tick = shared.journal.tick();
        for service in shared.services() {
            if service.state == "Running" {
                shared.journal.service(service.id, &format!("{} is running (tick {tick})", service.id));
            }
        }
        shared.journal.kernel(&format!("clocksource: watchdog check (tick {tick})"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machined_stamps_its_lines_as_machined_does() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_767_366_245_000_123);
        assert_eq!(machined_time(at), "2026/01/02 15:04:05.000123");
    }

    #[test]
    fn a_log_keeps_its_last_lines_and_a_tail_takes_the_end() {
        let journal = Journal::new();
        let source = Source::Service("apid".into());
        assert!(!journal.exists(&source));
        for n in 0..KEPT_LINES + 3 {
            journal.service("apid", &format!("line {n}"));
        }
        let all = journal.read(&source, None, false).kept;
        assert_eq!(all.len(), KEPT_LINES);
        assert!(all[0].ends_with(" line 3\n"), "{}", all[0]);
        let tail = journal.read(&source, Some(2), false).kept;
        assert_eq!(tail.len(), 2);
        assert!(tail[1].ends_with(&format!(" line {}\n", KEPT_LINES + 2)), "{}", tail[1]);
        assert!(journal.read(&source, Some(0), false).kept.is_empty());
    }
}
