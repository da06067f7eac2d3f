//! `cms-fake-node`: one fake Talos node API on the command line, for tests
//! of the real server. It prints `listening on <addr>`, then a line
//! `call {json}` for every call it gets, and runs until killed.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use cms_fake_node::{Call, FakeNode, FakeNodeOptions};
use cms_talos::CertificateAuthority;
use secrecy::SecretString;

/// A fake Talos node API (apid) serving mTLS.
#[derive(Debug, Parser)]
#[command(name = "cms-fake-node")]
struct Args {
    /// A directory holding `ca.crt` and `ca.key` (PEM): the CA that issues
    /// the serving certificate and signs accepted client certificates.
    #[arg(long)]
    ca_dir: PathBuf,
    /// The address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The Talos tag that `Version` answers.
    #[arg(long, default_value = "v1.14.0")]
    version: String,
    /// How long every call waits before answering, such as `3s`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    latency: Duration,
    /// Makes every call fail with `unavailable` and this message.
    #[arg(long)]
    fail: Option<String>,
    /// Starts in maintenance mode, like a host with no config: a certificate
    /// from a CA of its own, and clients without a certificate, until it
    /// takes a config.
    #[arg(long)]
    maintenance: bool,
    /// How long an upgrade keeps the node down before it answers with the
    /// installer image's tag, such as `2s`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    upgrade_delay: Duration,
    /// How long a config applied with a reboot keeps the node down, such as `2s`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    reboot_delay: Duration,
    /// Makes every `Upgrade` fail with this message.
    #[arg(long)]
    fail_upgrade: Option<String>,
    /// How many bytes `EtcdSnapshot` streams.
    #[arg(long, default_value_t = 256 * 1024)]
    snapshot_size: usize,
    /// How often each running service and the kernel write a line to
    /// their logs, such as `1s`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    log_interval: Duration,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let read = |name: &str| {
        let path = args.ca_dir.join(name);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };
    let ca = CertificateAuthority::from_pem(read("ca.crt")?, SecretString::from(read("ca.key")?))
        .context("the CA in --ca-dir")?;
    let mut options = FakeNodeOptions::new(ca)
        .listen(args.listen)
        .version(args.version)
        .latency(args.latency)
        .upgrade_delay(args.upgrade_delay)
        .reboot_delay(args.reboot_delay)
        .snapshot_size(args.snapshot_size)
        .log_interval(args.log_interval);
    if let Some(message) = args.fail_upgrade {
        options = options.upgrade_failure(message);
    }
    if let Some(message) = args.fail {
        options = options.failure(tonic::Code::Unavailable, message);
    }
    if args.maintenance {
        options = options.maintenance();
    }
    let node = FakeNode::start(options.on_call(print_call)).await?;
    say(&format!("listening on {}", node.addr()));
    tokio::signal::ctrl_c().await?;
    Ok(())
}

fn print_call(call: &Call) {
    say(&format!("call {}", call.to_json()));
}

/// One line on standard output, flushed at once: tests read it live.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
