//! Compiles `proto/**/*.proto` with protox (pure Rust, no system protoc) and writes the
//! encoded descriptor set next to the generated code, for gRPC server reflection.

use std::path::PathBuf;

const FILES: &[&str] = &[
    "argos/common/v1/daemon.proto",
    "argos/exec/v1/exec.proto",
    "argos/mcp/v1/mcp.proto",
    "argos/job/v1/job.proto",
    "argos/gateway/v1/gateway.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(FILES)?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("argos_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    tonic_prost_build::configure()
        // Output travels as slices of the received buffer, not copies of it.
        .bytes(".argos.exec.v1.OutputChunk.data")
        .build_client(true)
        .build_server(true)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
