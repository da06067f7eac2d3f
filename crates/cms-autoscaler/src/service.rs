//! The `CloudProvider` gRPC service: each call's caller is the identity of
//! its client certificate (`tls.rs`), and every call answers about that
//! caller's tenant alone. The scaling calls are recorded in the audit log.

use std::sync::Arc;
use std::time::Instant;

use cms_store::Audit;
use tonic::{Request, Response, Status};

use crate::audit;
use crate::error::AutoscalerError;
use crate::groups::{Backend, Instance, NodeName, State};
use crate::identity::Identity;
use crate::proto::externalgrpc::cloud_provider_server::CloudProvider;
use crate::proto::externalgrpc::instance_status::InstanceState;
use crate::proto::externalgrpc::*;
use crate::rate::Rate;
use crate::tls::PeerInfo;

/// The label nodes with an NVIDIA GPU carry (NVIDIA's GPU feature discovery).
pub(crate) const GPU_LABEL: &str = "nvidia.com/gpu.present";
/// The instance error class of an error that is not lack of resources
/// (the autoscaler's `OtherErrorClass`).
const OTHER_ERROR_CLASS: i32 = 99;
/// How many nodes one delete may name.
const MAX_NODES_PER_DELETE: usize = 1000;

/// The service.
pub(crate) struct Service {
    pub(crate) backend: Backend,
    pub(crate) audit: Arc<dyn Audit>,
    pub(crate) rate: Rate,
}

impl Service {
    /// The caller named by its certificate, within its tenant's rate.
    fn caller<T>(&self, request: &Request<T>) -> Result<Identity, Status> {
        let peer = request.extensions().get::<PeerInfo>();
        let identity = match peer.map(|peer| peer.identity.clone()) {
            Some(Ok(identity)) => identity,
            Some(Err(why)) => return Err(Status::unauthenticated(why)),
            None => return Err(Status::unauthenticated("no client certificate")),
        };
        if !self.rate.admit(&identity.tenant, Instant::now()) {
            return Err(Status::resource_exhausted(format!(
                "over {} calls a second: slow down",
                crate::rate::CALLS_PER_SECOND
            )));
        }
        Ok(identity)
    }
}

fn node_name(node: Option<ExternalGrpcNode>) -> Result<NodeName, Status> {
    let node = node.ok_or_else(|| Status::invalid_argument("node is required"))?;
    if node.provider_id.is_empty() && node.name.is_empty() {
        return Err(Status::invalid_argument("the node has neither a providerID nor a name"));
    }
    Ok(NodeName { provider_id: node.provider_id, name: node.name })
}

fn group_message(group: &cms_model::NodeGroup) -> NodeGroup {
    let (min, max) = group.spec.autoscaling.map_or((0, 0), |limits| (limits.min_count, limits.max_count));
    NodeGroup {
        id: group.metadata.name.clone(),
        min_size: min.try_into().unwrap_or(i32::MAX),
        max_size: max.try_into().unwrap_or(i32::MAX),
        debug: format!(
            "{} ({}), {} machines of {min}..={max}",
            group.metadata.name, group.spec.provider_class, group.spec.count
        ),
    }
}

fn instance_message(instance: Instance) -> crate::proto::externalgrpc::Instance {
    let state = match instance.state {
        State::Creating => InstanceState::InstanceCreating,
        State::Running => InstanceState::InstanceRunning,
        State::Deleting => InstanceState::InstanceDeleting,
    };
    let error_info = instance.error.map(|message| InstanceErrorInfo {
        error_code: "MachineError".into(),
        error_message: message,
        instance_error_class: OTHER_ERROR_CLASS,
    });
    crate::proto::externalgrpc::Instance {
        id: instance.id,
        status: Some(InstanceStatus { instance_state: state.into(), error_info }),
    }
}

impl Service {
    /// Answers a scaling call and records it.
    async fn audited(
        &self,
        identity: &Identity,
        method: &str,
        group: &str,
        result: Result<cms_model::NodeGroup, AutoscalerError>,
    ) -> Result<(), Status> {
        // A call that named no group of the tenant (or a malformed one)
        // changed nothing and is not recorded, so that no caller fills
        // the log with refusals of its own making.
        let named_nothing = matches!(
            result,
            Err(AutoscalerError::NotFound(_)
                | AutoscalerError::Invalid(_)
                | AutoscalerError::Unauthenticated(_))
        );
        if !named_nothing {
            audit::record(&self.audit, identity, method, group, result.as_ref().map(|_| ())).await;
        }
        match result {
            Ok(written) => {
                tracing::info!(
                    tenant = %identity.tenant, group, count = written.spec.count, "the autoscaler scaled a node group ({method})"
                );
                Ok(())
            }
            Err(err) => Err(err.into()),
        }
    }
}

#[tonic::async_trait]
impl CloudProvider for Service {
    async fn node_groups(
        &self,
        request: Request<NodeGroupsRequest>,
    ) -> Result<Response<NodeGroupsResponse>, Status> {
        let identity = self.caller(&request)?;
        let groups = self.backend.groups(&identity)?;
        Ok(Response::new(NodeGroupsResponse { node_groups: groups.iter().map(group_message).collect() }))
    }

    async fn node_group_for_node(
        &self,
        request: Request<NodeGroupForNodeRequest>,
    ) -> Result<Response<NodeGroupForNodeResponse>, Status> {
        let identity = self.caller(&request)?;
        let node = node_name(request.into_inner().node)?;
        let group = self.backend.group_for_node(&identity, &node).await?;
        // A node of no autoscaled group is answered with an empty id.
        let node_group = Some(group.as_ref().map(group_message).unwrap_or_default());
        Ok(Response::new(NodeGroupForNodeResponse { node_group }))
    }

    async fn pricing_node_price(
        &self,
        request: Request<PricingNodePriceRequest>,
    ) -> Result<Response<PricingNodePriceResponse>, Status> {
        let identity = self.caller(&request)?;
        let request = request.into_inner();
        let node = node_name(request.node)?;
        let seconds = |time: Option<prost_types::Timestamp>| {
            time.map(|time| time.seconds as f64 + f64::from(time.nanos) / 1e9)
        };
        let (Some(start), Some(end)) = (seconds(request.start_timestamp), seconds(request.end_timestamp))
        else {
            return Err(Status::invalid_argument("startTimestamp and endTimestamp are required"));
        };
        if end < start {
            return Err(Status::invalid_argument("endTimestamp is before startTimestamp"));
        }
        let hourly = self.backend.hourly_price(&identity, &node).await?;
        Ok(Response::new(PricingNodePriceResponse { price: hourly * (end - start) / 3600.0 }))
    }

    async fn pricing_pod_price(
        &self,
        request: Request<PricingPodPriceRequest>,
    ) -> Result<Response<PricingPodPriceResponse>, Status> {
        self.caller(&request)?;
        Err(Status::unimplemented("pods are not priced: only nodes of groups that set a price are"))
    }

    async fn gpu_label(
        &self,
        request: Request<GpuLabelRequest>,
    ) -> Result<Response<GpuLabelResponse>, Status> {
        self.caller(&request)?;
        Ok(Response::new(GpuLabelResponse { label: GPU_LABEL.into() }))
    }

    async fn get_available_gpu_types(
        &self,
        request: Request<GetAvailableGpuTypesRequest>,
    ) -> Result<Response<GetAvailableGpuTypesResponse>, Status> {
        self.caller(&request)?;
        Ok(Response::new(GetAvailableGpuTypesResponse::default()))
    }

    async fn cleanup(&self, request: Request<CleanupRequest>) -> Result<Response<CleanupResponse>, Status> {
        self.caller(&request)?;
        Ok(Response::new(CleanupResponse {}))
    }

    async fn refresh(&self, request: Request<RefreshRequest>) -> Result<Response<RefreshResponse>, Status> {
        // Every call reads the store as it is; what needs doing before the
        // autoscaler's loop is giving Nodes their provider ids.
        let identity = self.caller(&request)?;
        self.backend.refresh(&identity).await?;
        Ok(Response::new(RefreshResponse {}))
    }

    async fn node_group_target_size(
        &self,
        request: Request<NodeGroupTargetSizeRequest>,
    ) -> Result<Response<NodeGroupTargetSizeResponse>, Status> {
        let identity = self.caller(&request)?;
        let group = self.backend.group(&identity, &request.into_inner().id)?;
        let target_size = group.spec.count.try_into().unwrap_or(i32::MAX);
        Ok(Response::new(NodeGroupTargetSizeResponse { target_size }))
    }

    async fn node_group_increase_size(
        &self,
        request: Request<NodeGroupIncreaseSizeRequest>,
    ) -> Result<Response<NodeGroupIncreaseSizeResponse>, Status> {
        let identity = self.caller(&request)?;
        let request = request.into_inner();
        let result = self.backend.increase(&identity, &request.id, request.delta).await;
        self.audited(&identity, "NodeGroupIncreaseSize", &request.id, result).await?;
        Ok(Response::new(NodeGroupIncreaseSizeResponse {}))
    }

    async fn node_group_delete_nodes(
        &self,
        request: Request<NodeGroupDeleteNodesRequest>,
    ) -> Result<Response<NodeGroupDeleteNodesResponse>, Status> {
        let identity = self.caller(&request)?;
        let request = request.into_inner();
        if request.nodes.len() > MAX_NODES_PER_DELETE {
            return Err(Status::invalid_argument(format!("at most {MAX_NODES_PER_DELETE} nodes at once")));
        }
        let nodes: Vec<NodeName> =
            request.nodes.into_iter().map(|node| node_name(Some(node))).collect::<Result<_, _>>()?;
        let result = self.backend.delete_nodes(&identity, &request.id, &nodes).await;
        self.audited(&identity, "NodeGroupDeleteNodes", &request.id, result).await?;
        Ok(Response::new(NodeGroupDeleteNodesResponse {}))
    }

    async fn node_group_decrease_target_size(
        &self,
        request: Request<NodeGroupDecreaseTargetSizeRequest>,
    ) -> Result<Response<NodeGroupDecreaseTargetSizeResponse>, Status> {
        let identity = self.caller(&request)?;
        let request = request.into_inner();
        let result = self.backend.decrease_target(&identity, &request.id, request.delta).await;
        self.audited(&identity, "NodeGroupDecreaseTargetSize", &request.id, result).await?;
        Ok(Response::new(NodeGroupDecreaseTargetSizeResponse {}))
    }

    async fn node_group_nodes(
        &self,
        request: Request<NodeGroupNodesRequest>,
    ) -> Result<Response<NodeGroupNodesResponse>, Status> {
        let identity = self.caller(&request)?;
        let instances = self.backend.instances(&identity, &request.into_inner().id).await?;
        Ok(Response::new(NodeGroupNodesResponse {
            instances: instances.into_iter().map(instance_message).collect(),
        }))
    }

    async fn node_group_template_node_info(
        &self,
        request: Request<NodeGroupTemplateNodeInfoRequest>,
    ) -> Result<Response<NodeGroupTemplateNodeInfoResponse>, Status> {
        let identity = self.caller(&request)?;
        let node_bytes = self.backend.template(&identity, &request.into_inner().id).await?;
        Ok(Response::new(NodeGroupTemplateNodeInfoResponse { node_bytes, resource_slice_bytes: Vec::new() }))
    }

    async fn node_group_get_options(
        &self,
        request: Request<NodeGroupAutoscalingOptionsRequest>,
    ) -> Result<Response<NodeGroupAutoscalingOptionsResponse>, Status> {
        // Groups set no options of their own: the autoscaler's defaults hold.
        let identity = self.caller(&request)?;
        let request = request.into_inner();
        self.backend.group(&identity, &request.id)?;
        let defaults = request.defaults.ok_or_else(|| Status::invalid_argument("defaults are required"))?;
        Ok(Response::new(NodeGroupAutoscalingOptionsResponse {
            node_group_autoscaling_options: Some(defaults),
        }))
    }
}
