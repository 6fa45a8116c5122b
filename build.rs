//! Generates the kvproto types and the `pdpb.PD` gRPC service from `proto/kvproto/`, with the
//! protoc binary vendored in `protoc-bin-vendored`: no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/kvproto/eraftpb.proto",
        "proto/kvproto/metapb.proto",
        "proto/kvproto/pdpb.proto",
    ];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let descriptors = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("kvproto.bin");
    tonic_prost_build::configure()
        .file_descriptor_set_path(descriptors)
        .build_server(true)
        .build_client(true)
        // An rpc of the subset that no handler serves yet answers UNIMPLEMENTED, as PD's
        // clients expect of a method a server lacks, instead of failing the build.
        .generate_default_stubs(true)
        .compile_with_config(config, &protos, &["proto/kvproto"])?;
    Ok(())
}
