//! Generates the autoscaler's gRPC service from `proto/` with protox, a
//! pure-Rust protobuf compiler, so that building needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let files = protox::compile(["externalgrpc.proto", "k8s/node.proto"], ["proto"])?;
    tonic_prost_build::configure().build_client(false).build_server(true).compile_fds(files)?;
    Ok(())
}
