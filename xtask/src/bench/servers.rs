//! Starting the benchmarked servers and stopping them again.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cms_e2e::parse_listening;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a server may take to log its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running server process; dropping it kills the process.
#[derive(Debug)]
pub(crate) struct Process {
    name: String,
    child: Child,
    pub(crate) addr: SocketAddr,
    /// From the spawn to the `listening on` line: the store is migrated
    /// and loaded by then.
    pub(crate) started_in: Duration,
}

impl Process {
    /// Starts `binary` on `127.0.0.1:0` with `data_dir`, its default logging
    /// and `env`, and waits for its `listening on <addr>` line.
    pub(crate) fn start(name: &str, binary: &Path, data_dir: &Path, env: &[(&str, &str)]) -> Result<Process> {
        let spawned = Instant::now();
        let mut command = Command::new(binary);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("CMS_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .env_remove("RUST_LOG")
            .env("CMS_LISTEN", "127.0.0.1:0")
            .env("CMS_DATA_DIR", data_dir)
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .current_dir(data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let (lines_tx, lines) = mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().context("stdout is piped")?) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().context("stderr is piped")?),
        ] {
            let lines_tx = lines_tx.clone();
            let label = name.to_string();
            std::thread::spawn(move || {
                let mut announced = false;
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if announced {
                        // Only trouble is shown once the server runs, so that
                        // request logs do not flood the terminal.
                        if ["ERROR", "WARN", "panicked"].iter().any(|word| line.contains(word)) {
                            eprintln!("[{label}] {line}");
                        }
                    } else {
                        announced = line.contains("listening on ");
                        let _ = lines_tx.send(line);
                    }
                }
            });
        }
        drop(lines_tx);
        let deadline = Instant::now() + START_TIMEOUT;
        let mut seen = Vec::new();
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = parse_listening(&line) {
                        break addr;
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!(
                        "{name} did not log `listening on <addr>` in time; it printed:\n{}",
                        seen.join("\n")
                    );
                }
            }
        };
        let started_in = spawned.elapsed();
        println!("{name} listens on {addr} after {} ms", started_in.as_millis());
        Ok(Process { name: name.to_string(), child, addr, started_in })
    }

    /// The resident set size, in bytes, from `/proc/<pid>/status`.
    pub(crate) fn rss(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status.lines().find(|line| line.starts_with("VmRSS:")).context("no VmRSS line")?;
        let kib: u64 = line.split_whitespace().nth(1).context("no VmRSS value")?.parse()?;
        Ok(kib * 1024)
    }

    /// Stops the process with SIGTERM and returns how it exited.
    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn terminate(mut self) -> Result<ExitStatus> {
        let pid = Pid::from_raw(i32::try_from(self.child.id())?);
        kill(pid, Signal::SIGTERM).with_context(|| format!("signalling {}", self.name))?;
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                bail!("{} did not exit within {STOP_TIMEOUT:?} of SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
