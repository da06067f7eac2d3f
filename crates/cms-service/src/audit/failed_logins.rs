//! The bound on failed logins the audit log keeps: at most
//! [`KEPT_PER_USER`] per user in each [`WINDOW`], per replica. The login
//! throttle bounds the guesses per address, but an address space as large
//! as an IPv6 /48 holds 65,536 /64s, each with a try a minute; without this
//! bound their failures against one real account would flush the log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The failed logins of one user the audit log keeps in a window.
pub(crate) const KEPT_PER_USER: u32 = 5;

/// The window of [`KEPT_PER_USER`].
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// The most users whose windows are tracked at once; a failed login of
/// another user past it, while every window is current, is not kept.
const MAX_USERS: usize = 10_000;

/// How many failed logins of each user the audit log kept in the user's
/// current window, shared by the workers of one server. Cloning is cheap.
#[derive(Debug, Clone, Default)]
pub struct FailedLoginRecords {
    windows: Arc<Mutex<HashMap<String, Window>>>,
}

/// One user's window: when it began and the records it kept.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    kept: u32,
}

impl FailedLoginRecords {
    /// Whether a failed login of `user` at `now` is kept on the log, and
    /// counts it when it is.
    pub(crate) fn admit(&self, user: &str, now: Instant) -> bool {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if windows.len() >= MAX_USERS && !windows.contains_key(user) {
            windows.retain(|_, window| now.saturating_duration_since(window.start) < WINDOW);
            if windows.len() >= MAX_USERS {
                return false;
            }
        }
        let window = windows.entry(user.to_string()).or_insert(Window { start: now, kept: 0 });
        if now.saturating_duration_since(window.start) >= WINDOW {
            *window = Window { start: now, kept: 0 };
        }
        if window.kept >= KEPT_PER_USER {
            return false;
        }
        window.kept += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_keeps_the_bound_per_window() {
        let records = FailedLoginRecords::default();
        let start = Instant::now();
        let kept = |user: &str, at: Duration| (0..20).filter(|_| records.admit(user, start + at)).count();
        assert_eq!(kept("admin", Duration::ZERO), 5);
        assert_eq!(kept("dev", Duration::from_secs(1)), 5, "users count apart");
        assert_eq!(kept("admin", Duration::from_secs(59)), 0, "the same window");
        assert_eq!(kept("admin", Duration::from_secs(60)), 5, "a new window");
    }

    #[test]
    fn the_users_tracked_are_bounded() {
        let records = FailedLoginRecords::default();
        let start = Instant::now();
        for n in 0..MAX_USERS {
            assert!(records.admit(&format!("user-{n}"), start));
        }
        assert!(!records.admit("one-more", start), "every window is current");
        assert!(records.admit("user-0", start), "a tracked user keeps its bound");
        assert!(records.admit("one-more", start + WINDOW), "the old windows are dropped");
        assert_eq!(records.windows.lock().expect("lock").len(), 1);
    }
}
