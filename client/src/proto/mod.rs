//! Wire protocol: the request and response messages (rkyv archives) and their framing on a QUIC
//! stream. Pure: it encodes and decodes bytes and never touches a socket.

mod frame;
mod global_config;
mod message;
mod refusal;
#[cfg(test)]
mod wire_pin;

pub use frame::{
    decode, encode, trim, trim_aligned, FrameDecoder, FrameError, StreamCode, FRAME_HEADER_LEN,
    KEEP_CAPACITY, MAX_FRAME_LEN,
};
pub use global_config::{ConfigChange, ConfigEvent, ConfigEventKind, ConfigItem};
pub use message::{
    ArchivedRequest, ArchivedResponse, ErrorReply, MemberInfo, MembersReply, Reply, Request,
    Response, SplitIds, StoreBeat, MAX_BATCH_SCAN_REGIONS, MAX_BATCH_SPLIT, MAX_SCAN_REGIONS,
};
pub use refusal::{ArchivedRefusal, Refusal};

/// ALPN protocol id every connection must negotiate. It names the wire layout: builds whose
/// messages lay out differently must not talk, so a new layout gets a new number (`wire_pin`).
pub const ALPN: &[u8] = b"meridian/5";
