//! Generates the node API's gRPC code from `proto/` with protox, a
//! pure-Rust protobuf compiler, so that building needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let files = protox::compile(["machine/machine.proto"], ["proto"])?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(files)?;
    Ok(())
}
