//! The load generator as a library, so integration tests drive the same runs and the same
//! checker as the command line.

pub mod args;
pub mod attack;
pub mod checker;
pub mod cluster;
pub mod compare;
pub mod demo;
pub mod duration;
pub mod etcd_load;
pub mod gather;
pub mod grpc_router;
pub mod grpc_tso;
pub mod kept;
pub mod latency;
pub mod leader;
pub mod nemesis;
pub mod pacer;
pub mod phase;
pub mod plot;
pub mod progress;
pub mod report;
pub mod route;
pub mod run;
pub mod sim;
pub mod stall;
pub mod target;
pub mod threads;
pub mod token_buckets;
