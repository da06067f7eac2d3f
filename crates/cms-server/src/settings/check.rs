//! The checks of [`Settings`] at load: each value in its range, and the
//! values that hold more (URLs, keys, identity providers) parsed once, so
//! that a mistake stops the server with the setting's name.

use std::time::Duration;

use anyhow::bail;
use secrecy::ExposeSecret;

use super::Settings;

impl Settings {
    pub(super) fn check(&self) -> anyhow::Result<()> {
        let url = self.database_url();
        if !url.starts_with("sqlite:") && !self.is_postgres() {
            bail!(
                "CMS_DATABASE_URL must be a sqlite:// or postgres:// URL, got one starting with {:?}",
                scheme(&url)
            );
        }
        if let Some(url) = &self.backup_url
            && !url.starts_with("s3://")
        {
            bail!("CMS_BACKUP_URL must be an s3:// URL, got one starting with {:?}", scheme(url));
        }
        if self.backup_schedule_tick < Duration::from_millis(100) {
            anyhow::bail!("CMS_BACKUP_SCHEDULE_TICK must be at least 100ms");
        }
        if self.lease_ttl < Duration::from_secs(1) {
            bail!("CMS_LEASE_TTL must be at least 1s");
        }
        if self.watches_per_identity == 0 {
            bail!(
                "CMS_WATCHES_PER_IDENTITY must be at least 1: the number of watch streams one user or token may hold open"
            );
        }
        if self.request_rate_per_identity > 0 && self.request_burst_per_identity == 0 {
            bail!(
                "CMS_REQUEST_BURST_PER_IDENTITY must be at least 1 while CMS_REQUEST_RATE_PER_IDENTITY is set \
                 (0 turns the rate off)"
            );
        }
        if self.login_concurrency == 0 {
            bail!(
                "CMS_LOGIN_CONCURRENCY must be at least 1: the number of password checks of logins run at once"
            );
        }
        if self.tokens_per_user == 0 {
            bail!("CMS_TOKENS_PER_USER must be at least 1: the number of API tokens one user may hold");
        }
        for cidr in self.admin_cidrs() {
            if cidr.parse::<ipnet::IpNet>().is_err() {
                bail!("CMS_CLOUD_ADMIN_CIDRS must hold CIDRs such as 10.0.0.0/8, got {cidr:?}");
            }
        }
        if let Some(listen) = &self.autoscaler_listen
            && listen.parse::<std::net::SocketAddr>().is_err()
        {
            bail!(
                "CMS_AUTOSCALER_LISTEN must be an IP address and port such as 0.0.0.0:8086, got {listen:?}"
            );
        }
        if let Some(address) = &self.autoscaler_address
            && crate::autoscaler::host_and_port(address).is_none()
        {
            bail!("CMS_AUTOSCALER_ADDRESS must be host:port such as cms.example.com:8086, got {address:?}");
        }
        if self.body_limit == 0 {
            bail!("CMS_BODY_LIMIT must be at least 1 byte");
        }
        if self.watch_heartbeat.is_zero() {
            bail!("CMS_WATCH_HEARTBEAT must be longer than zero");
        }
        if self.watch_bookmark_interval < Duration::from_millis(100) {
            bail!("CMS_WATCH_BOOKMARK_INTERVAL must be at least 100ms");
        }
        if self.send_timeout < Duration::from_millis(1)
            || self.send_timeout > Duration::from_secs(u32::MAX as u64 / 1000)
        {
            bail!("CMS_SEND_TIMEOUT must be between 1ms and 49 days");
        }
        if self.watch_buffer == 0 {
            bail!("CMS_WATCH_BUFFER must be at least 1");
        }
        if self.audit_retention == 0 {
            bail!("CMS_AUDIT_RETENTION must be at least 1");
        }
        if self.max_group_count == 0 {
            bail!("CMS_MAX_GROUP_COUNT must be at least 1: the largest count of one node group");
        }
        if self.max_machines_per_tenant == 0 {
            bail!(
                "CMS_MAX_MACHINES_PER_TENANT must be at least 1: the sum of a tenant's node groups' counts"
            );
        }
        if u64::from(self.max_group_count) > self.max_machines_per_tenant {
            bail!(
                "CMS_MAX_GROUP_COUNT ({}) must not be over CMS_MAX_MACHINES_PER_TENANT ({}): one node group \
                 is part of a tenant",
                self.max_group_count,
                self.max_machines_per_tenant
            );
        }
        if self.login_token_ttl.is_zero() {
            bail!("CMS_LOGIN_TOKEN_TTL must be longer than zero");
        }
        if let Some(key) = &self.login_signing_key
            && key.expose_secret().len() < cms_auth::LoginTokens::MIN_KEY_BYTES
        {
            bail!("CMS_LOGIN_SIGNING_KEY must be at least {} bytes", cms_auth::LoginTokens::MIN_KEY_BYTES);
        }
        if self.client_cert_ttl.is_zero() || self.client_cert_ttl > self.client_cert_max_ttl {
            bail!("CMS_CLIENT_CERT_TTL must be longer than zero and at most CMS_CLIENT_CERT_MAX_TTL");
        }
        if let Err(err) = cms_talos::TalosVersion::supported(&self.default_talos_version) {
            bail!("CMS_DEFAULT_TALOS_VERSION: {err}");
        }
        if self.tofu_timeout.is_zero() || self.resync_interval.is_zero() {
            bail!("CMS_TOFU_TIMEOUT and CMS_RESYNC_INTERVAL must be longer than zero");
        }
        if self.rekey_poll.is_zero() || self.rekey_batch == 0 {
            bail!("CMS_REKEY_POLL must be longer than zero and CMS_REKEY_BATCH at least 1");
        }
        crate::sealing::other_keys(self)?;
        if self.reconcile_concurrency == 0 {
            bail!("CMS_RECONCILE_CONCURRENCY must be at least 1");
        }
        if self.drift_concurrency == 0 || self.drift_plans_per_interval == 0 {
            bail!(
                "CMS_DRIFT_CONCURRENCY and CMS_DRIFT_PLANS_PER_INTERVAL must be at least 1 (CMS_DRIFT_INTERVAL=0 turns drift detection off)"
            );
        }
        if let Some(url) = &self.public_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            bail!("CMS_PUBLIC_URL must be an http:// or https:// URL, got {url:?}");
        }
        crate::identity::options(self)?;
        if self.insecure_disable_auth && !self.listens_on_loopback() {
            bail!("CMS_INSECURE_DISABLE_AUTH is allowed only when CMS_LISTEN is a loopback address");
        }
        Ok(())
    }

    fn listens_on_loopback(&self) -> bool {
        match self.listen.parse::<std::net::SocketAddr>() {
            Ok(addr) => addr.ip().is_loopback(),
            Err(_) => self.listen.starts_with("localhost:"),
        }
    }
}

/// The part of a URL before `://`, which holds no credentials.
fn scheme(url: &str) -> &str {
    url.split_once("://").map_or("", |(scheme, _)| scheme)
}
