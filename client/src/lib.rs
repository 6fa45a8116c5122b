//! The Rust client of Meridian: timestamps and placement calls over one QUIC connection, with
//! the wire frames and the data types they carry. It is the part of Meridian a program links to
//! ask for timestamps; it holds none of the server (no etcd client, no gRPC or HTTP server, no
//! allocator, no build script), so it builds anywhere Rust and a C compiler for ring do.
//!
//! ```no_run
//! # async fn run() -> Result<(), meridian_client::ClientError> {
//! use meridian_client::{Client, ClientOptions, Trust};
//!
//! let trust = Trust::Ca("/var/lib/meridian/tls/ca.pem".into());
//! let client = Client::connect(ClientOptions::new(vec!["127.0.0.1:2379".into()], trust)).await?;
//! let ts = client.get_ts().await?;
//! println!("{ts} = {}ms + {}", ts.physical_ms(), ts.logical());
//! # Ok(())
//! # }
//! ```
//!
//! Crate map, one line per module:

/// The client: connection and leader discovery, TSO batching dispatcher, region cache,
/// placement calls, typed errors.
pub mod client;
/// QUIC datagram size: the UDP payload accepted and path MTU discovery's bound.
pub mod datagram;
/// Placement data the frames carry: regions, peers, epochs, stores, operators.
pub mod placement;
/// Wire messages (rkyv) and length-prefixed framing.
pub mod proto;
/// Client TLS: how the server is trusted, the client configs, the crypto provider.
pub mod tls;
/// The hybrid timestamp layout.
pub mod tso;

pub use client::{BatchHook, Client, ClientError, ClientOptions, Connector, RpcStream};
pub use tls::Trust;
pub use tso::Timestamp;
