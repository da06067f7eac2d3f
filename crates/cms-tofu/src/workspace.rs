//! A tenant's workspace as data: the machines it should hold, turned into
//! `main.tf.json` by the provider modules. Nothing here is templated text;
//! every file is a `serde_json` value.

use cms_model::{MetalHost, Provider, Role};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::providers::{metal, oci, openstack};
use crate::{TofuError, user_data};

/// The name of the generated configuration file.
pub const MAIN_FILE: &str = "main.tf.json";

/// One machine the workspace should hold. Its `Debug` leaves the user
/// data out.
#[derive(Clone, PartialEq)]
pub struct MachinePlan {
    /// The machine id, `<group>-<index>`: stable, URL-safe, and the
    /// resource name in the workspace.
    pub id: String,
    pub group: String,
    pub index: u32,
    pub role: Role,
    pub provider: Provider,
    pub shape: String,
    /// The node group's `providerConfig`.
    pub provider_config: Map<String, Value>,
    /// For `metal`: the host this machine is.
    pub host: Option<MetalHost>,
    /// For cloud providers: the rendered machine config, the instance's
    /// user data. It never enters `main.tf.json`: the tool gets it in its
    /// environment (`user_data.rs`).
    pub user_data: Option<String>,
}

impl std::fmt::Debug for MachinePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MachinePlan")
            .field("id", &self.id)
            .field("group", &self.group)
            .field("index", &self.index)
            .field("role", &self.role)
            .field("provider", &self.provider)
            .field("shape", &self.shape)
            .field("provider_config", &self.provider_config)
            .field("host", &self.host)
            .field("user_data", &self.user_data.as_ref().map(|_| crate::REDACTED))
            .finish()
    }
}

/// What one tenant's workspace should hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkspacePlan {
    pub tenant: String,
    pub machines: Vec<MachinePlan>,
}

impl WorkspacePlan {
    /// The resource address of a machine, as `-replace` takes it.
    pub fn address(&self, id: &str) -> Option<String> {
        let machine = self.machines.iter().find(|machine| machine.id == id)?;
        Some(format!("{}.{}", resource_type(machine.provider), machine.id))
    }

    /// The generated `main.tf.json`. It refers to the machines' user data
    /// through a variable and holds none of it.
    pub fn render(&self) -> Result<Value, TofuError> {
        let mut resources: Map<String, Value> = Map::new();
        let mut data: Map<String, Value> = Map::new();
        let mut providers: Map<String, Value> = Map::new();
        let mut required: Map<String, Value> = Map::new();
        let mut variables: Map<String, Value> = Map::new();
        for machine in &self.machines {
            let body = match machine.provider {
                Provider::Metal => metal::instance(machine)?,
                Provider::Oci => {
                    oci::setup(machine, &mut providers, &mut required, &mut variables, &mut data)?;
                    oci::instance(&self.tenant, machine)?
                }
                Provider::OpenStack => {
                    openstack::setup(&mut providers, &mut required);
                    openstack::instance(&self.tenant, machine)?
                }
            };
            if machine.provider != Provider::Metal {
                variables.insert(user_data::VARIABLE.into(), user_data::declaration());
            }
            let kind =
                resources.entry(resource_type(machine.provider)).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(kind) = kind {
                kind.insert(machine.id.clone(), body);
            }
        }
        let mut root = Map::new();
        if !required.is_empty() {
            root.insert("terraform".into(), json!({ "required_providers": required }));
        }
        if !providers.is_empty() {
            root.insert("provider".into(), Value::Object(providers));
        }
        if !variables.is_empty() {
            root.insert("variable".into(), Value::Object(variables));
        }
        if !data.is_empty() {
            root.insert("data".into(), Value::Object(data));
        }
        if !resources.is_empty() {
            root.insert("resource".into(), Value::Object(resources));
        }
        Ok(Value::Object(root))
    }
}

/// The resource type that stands for a machine of `provider`.
pub fn resource_type(provider: Provider) -> String {
    match provider {
        Provider::Metal => "terraform_data",
        Provider::Oci => "oci_core_instance",
        Provider::OpenStack => "openstack_compute_instance_v2",
    }
    .to_string()
}

/// The hash of a rendered workspace together with the digest of the user
/// data it is applied with (empty for none) and the fingerprint of the
/// credentials it runs with: equal hashes need no run. A workspace without
/// user data hashes as it did before user data left the file.
pub fn inputs_hash(rendered: &[u8], user_data_digest: &str, credentials_fingerprint: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(rendered);
    hasher.update(b"\0");
    hasher.update(credentials_fingerprint.as_bytes());
    if !user_data_digest.is_empty() {
        hasher.update(b"\0user data\0");
        hasher.update(user_data_digest.as_bytes());
    }
    hex::encode(hasher.finalize())
}
