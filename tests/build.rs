//! The cluster autoscaler's side of the `externalgrpc` API, generated from
//! the upstream `externalgrpc.proto` (vendored by `cms-autoscaler`, as it
//! is) as the autoscaler's own client is: the tests talk to the server as
//! the autoscaler does.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = "../crates/cms-autoscaler/proto";
    println!("cargo:rerun-if-changed={protos}");
    let files = protox::compile(["externalgrpc.proto", "k8s/node.proto"], [protos])?;
    tonic_prost_build::configure().build_client(true).build_server(false).compile_fds(files)?;
    Ok(())
}
