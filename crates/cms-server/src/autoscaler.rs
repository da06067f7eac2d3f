//! The cluster autoscaler's `externalgrpc` service, when
//! `CMS_AUTOSCALER_LISTEN` is set: the autoscaler CA is opened (made on the
//! first start) from the store, the port bound, a serving certificate
//! issued for the address autoscalers dial, and the service started beside
//! the HTTP API, stopping with it.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use cms_autoscaler::{AutoscalerServer, Backend};
use cms_service::AutoscalerAccess;
use cms_store::{Audit, SqlStore};
use cms_talos::CertificateAuthority;
use cms_tenancy::{KubeClient, Secrets, Tenancy};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::settings::Settings;

/// The service, bound but not yet serving.
pub(crate) struct Prepared {
    listener: TcpListener,
    ca: CertificateAuthority,
    address: String,
}

impl Prepared {
    /// What the API needs to hand out identities.
    pub(crate) fn access(&self) -> AutoscalerAccess {
        AutoscalerAccess { ca: self.ca.clone(), address: self.address.clone() }
    }

    /// Serves until `shutdown`.
    pub(crate) fn start(
        self,
        tenancy: Tenancy,
        kube: Arc<dyn KubeClient>,
        audit: Arc<dyn Audit>,
        shutdown: CancellationToken,
    ) -> anyhow::Result<AutoscalerServer> {
        let host = host_and_port(&self.address).map(|(host, _)| host).unwrap_or("localhost");
        let mut names = vec![host, "localhost", "127.0.0.1"];
        names.dedup();
        let tls = cms_autoscaler::server_config(&self.ca, &names).context("the autoscaler service's TLS")?;
        let server =
            AutoscalerServer::start(self.listener, tls, Backend::new(tenancy, kube), audit, shutdown)
                .context("could not start the autoscaler service")?;
        tracing::info!(address = %self.address, "the autoscaler service listens on {}", server.addr());
        Ok(server)
    }
}

/// Opens the autoscaler CA and binds the port, when the service is on.
pub(crate) async fn prepare(
    settings: &Settings,
    store: &SqlStore,
    secrets: &Secrets,
) -> anyhow::Result<Option<Prepared>> {
    let Some(listen) = &settings.autoscaler_listen else { return Ok(None) };
    let listen: SocketAddr = listen.parse().context("CMS_AUTOSCALER_LISTEN")?;
    let ca = cms_tenancy::autoscaler_ca(store, secrets.sealer())
        .await
        .context("could not open the autoscaler CA")?;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("the autoscaler service could not listen on {listen}"))?;
    let bound = listener.local_addr().context("the autoscaler service's address")?;
    let address = match &settings.autoscaler_address {
        Some(address) => address.clone(),
        None if bound.ip().is_unspecified() => format!("localhost:{}", bound.port()),
        None => bound.to_string(),
    };
    Ok(Some(Prepared { listener, ca, address }))
}

/// The host and port of `host:port` (`[IPv6]:port` too); `None` when it is
/// not one.
pub(crate) fn host_and_port(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|port| *port > 0)?;
    let host = host.strip_prefix('[').and_then(|host| host.strip_suffix(']')).unwrap_or(host);
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':');
    (!host.is_empty() && host.len() <= 253 && host.bytes().all(plain)).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_host_and_port() {
        assert_eq!(host_and_port("cms.example.com:8086"), Some(("cms.example.com", 8086)));
        assert_eq!(host_and_port("[::1]:8086"), Some(("::1", 8086)));
        assert_eq!(host_and_port("10.0.0.1:1"), Some(("10.0.0.1", 1)));
        for bad in ["cms.example.com", "cms:0", ":8086", "a b:1", "host:99999", "x/y:1"] {
            assert_eq!(host_and_port(bad), None, "{bad}");
        }
    }
}
