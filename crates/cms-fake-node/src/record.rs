//! A call as JSON, the shape the `cms-fake-node` binary prints and tests read.

use serde_json::{Value, json};

use crate::service::{Call, Payload};

impl Call {
    /// The call as JSON: `{seq, atMillis, method, node, clientCertificate,
    /// payload}`, as the `cms-fake-node` binary prints it.
    pub fn to_json(&self) -> Value {
        let payload = match &self.payload {
            Payload::Empty => json!({}),
            Payload::ApplyConfiguration(request) => json!({
                "data": String::from_utf8_lossy(&request.data),
                "mode": request.mode,
                "dryRun": request.dry_run,
            }),
            Payload::Upgrade(request) => json!({
                "image": request.image,
                "preserve": request.preserve,
                "stage": request.stage,
                "force": request.force,
            }),
            Payload::Bootstrap(request) => json!({
                "recoverEtcd": request.recover_etcd,
                "recoverSkipHashCheck": request.recover_skip_hash_check,
            }),
            Payload::EtcdRecover(upload) => json!({
                "bytes": upload.bytes,
                "sha256": upload.sha256,
                "complete": upload.complete,
            }),
            Payload::EtcdMemberList(request) => json!({"queryLocal": request.query_local}),
            Payload::EtcdRemoveMemberById(request) => json!({"memberId": request.member_id}),
            Payload::Logs(request) => json!({
                "namespace": request.namespace,
                "id": request.id,
                "follow": request.follow,
                "tailLines": request.tail_lines,
            }),
            Payload::Dmesg(request) => json!({"follow": request.follow, "tail": request.tail}),
            Payload::Reset(request) => {
                json!({"graceful": request.graceful, "reboot": request.reboot, "mode": request.mode})
            }
        };
        let at = self.at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        json!({
            "seq": self.seq,
            "atMillis": at.as_millis() as u64,
            "method": self.method.name(),
            "node": self.node,
            "clientCertificate": self.client_certificate,
            "payload": payload,
        })
    }
}
