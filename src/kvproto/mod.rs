//! kvproto's `pdpb`, `metapb` and `eraftpb` types and the `pdpb.PD` service, generated at build
//! time from the subset in `proto/kvproto/` (field numbers exactly as kvproto has them; see
//! its README). Generated code only: the translation to Meridian's types lives with the gRPC
//! front end.

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

/// The compiled descriptors of `proto/kvproto/` (a serialized `FileDescriptorSet`): what the
/// field-number test compares against an independent copy of kvproto.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kvproto.bin"));
