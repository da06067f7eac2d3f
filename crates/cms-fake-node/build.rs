//! Generates the fake node's gRPC server from `proto-upstream/`, an
//! unmodified copy of Talos's own `.proto` files (`proto-upstream/SOURCE.md`),
//! with protox, a pure-Rust protobuf compiler, so that building needs no
//! system `protoc`. Every call the fake does not implement answers
//! `Unimplemented`, as the default body of its trait method.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto-upstream");
    let files = protox::compile(["machine/machine.proto"], ["proto-upstream"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .generate_default_stubs(true)
        .compile_fds(files)?;
    Ok(())
}
