//! Generates the kvproto types and the `pdpb.PD`, `meta_storagepb.MetaStorage` and
//! `resource_manager.ResourceManager` gRPC services from `proto/kvproto/`, and etcd's
//! `etcdserverpb` services (server and client: the client address serves them and forwards
//! them to etcd) from `proto/etcd/`, with the protoc binary vendored in `protoc-bin-vendored`:
//! no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);

    let kvproto = [
        "proto/kvproto/eraftpb.proto",
        "proto/kvproto/metapb.proto",
        "proto/kvproto/pdpb.proto",
        "proto/kvproto/meta_storagepb.proto",
        "proto/kvproto/resource_manager.proto",
    ];
    // An rpc of the kvproto subset that no handler serves yet answers UNIMPLEMENTED, as PD's
    // clients expect of a method a server lacks, instead of failing the build.
    compile(
        &protoc,
        &kvproto,
        "proto/kvproto",
        out.join("kvproto.bin"),
        true,
    )?;

    let etcd = ["proto/etcd/rpc.proto", "proto/etcd/mvccpb/kv.proto"];
    compile(&protoc, &etcd, "proto/etcd", out.join("etcd.bin"), false)?;
    Ok(())
}

/// Compiles `protos` (imports resolved under `include`) into server and client code, and
/// writes their descriptors to `descriptors`; `default_stubs` gives every rpc a default
/// UNIMPLEMENTED handler.
fn compile(
    protoc: &std::path::Path,
    protos: &[&str],
    include: &str,
    descriptors: std::path::PathBuf,
    default_stubs: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .file_descriptor_set_path(descriptors)
        .build_server(true)
        .build_client(true)
        .generate_default_stubs(default_stubs)
        .compile_with_config(config, protos, &[include])?;
    Ok(())
}
