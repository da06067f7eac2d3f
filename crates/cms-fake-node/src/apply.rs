//! `ApplyConfiguration` as machined answers it on a configured node
//! (`ApplyConfiguration` in `internal/app/machined/internal/server/v1alpha1/
//! v1alpha1_server.go`):
//!
//! - A config that does not parse, or has no `v1alpha1` document, is
//!   refused with `InvalidArgument`.
//! - `NO_REBOOT` (and `TRY`) applies the config at once if Talos can
//!   ([`crate::immediate`]), and otherwise refuses it with `InvalidArgument`
//!   and the reason; `AUTO` applies it at once when it can, and otherwise
//!   applies it and reboots; `REBOOT` always reboots; `STAGED` keeps it for
//!   the next reboot. The answer's `mode` is the mode used (`AUTO` answers
//!   `REBOOT` or `NO_REBOOT`) and `mode_details` says why, in Talos's words.
//! - A dry run answers the same without applying anything.
//!
//! In maintenance mode the node answers as Talos's maintenance service
//! (`ApplyConfiguration` in `internal/app/maintenance/server.go`): it takes
//! `REBOOT`, `AUTO` and `TRY` and refuses the other modes with
//! `Unimplemented` ("apply configuration --mode='no-reboot' is not
//! supported in maintenance mode"); its answer carries no mode, which reads
//! as `REBOOT` (it installs and reboots), and no details, but for a dry run,
//! which applies nothing. The fake takes the config at once, without the
//! install and the reboot.
//!
//! A fresh fake out of maintenance mode with no config yet takes any config
//! at once, answering the mode asked. `TRY` is not reverted.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tonic::Status;

use crate::config::MachineConfig;
use crate::immediate::{changes, reboot_needed};
use crate::proto::machine::apply_configuration_request::Mode;
use crate::proto::machine::{ApplyConfiguration, ApplyConfigurationRequest};
use crate::service::{Behaviour, Shared, metadata};

const WITHOUT_REBOOT: &str = "Applied configuration without a reboot";
const WITH_REBOOT: &str = "Applied configuration with a reboot";
const STAGED: &str = "Staged configuration to be applied after the next reboot";
const MAINTENANCE_DRY_RUN: &str =
    "Dry run summary:\nNode is running in maintenance mode and does not have a config yet.";

impl Shared {
    /// Takes (or refuses) the config of an `ApplyConfiguration` call.
    pub(crate) fn apply(
        self: &Arc<Self>,
        behaviour: &Behaviour,
        request: &ApplyConfigurationRequest,
    ) -> Result<ApplyConfiguration, Status> {
        let answer = |mode: Mode, mode_details: String| ApplyConfiguration {
            metadata: metadata(behaviour),
            warnings: Vec::new(),
            mode: mode.into(),
            mode_details,
        };
        if self.maintenance.load(Ordering::SeqCst) {
            return self.apply_in_maintenance(behaviour, request);
        }
        let Some(running) = self.boots().running.clone() else {
            self.configured(&behaviour.hostname, &request.data);
            let details = format!("applied {} bytes", request.data.len());
            return Ok(ApplyConfiguration { mode: request.mode, ..answer(Mode::Reboot, details) });
        };
        let new = String::from_utf8(request.data.clone())
            .map_err(|err| Status::invalid_argument(format!("failed to parse config: {err}")))?;
        MachineConfig::parse(&new).map_err(Status::invalid_argument)?;
        let asked = Mode::try_from(request.mode).map_err(|_| {
            Status::unknown(format!("incorrect mode '{}' specified for the apply config call", request.mode))
        })?;
        let (mode, details) = match (asked, reboot_needed(&running, &new)) {
            (Mode::NoReboot | Mode::Try, Some(reason)) => return Err(Status::invalid_argument(reason)),
            (Mode::NoReboot | Mode::Try, None) => (asked, WITHOUT_REBOOT.to_string()),
            (Mode::Auto, Some(reason)) => (Mode::Reboot, format!("{WITH_REBOOT}: {reason}")),
            (Mode::Auto, None) => (Mode::NoReboot, WITHOUT_REBOOT.to_string()),
            (Mode::Reboot, _) => (Mode::Reboot, WITH_REBOOT.to_string()),
            (Mode::Staged, _) => (Mode::Staged, STAGED.to_string()),
        };
        if request.dry_run {
            let diff = match changes(&running, &new) {
                changes if changes.is_empty() => "No changes.".to_string(),
                changes => changes.join("\n"),
            };
            let summary =
                format!("Dry run summary:\n{details} (skipped in dry-run).\nConfig diff:\n\n{diff}");
            return Ok(answer(mode, summary));
        }
        match mode {
            Mode::NoReboot | Mode::Try => self.configured(&behaviour.hostname, new.as_bytes()),
            Mode::Staged => self.boots().next = Some(new),
            Mode::Reboot | Mode::Auto => {
                self.boots().next = Some(new);
                self.reboot(behaviour.reboot_delay, None);
            }
        }
        Ok(answer(mode, details))
    }

    /// `ApplyConfiguration` in maintenance mode.
    fn apply_in_maintenance(
        &self,
        behaviour: &Behaviour,
        request: &ApplyConfigurationRequest,
    ) -> Result<ApplyConfiguration, Status> {
        match Mode::try_from(request.mode) {
            Ok(Mode::Reboot | Mode::Auto | Mode::Try) => {}
            asked => {
                let name = match asked {
                    Ok(mode) => mode.as_str_name().to_lowercase().replace('_', "-"),
                    Err(_) => request.mode.to_string(),
                };
                return Err(Status::unimplemented(format!(
                    "apply configuration --mode='{name}' is not supported in maintenance mode"
                )));
            }
        }
        let answer = |mode_details: &str| ApplyConfiguration {
            metadata: None,
            warnings: Vec::new(),
            mode: Mode::Reboot.into(),
            mode_details: mode_details.to_string(),
        };
        if request.dry_run {
            return Ok(answer(MAINTENANCE_DRY_RUN));
        }
        self.configured(&behaviour.hostname, &request.data);
        Ok(answer(""))
    }
}
