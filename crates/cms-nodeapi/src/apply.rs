//! The `ApplyConfiguration` call's request and answer: the mode a node is
//! asked to take a config in, and the mode it says it used.

use crate::proto::machine::apply_configuration_request::Mode;

/// How a node takes a new config (`ApplyConfigurationRequest.Mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    Reboot,
    Auto,
    NoReboot,
    Staged,
    Try,
}

impl ApplyMode {
    /// The mode a node names in its answer (`ApplyConfiguration.mode`), if
    /// it is one of Talos's.
    pub(crate) fn from_proto(mode: i32) -> Option<ApplyMode> {
        match Mode::try_from(mode).ok()? {
            Mode::Reboot => Some(ApplyMode::Reboot),
            Mode::Auto => Some(ApplyMode::Auto),
            Mode::NoReboot => Some(ApplyMode::NoReboot),
            Mode::Staged => Some(ApplyMode::Staged),
            Mode::Try => Some(ApplyMode::Try),
        }
    }

    pub(crate) fn to_proto(self) -> Mode {
        match self {
            ApplyMode::Reboot => Mode::Reboot,
            ApplyMode::Auto => Mode::Auto,
            ApplyMode::NoReboot => Mode::NoReboot,
            ApplyMode::Staged => Mode::Staged,
            ApplyMode::Try => Mode::Try,
        }
    }
}

/// An `ApplyConfiguration` call.
#[derive(Clone, PartialEq, Eq)]
pub struct ApplyRequest {
    /// The machine config, YAML.
    pub config: Vec<u8>,
    pub mode: ApplyMode,
    pub dry_run: bool,
}

impl std::fmt::Debug for ApplyRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A machine config holds the cluster's secrets.
        f.debug_struct("ApplyRequest")
            .field("config", &format_args!("[{} bytes]", self.config.len()))
            .field("mode", &self.mode)
            .field("dry_run", &self.dry_run)
            .finish()
    }
}

/// What a node said to `ApplyConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// The mode the node used: asked `Auto`, Talos answers `Reboot` or
    /// `NoReboot`, whichever it chose.
    pub mode: ApplyMode,
    pub warnings: Vec<String>,
    /// Why, in Talos's words, such as `Applied configuration without a reboot`.
    pub mode_details: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answered_modes_map_back() {
        for mode in
            [ApplyMode::Reboot, ApplyMode::Auto, ApplyMode::NoReboot, ApplyMode::Staged, ApplyMode::Try]
        {
            assert_eq!(ApplyMode::from_proto(mode.to_proto().into()), Some(mode));
        }
        assert_eq!(ApplyMode::from_proto(9), None);
    }
}
