//! The Kubernetes cluster autoscaler's `externalgrpc` cloud provider, served
//! by `cms`, so that a tenant's own autoscaler grows and shrinks its node
//! groups through the same safe paths as a person.
//!
//! - **Who calls** (`identity.rs`, `tls.rs`): TLS with client certificates
//!   from the service's autoscaler CA. A certificate names one tenant and
//!   that tenant's creation time; its caller sees that tenant alone, and an
//!   error never names another tenant's objects.
//! - **What it sees and does** (`groups.rs`): the tenant's worker groups
//!   with `spec.autoscaling`, their target sizes and instances; a scale-up
//!   or scale-down is a versioned write of the group through
//!   `cms_tenancy::Tenancy`, within the group's limits, and a named delete
//!   lists its machines in `spec.removedMachines`, so that the reconciler
//!   drains, resets and removes exactly those.
//! - **What it records** (`audit.rs`): every scaling call, under
//!   `autoscaler:<tenant>`.
//! - The messages are the upstream `externalgrpc.proto`, vendored as it is;
//!   the template node is a `v1.Node` in Kubernetes' own protobuf encoding
//!   (`proto/k8s/node.proto`, the fields a template carries, with
//!   Kubernetes' field numbers).

use std::net::SocketAddr;
use std::sync::Arc;

use cms_store::Audit;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

mod audit;
mod error;
mod groups;
mod identity;
mod rate;
mod service;
mod template;
mod tls;

#[cfg(test)]
mod tests;

pub use error::AutoscalerError;
pub use groups::Backend;
pub use identity::{Identity, ORGANIZATION_PREFIX};
pub use tls::server_config;

/// The generated messages and service.
#[allow(missing_docs, unreachable_pub, missing_debug_implementations, clippy::all, rustdoc::all)]
pub mod proto {
    /// The autoscaler's `externalgrpc` API.
    pub mod externalgrpc {
        tonic::include_proto!("clusterautoscaler.cloudprovider.v1.externalgrpc");
    }
    /// Kubernetes' `v1.Node`, in part.
    pub mod k8s {
        tonic::include_proto!("k8s.io.api.core.v1");
    }
}

/// The scheme of the ids of instances whose provider id is not known:
/// `cms://<tenant>/<machine>`.
pub const PLACEHOLDER_SCHEME: &str = "cms://";

/// How long one call may take.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// How many calls one connection may have in flight.
const CALLS_PER_CONNECTION: usize = 16;

/// The autoscaler service, bound and serving.
#[derive(Debug)]
pub struct AutoscalerServer {
    addr: SocketAddr,
    serve: tokio::task::JoinHandle<Result<(), AutoscalerError>>,
}

impl AutoscalerServer {
    /// Serves `backend` on `listener` with `tls` until `shutdown`; the
    /// scaling calls are recorded in `audit`.
    pub fn start(
        listener: TcpListener,
        tls: Arc<ServerConfig>,
        backend: Backend,
        audit: Arc<dyn Audit>,
        shutdown: CancellationToken,
    ) -> Result<AutoscalerServer, AutoscalerError> {
        let addr = listener.local_addr().map_err(|err| AutoscalerError::Serve(err.to_string()))?;
        let (sender, receiver) = mpsc::channel(64);
        tokio::spawn(tls::accept_loop(listener, TlsAcceptor::from(tls), sender, shutdown.clone()));
        let service = service::Service { backend, audit, rate: rate::Rate::default() };
        let server = proto::externalgrpc::cloud_provider_server::CloudProviderServer::new(service);
        let serve = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .timeout(CALL_TIMEOUT)
                .concurrency_limit_per_connection(CALLS_PER_CONNECTION)
                .add_service(server)
                .serve_with_incoming_shutdown(ReceiverStream::new(receiver), shutdown.cancelled_owned())
                .await
                .map_err(|err| AutoscalerError::Serve(err.to_string()))
        });
        Ok(AutoscalerServer { addr, serve })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until it stops, after its shutdown.
    pub async fn stopped(self) -> Result<(), AutoscalerError> {
        self.serve.await.map_err(|err| AutoscalerError::Serve(err.to_string()))?
    }
}
