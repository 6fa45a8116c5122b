//! etcd's `etcdserverpb` (the `KV`, `Watch`, `Lease`, `Cluster.MemberList` and
//! `Auth.Authenticate` services, servers and clients) and `mvccpb` types, generated at build
//! time from the subset in `proto/etcd/` (field numbers exactly as etcd has them; see its
//! README). Generated code only: the proxy that serves and forwards them lives with the gRPC
//! front end (`server::grpc::etcd`).

#![allow(clippy::all, clippy::pedantic)]

pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

/// The compiled descriptors of `proto/etcd/` (a serialized `FileDescriptorSet`).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/etcd.bin"));
