//! What the engine tests share: where the real engine is, a driver over
//! it and metal workspaces. Each test binary uses its own part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cms_model::{MetalHost, Provider, Role};
use cms_tofu::{Credentials, MachinePlan, ProcessRunner, Tofu, TofuOptions, WorkspacePlan};

/// The engine's shim: `CMS_TEST_TOFU`, else where `.ci/tofu-engine` puts it.
/// A missing engine fails the test: it is never skipped.
pub(crate) fn engine() -> PathBuf {
    let path = std::env::var_os("CMS_TEST_TOFU").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cms-tofu-venv/bin/tofu")
    });
    assert!(
        path.is_file(),
        "the test engine {} is missing: run `bash .ci/tofu-engine` (CI does)",
        path.display()
    );
    path
}

/// Options for a driver running `binary` in `<root>/workspaces`, with an
/// empty CLI configuration of its own and local state.
pub(crate) fn options(binary: PathBuf, root: &Path, timeout: Duration) -> TofuOptions {
    let cli_config = root.join("empty.tfrc");
    std::fs::write(&cli_config, "").unwrap();
    TofuOptions {
        binary,
        root: root.join("workspaces"),
        timeout,
        grace: Duration::from_millis(300),
        plugin_dir: None,
        cli_config: Some(cli_config),
        state_key: None,
        backend: cms_tofu::StateBackend::Local,
    }
}

/// A driver over the real engine, without credentials.
pub(crate) fn tofu(root: &Path, timeout: Duration) -> Tofu {
    Tofu::new(options(engine(), root, timeout), Credentials::default(), Arc::new(ProcessRunner))
}

/// A metal control plane machine `cp-<index>`.
pub(crate) fn metal_machine(
    index: u32,
    address: &str,
    provider_id: Option<&str>,
    shape: &str,
) -> MachinePlan {
    MachinePlan {
        id: format!("cp-{index}"),
        group: "cp".into(),
        index,
        role: Role::ControlPlane,
        provider: Provider::Metal,
        shape: shape.into(),
        provider_config: Default::default(),
        host: Some(MetalHost { address: address.into(), provider_id: provider_id.map(str::to_string) }),
        user_data: None,
    }
}

/// A tenant of `hosts` bare metal control planes at `10.0.0.1` and up.
pub(crate) fn metal_plan(tenant: &str, hosts: u32) -> WorkspacePlan {
    WorkspacePlan {
        tenant: tenant.into(),
        machines: (0..hosts)
            .map(|index| metal_machine(index, &format!("10.0.0.{}", index + 1), None, "bare"))
            .collect(),
        ..Default::default()
    }
}
