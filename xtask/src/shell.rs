//! Running commands as timed, bounded steps.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The workspace root: the parent of this crate's folder.
pub(crate) fn workspace_root() -> PathBuf {
    // Read when xtask runs, not when it was built: a build reused from a
    // checkout elsewhere must not send every step there.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let manifest_dir = manifest_dir.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir.parent().expect("xtask lives inside the workspace").to_path_buf()
}

/// A `cargo` command run from the workspace root, using the same cargo that
/// runs xtask when there is one.
pub(crate) fn cargo<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(program);
    command.args(args).current_dir(workspace_root());
    command
}

/// Whether a program can be found on `PATH`.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// The durations of the steps run so far, for a closing summary.
#[derive(Debug, Default)]
pub(crate) struct Timings {
    steps: Vec<(String, Duration)>,
}

impl Timings {
    /// Runs a command as a named step, bounded by `limit`, and records its duration.
    pub(crate) fn run(&mut self, name: &str, command: &mut Command, limit: Duration) -> Result<()> {
        let took = run_step(name, command, limit)?;
        self.steps.push((name.to_string(), took));
        Ok(())
    }

    /// Runs in-process work as a named step and records its duration.
    pub(crate) fn measure<T>(&mut self, name: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
        println!("==> {name}");
        let started = Instant::now();
        let result = work().with_context(|| format!("step `{name}` failed"))?;
        let took = started.elapsed();
        println!("<== {name}: ok in {}", seconds(took));
        self.steps.push((name.to_string(), took));
        Ok(result)
    }

    /// Adds the steps of another run, such as the test steps inside `ci`.
    pub(crate) fn extend(&mut self, other: Timings) {
        self.steps.extend(other.steps);
    }

    /// Prints every step with its duration, and the total.
    pub(crate) fn print_summary(&self, title: &str) {
        let width = self.steps.iter().map(|(name, _)| name.len()).max().unwrap_or(0).max(5);
        println!();
        println!("{title}:");
        for (name, took) in &self.steps {
            println!("  {name:<width$}  {:>9}", seconds(*took));
        }
        let total: Duration = self.steps.iter().map(|(_, took)| *took).sum();
        println!("  {:<width$}  {:>9}", "total", seconds(total));
    }
}

/// Formats a duration as seconds with one decimal.
pub(crate) fn seconds(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}

/// Runs a command with inherited output, in its own process group so that a
/// timeout or Ctrl-C stops everything it started. Fails on a non-zero exit.
fn run_step(name: &str, command: &mut Command, limit: Duration) -> Result<Duration> {
    println!("==> {name}: {}", describe(command));
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {}", describe(command)))?;
    let status = wait_bounded(&mut child, limit).with_context(|| format!("step `{name}`"))?;
    let took = started.elapsed();
    if !status.success() {
        bail!("step `{name}` failed ({status}) after {}", seconds(took));
    }
    println!("<== {name}: ok in {}", seconds(took));
    Ok(took)
}

/// Waits for a child, forwarding Ctrl-C to its process group and killing the
/// group when `limit` passes.
fn wait_bounded(child: &mut Child, limit: Duration) -> Result<ExitStatus> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let group = Pid::from_raw(i32::try_from(child.id())?);
    runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + limit;
        let interrupted = tokio::signal::ctrl_c();
        tokio::pin!(interrupted);
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = &mut interrupted => {
                    let _ = killpg(group, Signal::SIGINT);
                    let _ = child.wait();
                    bail!("interrupted");
                }
                _ = tokio::time::sleep_until(deadline) => {
                    let _ = killpg(group, Signal::SIGKILL);
                    let _ = child.wait();
                    bail!("timed out after {}", seconds(limit));
                }
            }
        }
    })
}

/// Runs a command to completion within `limit` and returns its standard output.
pub(crate) fn output(command: &mut Command, limit: Duration) -> Result<String> {
    let file = tempfile::tempfile()?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::from(file.try_clone()?))
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {}", describe(command)))?;
    let status = wait_bounded(&mut child, limit).with_context(|| describe(command))?;
    if !status.success() {
        bail!("{} failed ({status})", describe(command));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::BufReader::new(rewound(file)?), &mut text)?;
    Ok(text)
}

fn rewound(mut file: std::fs::File) -> Result<std::fs::File> {
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
    Ok(file)
}

/// The command line, for messages, with credentials (an `Authorization`
/// header's value) left out.
pub(crate) fn describe(command: &Command) -> String {
    let mut words = vec![Path::new(command.get_program()).file_name().unwrap_or_default().to_string_lossy()];
    words.extend(command.get_args().map(|arg| {
        let text = arg.to_string_lossy();
        match text.split_once(':') {
            Some((name, _)) if name.eq_ignore_ascii_case("authorization") => {
                "Authorization: <redacted>".into()
            }
            _ => text,
        }
    }));
    words.join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_stay_out_of_command_lines() {
        let mut command = std::process::Command::new("schemathesis");
        command.args(["run", "--header", "Authorization: Bearer cms_0123_secret"]);
        let shown = super::describe(&command);
        assert_eq!(shown, "schemathesis run --header Authorization: <redacted>");
    }
}
