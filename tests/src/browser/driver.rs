//! The chromedriver process of one [`super::Browser`], in a process group
//! of its own.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tempfile::TempDir;
use tokio::sync::mpsc;

use super::INSTALL_HINT;

/// The WebDriver server, found on `PATH`.
const CHROMEDRIVER: &str = "chromedriver";
/// How long chromedriver may take to print the port it listens on.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(30);

/// A chromedriver process, in a process group of its own so that killing the
/// group also kills the Chromium it started; its scratch directory holds the
/// browser profile and temporary files, and goes with it.
#[derive(Debug)]
pub(super) struct Driver {
    child: Child,
    pub(super) port: u16,
    log: Arc<Mutex<Vec<String>>>,
    pub(super) scratch: TempDir,
}

impl Driver {
    pub(super) async fn start() -> Driver {
        let scratch =
            tempfile::Builder::new().prefix("cms-e2e-browser-").tempdir().expect("a temporary directory");
        let mut child = spawn_chromedriver(scratch.path());
        let log = Arc::new(Mutex::new(Vec::new()));
        let (lines_tx, mut lines) = mpsc::unbounded_channel();
        pump(child.stdout.take().expect("stdout is piped"), log.clone(), Some(lines_tx));
        pump(child.stderr.take().expect("stderr is piped"), log.clone(), None);
        let mut driver = Driver { child, port: 0, log, scratch };
        let deadline = tokio::time::Instant::now() + DRIVER_START_TIMEOUT;
        driver.port = loop {
            match tokio::time::timeout_at(deadline, lines.recv()).await {
                Ok(Some(line)) => {
                    if let Some(port) = parse_started(&line) {
                        break port;
                    }
                }
                Ok(None) => {
                    let status = driver.child.wait();
                    panic!("chromedriver exited ({status:?}) before it listened\n{}", driver.output());
                }
                Err(_) => panic!(
                    "chromedriver did not say it listened within {DRIVER_START_TIMEOUT:?}\n{}",
                    driver.output()
                ),
            }
        };
        driver
    }

    /// Everything chromedriver printed so far.
    pub(super) fn output(&self) -> String {
        let lines = self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        format!("--- chromedriver output ---\n{}\n--- end of chromedriver output ---", lines.join("\n"))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Starts chromedriver on a free port that the system picks (it prints the
/// port; it accepts local connections only), in a new process group, with `scratch` as `TMPDIR`
/// so that whatever Chromium leaves behind is removed with it.
#[allow(clippy::disallowed_methods)] // The console's tests drive a real browser through chromedriver, its own process.
fn spawn_chromedriver(scratch: &Path) -> Child {
    Command::new(CHROMEDRIVER)
        .arg("--port=0")
        .env("TMPDIR", scratch)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| match err.kind() {
            std::io::ErrorKind::NotFound => panic!("{CHROMEDRIVER} is not on PATH: {INSTALL_HINT}"),
            _ => panic!("cannot start {CHROMEDRIVER}: {err}"),
        })
}

/// Copies a pipe of chromedriver, line by line, into the log and the channel.
fn pump(
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<Vec<String>>>,
    lines: Option<mpsc::UnboundedSender<String>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            log.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(line.clone());
            if let Some(lines) = &lines {
                let _ = lines.send(line);
            }
        }
    });
}

/// The port in chromedriver's `ChromeDriver was started successfully on port N.`
fn parse_started(line: &str) -> Option<u16> {
    let (_, rest) = line.split_once("started successfully on port ")?;
    rest.trim_end().trim_end_matches('.').parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_started;

    #[test]
    fn the_port_is_read_from_chromedrivers_banner() {
        assert_eq!(parse_started("ChromeDriver was started successfully on port 45011."), Some(45011));
        assert_eq!(parse_started("Starting ChromeDriver 156.0 on port 0"), None);
        assert_eq!(parse_started("Only local connections are allowed."), None);
    }
}
