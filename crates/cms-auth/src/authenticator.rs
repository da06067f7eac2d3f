//! The [`Authenticator`]: logins, bearer-token checks, and the user and token
//! writes that must keep its caches honest.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cms_model::UserRole;
use cms_store::{Accounts, TokenRecord, UserChange, UserRecord};
use secrecy::{SecretSlice, SecretString};

use cms_oidc::{HttpTransport, Transport};

use crate::api_token::{self, NewToken};
use crate::error::AuthError;
use crate::federated::{SsoSetup, Workload, foreign_issuer};
use crate::grant_records::AllGrants;
use crate::identity::{Caller, Credential};
use crate::jwt::{LoginTokens, SsoClaims};
use crate::limits::{LimitOptions, Limits};
use crate::password;
use crate::password_checks::PasswordChecks;
use crate::seen::{Reuse, Seen};
use crate::sso::{SsoOptions, WorkloadTrust};
use crate::throttle::LoginThrottle;

/// How the authenticator is set up.
#[derive(Clone)]
pub struct AuthOptions {
    /// How long a login token lives.
    pub login_ttl: Duration,
    /// The login signing key. When absent, a random key lives with the
    /// authenticator alone, and its tokens do not outlive it: `cms-server`
    /// passes the key it keeps sealed in the store (`cms_tenancy::login_signing_key`).
    pub signing_key: Option<SecretSlice<u8>>,
    /// How long a user's role, a token record or the grants are trusted
    /// without reading the store again. Writes through the authenticator
    /// clear it at once; other replicas see them within this time.
    pub cache_ttl: Duration,
    /// Whether local users may log in with their passwords.
    pub password_login: bool,
    /// Sign-in at an OpenID Connect provider, when configured.
    pub sso: Option<SsoOptions>,
    /// Issuers whose tokens workloads may present.
    pub workloads: Vec<WorkloadTrust>,
    /// How issuers are reached; HTTPS with a 10 s timeout when unset.
    pub transport: Option<Arc<dyn Transport>>,
    /// The watch streams and request rate each identity may have.
    pub limits: LimitOptions,
    /// How many password checks of logins may run at once; the cores the
    /// process may use by default.
    pub login_concurrency: usize,
    /// How long a login waits for its turn to have its password checked
    /// before it is refused with [`AuthError::LoginsBusy`].
    pub login_wait: Duration,
    /// How many API tokens one user may hold.
    pub tokens_per_user: usize,
    /// How many grants there may be.
    pub max_grants: usize,
}

impl AuthOptions {
    /// 100 tokens.
    pub const DEFAULT_TOKENS_PER_USER: usize = 100;
    /// 1000 grants.
    pub const DEFAULT_MAX_GRANTS: usize = 1000;
    /// 2 seconds.
    pub const DEFAULT_LOGIN_WAIT: Duration = Duration::from_secs(2);

    /// The cores the process may use, the default bound on password checks.
    pub fn default_login_concurrency() -> usize {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    }
}

impl std::fmt::Debug for AuthOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthOptions")
            .field("login_ttl", &self.login_ttl)
            .field("cache_ttl", &self.cache_ttl)
            .field("password_login", &self.password_login)
            .field("sso", &self.sso)
            .field("workloads", &self.workloads)
            .field("limits", &self.limits)
            .field("login_concurrency", &self.login_concurrency)
            .field("login_wait", &self.login_wait)
            .field("tokens_per_user", &self.tokens_per_user)
            .field("max_grants", &self.max_grants)
            .finish_non_exhaustive()
    }
}

impl Default for AuthOptions {
    fn default() -> AuthOptions {
        AuthOptions {
            login_ttl: Duration::from_secs(3600),
            signing_key: None,
            cache_ttl: Duration::from_secs(2),
            password_login: true,
            sso: None,
            workloads: Vec::new(),
            transport: None,
            limits: LimitOptions::default(),
            login_concurrency: AuthOptions::default_login_concurrency(),
            login_wait: AuthOptions::DEFAULT_LOGIN_WAIT,
            tokens_per_user: AuthOptions::DEFAULT_TOKENS_PER_USER,
            max_grants: AuthOptions::DEFAULT_MAX_GRANTS,
        }
    }
}

/// The longest an exchange with an identity provider or issuer may take.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// How many verified login tokens are remembered at most.
const MAX_REMEMBERED_LOGINS: usize = 10_000;

/// Don't record a token's use more often than this.
const TOUCH_INTERVAL: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// A login token that verified: its user, expiry and sign-in.
type VerifiedLogin = (String, i64, Option<SsoClaims>);

/// Checks credentials against the store.
pub struct Authenticator {
    accounts: Arc<dyn Accounts>,
    pub(crate) tokens: LoginTokens,
    throttle: LoginThrottle,
    /// The bound on password checks of logins running at once.
    pub(crate) checks: PasswordChecks,
    limits: Limits,
    /// How many API tokens one user may hold.
    tokens_per_user: usize,
    /// Held while a token is counted and created, so that creates on this
    /// server cannot pass the cap together.
    token_creates: tokio::sync::Mutex<()>,
    pub(crate) cache_ttl: Duration,
    roles: Mutex<HashMap<String, (Option<UserRole>, Instant)>>,
    /// Every grant, as read from the store, and when.
    pub(crate) grants: Mutex<Option<(AllGrants, Instant)>>,
    /// Held while grants are counted and created, as `token_creates`.
    pub(crate) grant_writes: tokio::sync::Mutex<()>,
    /// How many grants there may be.
    pub(crate) max_grants: usize,
    /// Login tokens that verified, with their user, expiry and sign-in.
    logins: Mutex<HashMap<String, VerifiedLogin>>,
    api_tokens: Mutex<HashMap<String, (TokenRecord, Instant)>>,
    /// The callers each thread has seen tokens prove, kept as the caches
    /// above would answer (`seen.rs`).
    pub(crate) seen: Seen,
    /// Held for writing while the first admin is being created; logins
    /// wait for it.
    setup: Arc<tokio::sync::RwLock<()>>,
    password_login: bool,
    pub(crate) sso: Option<SsoSetup>,
    pub(crate) workloads: Vec<Workload>,
}

/// Holds every login back until dropped: see [`Authenticator::hold_logins`].
#[derive(Debug)]
pub struct LoginsHeld {
    _guard: tokio::sync::OwnedRwLockWriteGuard<()>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("tokens", &self.tokens).finish_non_exhaustive()
    }
}

impl Authenticator {
    /// An authenticator on `accounts`, with the signing key from `options`,
    /// or else a random key of its own.
    pub async fn new(accounts: Arc<dyn Accounts>, options: AuthOptions) -> Result<Authenticator, AuthError> {
        let key = match options.signing_key {
            Some(key) => key,
            None => SecretSlice::from(crate::random::bytes::<32>()?.to_vec()),
        };
        // The fixed hash for unknown users costs as much as a login; it is
        // made in the background so that it does not delay the start.
        tokio::spawn(async {
            if let Err(err) = password::warm_up().await {
                tracing::warn!(error = %err, "could not prepare the hash for unknown users");
            }
        });
        let transport = match options.transport {
            Some(transport) => transport,
            None => Arc::new(
                HttpTransport::new(PROVIDER_TIMEOUT).map_err(|err| AuthError::Crypto(err.to_string()))?,
            ),
        };
        let sso = options.sso.map(|options| SsoSetup::new(options, transport.clone()));
        let workloads =
            options.workloads.into_iter().map(|trust| Workload::new(trust, transport.clone())).collect();
        Ok(Authenticator {
            password_login: options.password_login,
            sso,
            workloads,
            accounts,
            tokens: LoginTokens::new(&key, options.login_ttl)?,
            throttle: LoginThrottle::default(),
            checks: PasswordChecks::new(options.login_concurrency, options.login_wait),
            limits: Limits::new(options.limits),
            tokens_per_user: options.tokens_per_user,
            token_creates: tokio::sync::Mutex::new(()),
            cache_ttl: options.cache_ttl,
            roles: Mutex::new(HashMap::new()),
            grants: Mutex::new(None),
            grant_writes: tokio::sync::Mutex::new(()),
            max_grants: options.max_grants,
            logins: Mutex::new(HashMap::new()),
            api_tokens: Mutex::new(HashMap::new()),
            seen: Seen::default(),
            setup: Arc::new(tokio::sync::RwLock::new(())),
        })
    }

    /// Makes logins wait until the returned guard is dropped, so that a
    /// server can serve while it creates its first admin and a login that
    /// comes meanwhile still finds that admin.
    pub async fn hold_logins(&self) -> LoginsHeld {
        LoginsHeld { _guard: self.setup.clone().write_owned().await }
    }

    /// Exchanges a user name and password for a login token. `from` is the
    /// client's address, which failures are counted by (`throttle.rs`);
    /// `None` when it is not known. The password is checked within the
    /// bound on checks at once (`password_checks.rs`), an unknown user's
    /// against the fixed hash alike.
    pub async fn login(
        &self,
        user: &str,
        password: &SecretString,
        from: Option<IpAddr>,
    ) -> Result<(String, DateTime<Utc>), AuthError> {
        if !self.password_login {
            return Err(AuthError::NotAllowed(
                "password login is turned off on this server; sign in with single sign-on".into(),
            ));
        }
        if let Some(retry_after) = self.throttle.check(user, from, Instant::now()) {
            return Err(AuthError::TooManyAttempts { retry_after });
        }
        drop(self.setup.read().await);
        let record = match cms_model::validate_name("username", user) {
            Ok(()) => self.accounts.user(user.to_string()).await?,
            Err(_) => None,
        };
        let hash = record.map(|r| r.password_hash);
        let password = password.clone();
        if !self.checks.run(move || password::check(&password, hash)).await? {
            self.throttle.fail(user, from, Instant::now());
            tracing::info!(user, "failed login");
            return Err(AuthError::Unauthorized("invalid username or password"));
        }
        self.throttle.succeed(user, from);
        self.tokens.issue(user)
    }

    /// The watch streams and request rates per identity, which the API and
    /// the console hold their callers to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether local users may log in with their passwords.
    pub fn password_login(&self) -> bool {
        self.password_login
    }

    /// Checks a bearer token: an API token, a login JWT, or a token of a
    /// trusted workload issuer. The caller carries the grants that name it;
    /// a caller from elsewhere needs a global role or a grant.
    ///
    /// A token this thread saw prove a caller lately is answered from
    /// what it proved, while the caches that answer would still do so
    /// (`seen.rs`).
    pub async fn authenticate(&self, bearer: &str) -> Result<Caller, AuthError> {
        let now = Instant::now();
        if let Some(caller) = self.seen.get(bearer, now) {
            return Ok(caller);
        }
        let generation = self.seen.generation();
        let mut reuse = Reuse::within(now, self.cache_ttl);
        let caller = self.identify(bearer, &mut reuse).await?;
        let caller = self.with_grants_reused(caller, &mut reuse).await?;
        self.seen.keep(bearer, &caller, generation, reuse, now);
        Ok(caller)
    }

    /// The caller a bearer token proves, with its global role, before its
    /// grants; `reuse` learns how long the answer stays good.
    async fn identify(&self, bearer: &str, reuse: &mut Reuse) -> Result<Caller, AuthError> {
        if bearer.starts_with(api_token::PREFIX) {
            return self.authenticate_api_token(bearer, reuse).await;
        }
        // A login token that verified before costs a lookup; only others
        // are read to choose who verifies them.
        let (user, expires, sso) = match self.remembered_login(bearer) {
            Some(login) => login,
            None => {
                if let Some(issuer) = foreign_issuer(bearer) {
                    reuse.never();
                    return self.authenticate_workload(&issuer, bearer).await;
                }
                self.verified_login(bearer)?
            }
        };
        reuse.expires(DateTime::from_timestamp(expires, 0).unwrap_or_default());
        match sso {
            None => {
                let role = self.role_of(&user, reuse).await?;
                Ok(Caller::local(&user, role, Credential::Login))
            }
            Some(sso) => {
                reuse.never();
                self.sso_caller(user, sso)
            }
        }
    }

    /// Verifies a login token and remembers it until it expires, so that
    /// later requests do not pay for the signature check again (see
    /// [`Authenticator::remembered_login`]); a remembered token is the exact
    /// string that verified.
    fn verified_login(&self, bearer: &str) -> Result<VerifiedLogin, AuthError> {
        let now = Utc::now().timestamp();
        let claims = self.tokens.verify(bearer)?;
        let mut logins = self.logins.lock().unwrap_or_else(|p| p.into_inner());
        if logins.len() >= MAX_REMEMBERED_LOGINS {
            logins.retain(|_, (_, expires, _)| *expires > now);
            if logins.len() >= MAX_REMEMBERED_LOGINS {
                logins.clear();
            }
        }
        logins.insert(bearer.to_string(), (claims.sub.clone(), claims.exp, claims.sso.clone()));
        Ok((claims.sub, claims.exp, claims.sso))
    }

    /// The user, expiry and sign-in of a login token that verified before
    /// and has not expired.
    fn remembered_login(&self, bearer: &str) -> Option<VerifiedLogin> {
        let logins = self.logins.lock().unwrap_or_else(|p| p.into_inner());
        let (user, expires, sso) = logins.get(bearer)?;
        (*expires > Utc::now().timestamp()).then(|| (user.clone(), *expires, sso.clone()))
    }

    async fn authenticate_api_token(&self, bearer: &str, reuse: &mut Reuse) -> Result<Caller, AuthError> {
        let (id, secret) = api_token::parse(bearer).ok_or(AuthError::Unauthorized("invalid token"))?;
        let record = self.token_record(id, reuse).await?.ok_or(AuthError::Unauthorized("invalid token"))?;
        if !api_token::matches(secret, &record.secret_hash) {
            return Err(AuthError::Unauthorized("invalid token"));
        }
        let now = Utc::now();
        if record.expires_at <= now {
            return Err(AuthError::Unauthorized("token expired"));
        }
        reuse.expires(record.expires_at);
        let role = self.role_of(&record.user, reuse).await?;
        match record.last_used_at {
            Some(used) if now - used <= TOUCH_INTERVAL => reuse.expires(used + TOUCH_INTERVAL),
            _ => {
                self.touch(&record, now);
                reuse.expires(now + TOUCH_INTERVAL);
            }
        }
        Ok(Caller::local(&record.user, role, Credential::ApiToken { id: record.id }))
    }

    /// Records a token's use in the background.
    fn touch(&self, record: &TokenRecord, now: DateTime<Utc>) {
        if let Some((cached, _)) =
            self.api_tokens.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&record.id)
        {
            cached.last_used_at = Some(now);
        }
        let accounts = self.accounts.clone();
        let id = record.id.clone();
        tokio::spawn(async move {
            if let Err(err) = accounts.touch_token(id, now).await {
                tracing::warn!(error = %err, "could not record a token's use");
            }
        });
    }

    async fn token_record(&self, id: &str, reuse: &mut Reuse) -> Result<Option<TokenRecord>, AuthError> {
        let fresh = |at: &Instant| at.elapsed() < self.cache_ttl;
        if let Some((record, at)) = self.api_tokens.lock().unwrap_or_else(|p| p.into_inner()).get(id)
            && fresh(at)
        {
            reuse.read_at(*at, self.cache_ttl);
            return Ok(Some(record.clone()));
        }
        let record = self.accounts.token(id.to_string()).await?;
        let mut cache = self.api_tokens.lock().unwrap_or_else(|p| p.into_inner());
        match &record {
            Some(record) => cache.insert(id.to_string(), (record.clone(), Instant::now())),
            None => cache.remove(id),
        };
        Ok(record)
    }

    /// The global role of the local user `user`, `None` when it has none.
    async fn role_of(&self, user: &str, reuse: &mut Reuse) -> Result<Option<UserRole>, AuthError> {
        if let Some((role, at)) = self.roles.lock().unwrap_or_else(|p| p.into_inner()).get(user)
            && at.elapsed() < self.cache_ttl
        {
            reuse.read_at(*at, self.cache_ttl);
            return Ok(*role);
        }
        let record = self.accounts.user(user.to_string()).await?;
        let role = record.map(|r| r.role).ok_or(AuthError::Unauthorized("invalid token"))?;
        self.roles.lock().unwrap_or_else(|p| p.into_inner()).insert(user.to_string(), (role, Instant::now()));
        Ok(role)
    }

    /// Drops what is cached about `user` and its tokens.
    fn forget_user(&self, user: &str) {
        self.roles.lock().unwrap_or_else(|p| p.into_inner()).remove(user);
        self.api_tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, (record, _)| record.user != user);
        // After the caches are cleared, as `forget_grants` does.
        self.seen.forget_all();
    }

    /// Creates a user with a bcrypt-hashed password.
    pub async fn create_user(
        &self,
        name: &str,
        role: impl Into<Option<UserRole>>,
        password: &SecretString,
    ) -> Result<UserRecord, AuthError> {
        let hash = password::hash("spec.password", password).await?;
        let now = Utc::now();
        let record = UserRecord {
            name: name.into(),
            role: role.into(),
            password_hash: hash,
            resource_version: 1,
            created_at: now,
            updated_at: now,
        };
        Ok(self.accounts.create_user(record).await?)
    }

    /// Changes a user's role or password; the change applies to the next request.
    pub async fn update_user(
        &self,
        name: &str,
        role: impl Into<Option<UserRole>>,
        password: Option<&SecretString>,
        expected: Option<u64>,
    ) -> Result<UserRecord, AuthError> {
        let password_hash = match password {
            Some(password) => Some(password::hash("spec.password", password).await?),
            None => None,
        };
        let change = UserChange { role: Some(role.into()), password_hash };
        let updated = self.accounts.update_user(name.into(), change, expected).await;
        self.forget_user(name);
        Ok(updated?)
    }

    /// Deletes a user and its tokens; they stop working at once.
    pub async fn delete_user(&self, name: &str) -> Result<(), AuthError> {
        let deleted = self.accounts.delete_user(name.into()).await;
        self.forget_user(name);
        Ok(deleted?)
    }

    /// Makes an API token for `user` that lives `hours`. The value is in the
    /// returned [`NewToken`] and nowhere else. A user who holds as many
    /// tokens as one may, expired ones included, gets
    /// [`AuthError::TooManyTokens`]. Creates on one server are counted one
    /// at a time; replicas creating for one user at the same moment may
    /// pass the cap by one each.
    pub async fn create_token(
        &self,
        user: &str,
        name: &str,
        hours: u64,
    ) -> Result<(NewToken, TokenRecord), AuthError> {
        let _counting = self.token_creates.lock().await;
        if self.accounts.tokens(user.into()).await?.len() >= self.tokens_per_user {
            return Err(AuthError::TooManyTokens { user: user.into(), cap: self.tokens_per_user });
        }
        let token = api_token::generate()?;
        let now = Utc::now();
        let record = TokenRecord {
            id: token.id.clone(),
            user: user.into(),
            name: name.into(),
            secret_hash: token.secret_hash.clone(),
            expires_at: now + chrono::Duration::hours(hours as i64),
            created_at: now,
            last_used_at: None,
        };
        let record = self.accounts.create_token(record).await?;
        Ok((token, record))
    }

    /// Revokes a token; it stops working at once.
    pub async fn revoke_token(&self, user: &str, name: &str) -> Result<(), AuthError> {
        let revoked = self.accounts.delete_token(user.into(), name.into()).await;
        self.api_tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, (r, _)| !(r.user == user && r.name == name));
        self.seen.forget_all();
        Ok(revoked?)
    }

    /// The store behind the authenticator, for reads.
    pub fn accounts(&self) -> &Arc<dyn Accounts> {
        &self.accounts
    }
}
