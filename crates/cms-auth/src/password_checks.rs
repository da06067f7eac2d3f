//! The bound on password checks running at once ([`PasswordChecks`]). A
//! bcrypt check costs about 200 ms of one core and anyone may ask for one,
//! so each check of a login takes a permit of a semaphore sized from the
//! cores (`CMS_LOGIN_CONCURRENCY`). A login that gets none within a short
//! wait is refused with [`AuthError::LoginsBusy`] rather than queued
//! without end. The permit moves into the blocking task with the check, so
//! a login whose client goes away frees its permit only when its check is
//! done, and the bound holds whatever clients do.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::error::AuthError;

/// How long a login refused for want of a permit is told to wait.
const RETRY_AFTER: u64 = 1;

/// At most `bound` password checks at once.
pub(crate) struct PasswordChecks {
    permits: Arc<Semaphore>,
    bound: usize,
    wait: Duration,
}

impl std::fmt::Debug for PasswordChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordChecks").field("bound", &self.bound).field("wait", &self.wait).finish()
    }
}

impl PasswordChecks {
    /// At most `bound` checks at once (at least 1), each waiting at most
    /// `wait` for its turn.
    pub(crate) fn new(bound: usize, wait: Duration) -> PasswordChecks {
        let bound = bound.clamp(1, Semaphore::MAX_PERMITS);
        PasswordChecks { permits: Arc::new(Semaphore::new(bound)), bound, wait }
    }

    /// Runs `check` on the blocking threads once a permit is free, holding
    /// the permit until `check` returns; [`AuthError::LoginsBusy`] when no
    /// permit freed up within the wait.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        check: impl FnOnce() -> Result<T, AuthError> + Send + 'static,
    ) -> Result<T, AuthError> {
        let permit = match tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(closed)) => return Err(AuthError::Crypto(closed.to_string())),
            Err(_elapsed) => return Err(AuthError::LoginsBusy { retry_after: RETRY_AFTER }),
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            check()
        })
        .await
        .map_err(|err| AuthError::Crypto(err.to_string()))?
    }

    /// Takes every permit, for tests that need the bound exhausted.
    #[cfg(test)]
    pub(crate) async fn hold_all(&self) -> tokio::sync::OwnedSemaphorePermit {
        let bound = u32::try_from(self.bound).expect("a small bound in tests");
        self.permits.clone().acquire_many_owned(bound).await.expect("never closed")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    use super::*;

    /// A check that counts how many run at once, says when it starts and
    /// returns when told to.
    struct Counted {
        running: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
    }

    impl Counted {
        fn check(
            &self,
            index: usize,
            started: tokio::sync::mpsc::UnboundedSender<usize>,
            release: mpsc::Receiver<()>,
        ) -> impl FnOnce() -> Result<usize, AuthError> + Send + 'static {
            let (running, most) = (self.running.clone(), self.most.clone());
            move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                started.send(index).expect("the test listens");
                release.recv().expect("the test releases every check");
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(index)
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_most_the_bound_runs_and_the_rest_wait_their_turn() {
        const LOGINS: usize = 6;
        let checks = Arc::new(PasswordChecks::new(1, Duration::from_secs(3600)));
        let counted = Counted { running: Arc::default(), most: Arc::default() };
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
        let mut releases = Vec::new();
        let mut logins = Vec::new();
        for index in 0..LOGINS {
            let (release, wait) = mpsc::channel();
            releases.push(release);
            let check = counted.check(index, started_tx.clone(), wait);
            let checks = checks.clone();
            logins.push(tokio::spawn(async move { checks.run(check).await }));
        }
        for _ in 0..LOGINS {
            let index = started.recv().await.expect("a check starts");
            assert_eq!(counted.running.load(Ordering::SeqCst), 1, "one check at a time");
            releases[index].send(()).expect("the check waits");
        }
        for (index, login) in logins.into_iter().enumerate() {
            assert_eq!(login.await.expect("task").expect("queued, then run"), index);
        }
        assert_eq!(counted.most.load(Ordering::SeqCst), 1, "never more than the bound");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_login_that_finds_no_permit_within_the_wait_is_refused() {
        let checks = Arc::new(PasswordChecks::new(1, Duration::from_millis(20)));
        let counted = Counted { running: Arc::default(), most: Arc::default() };
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
        let (release, wait) = mpsc::channel();
        let first = tokio::spawn({
            let checks = checks.clone();
            let check = counted.check(0, started_tx.clone(), wait);
            async move { checks.run(check).await }
        });
        started.recv().await.expect("the first check runs");
        let refused = checks.run(|| Ok(1)).await.expect_err("the only permit is held");
        assert!(matches!(refused, AuthError::LoginsBusy { retry_after: 1 }), "{refused:?}");
        assert_eq!(refused.to_string(), "too many logins in progress; retry in 1 s");
        release.send(()).expect("the first check waits");
        assert_eq!(first.await.expect("task").expect("first"), 0);
        assert_eq!(checks.run(|| Ok(2)).await.expect("the permit is free again"), 2);
        assert_eq!(counted.most.load(Ordering::SeqCst), 1);
    }

    /// Known and unknown users' logins both wait for a permit, and one
    /// refused for want of it is not a failed login.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_login_takes_a_permit_unknown_users_too() {
        use cms_model::UserRole;
        use secrecy::SecretString;

        use crate::{AuthOptions, Authenticator};

        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
        let store = cms_store::SqlStore::open(&cms_store::StoreOptions::new(url)).await.expect("store");
        let options = AuthOptions {
            login_concurrency: 1,
            login_wait: Duration::from_millis(20),
            ..AuthOptions::default()
        };
        let auth = Authenticator::new(store, options).await.expect("authenticator");
        let password = SecretString::from("alice-password");
        auth.create_user("alice", UserRole::View, &password).await.expect("user");

        let held = auth.checks.hold_all().await;
        for _ in 0..10 {
            for user in ["alice", "ghost"] {
                let refused = auth.login(user, &password, None).await.expect_err("no permit");
                assert!(matches!(refused, AuthError::LoginsBusy { retry_after: 1 }), "{user}: {refused:?}");
            }
        }
        drop(held);
        auth.login("alice", &password, None).await.expect("busy refusals are not failed logins");
        let unknown = auth.login("ghost", &password, None).await.expect_err("unknown user");
        assert!(matches!(unknown, AuthError::Unauthorized(_)), "{unknown:?}");
    }
}
