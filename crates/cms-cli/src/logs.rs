//! `cms logs TENANT MACHINE` and `cms dmesg TENANT MACHINE`: a machine's
//! service log or kernel log, read from its node by the server and written
//! to standard output as it arrives, flushed chunk by chunk; with
//! `--follow` until interrupted (or the server ends it).

use std::io::{self, Read, Write};

use anyhow::{Result, anyhow};
use clap::Args;

use crate::client::Client;

#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// The tenant
    pub(crate) tenant: String,
    /// The machine (its id, as `cms get machines` lists it)
    pub(crate) machine: String,
    /// The Talos service: machined, apid, etcd, kubelet, containerd, trustd, ...
    #[arg(long, default_value = "machined")]
    pub(crate) service: String,
    /// Keep writing what the service writes next, until interrupted
    #[arg(short, long)]
    pub(crate) follow: bool,
    /// Only the last lines, 1 to 10000 (the server's default: 100)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) tail: Option<u32>,
}

#[derive(Debug, Args)]
pub(crate) struct DmesgArgs {
    /// The tenant
    pub(crate) tenant: String,
    /// The machine (its id, as `cms get machines` lists it)
    pub(crate) machine: String,
    /// Keep writing what the kernel writes next, until interrupted
    #[arg(short, long)]
    pub(crate) follow: bool,
    /// Only the last lines, 1 to 10000 (the server's default: 100)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) tail: Option<u32>,
}

/// `cms logs TENANT MACHINE`.
pub(crate) fn logs(client: &Client, args: &LogsArgs) -> Result<()> {
    let query = query(Some(&args.service), args.follow, args.tail);
    let path = format!("{}/logs?{query}", machine_path(&args.tenant, &args.machine));
    copy(client.open(&path)?, &mut io::stdout())
}

/// `cms dmesg TENANT MACHINE`.
pub(crate) fn dmesg(client: &Client, args: &DmesgArgs) -> Result<()> {
    let query = query(None, args.follow, args.tail);
    let path = format!("{}/dmesg?{query}", machine_path(&args.tenant, &args.machine));
    copy(client.open(&path)?, &mut io::stdout())
}

fn machine_path(tenant: &str, machine: &str) -> String {
    let segment = |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    format!("/api/v1/tenants/{}/machines/{}", segment(tenant), segment(machine))
}

fn query(service: Option<&str>, follow: bool, tail: Option<u32>) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    if let Some(service) = service {
        query.append_pair("service", service);
    }
    query.append_pair("follow", if follow { "true" } else { "false" });
    if let Some(tail) = tail {
        query.append_pair("tail", &tail.to_string());
    }
    query.finish()
}

/// Writes what `reader` gives to `out` as it arrives, flushing each chunk.
/// A reader closed early (the pipe to `head`) ends it quietly.
fn copy(mut reader: impl Read, out: &mut impl Write) -> Result<()> {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(anyhow!("the log stopped before its end: {err}")),
        };
        match out.write_all(&buffer[..read]).and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(err) => return Err(anyhow!("writing the log: {err}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_encoded() {
        assert_eq!(query(Some("etcd"), true, Some(20)), "service=etcd&follow=true&tail=20");
        assert_eq!(query(Some("a&tail=1"), false, None), "service=a%26tail%3D1&follow=false");
        assert_eq!(query(None, false, Some(5)), "follow=false&tail=5");
        assert_eq!(machine_path("acme", "m/1"), "/api/v1/tenants/acme/machines/m%2F1");
    }

    #[test]
    fn chunks_pass_through_whole() {
        let mut out = Vec::new();
        copy(&b"one\ntwo\n"[..], &mut out).unwrap();
        assert_eq!(out, b"one\ntwo\n");
    }
}
