//! kvproto's `pdpb`, `metapb`, `eraftpb`, `meta_storagepb` and `resource_manager` types and
//! their services, generated at build time from the subset in `proto/kvproto/` (field numbers
//! exactly as kvproto has them; see its README). Generated code only: the translation to
//! Meridian's types lives with the gRPC front end.

#![allow(clippy::all, clippy::pedantic)]

pub mod eraftpb {
    tonic::include_proto!("eraftpb");
}

pub mod metapb {
    tonic::include_proto!("metapb");
}

pub mod pdpb {
    tonic::include_proto!("pdpb");
}

pub mod meta_storagepb {
    tonic::include_proto!("meta_storagepb");
}

pub mod resource_manager {
    tonic::include_proto!("resource_manager");
}

/// The compiled descriptors of `proto/kvproto/` (a serialized `FileDescriptorSet`): what the
/// field-number test compares against an independent copy of kvproto.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kvproto.bin"));
