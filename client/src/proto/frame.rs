//! Framing: a `u32` little-endian payload length, then an rkyv archive of that many bytes.
//!
//! The decoder buffers what a stream delivered and yields whole frames; each payload is copied
//! into an aligned buffer and read with checked access, so any byte sequence from the network is
//! either a valid message or a typed error, never undefined behaviour.

use rkyv::rancor;
use rkyv::util::AlignedVec;

use super::message::{ArchivedRequest, ArchivedResponse, Response};

pub const FRAME_HEADER_LEN: usize = 4;
/// Largest payload accepted. A longer frame closes its stream with `StreamCode::FrameTooLarge`.
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// Application error codes carried by a stream reset or a connection close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum StreamCode {
    /// Graceful end: the server is shutting down.
    ShuttingDown = 1,
    /// A frame header announced more than `MAX_FRAME_LEN` bytes.
    FrameTooLarge = 2,
    /// The peer ended the stream in the middle of a frame.
    Truncated = 3,
}

impl StreamCode {
    pub fn code(self) -> u32 {
        self as u32
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes exceeds the {MAX_FRAME_LEN} byte limit")]
    TooLarge(usize),
    #[error("malformed or unknown message: {0}")]
    Malformed(String),
}

/// Why a frame that is not a valid request archive is refused, in the server's own words.
const NOT_A_REQUEST: &str = "not a valid request archive";

/// Appends one framed message to `out`, using `scratch` for the archive so its alignment holds.
pub fn encode<T>(msg: &T, scratch: &mut AlignedVec, out: &mut Vec<u8>) -> Result<(), FrameError>
where
    T: for<'a> rkyv::Serialize<
        rkyv::api::high::HighSerializer<
            AlignedVec,
            rkyv::ser::allocator::ArenaHandle<'a>,
            rancor::Error,
        >,
    >,
{
    scratch.clear();
    let bytes = rkyv::api::high::to_bytes_in::<_, rancor::Error>(msg, std::mem::take(scratch))
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&len| len as usize <= MAX_FRAME_LEN)
        .ok_or(FrameError::TooLarge(bytes.len()))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&bytes);
    *scratch = bytes;
    Ok(())
}

/// Deserialises a whole payload (client side and tests; the server reads archives in place).
pub fn decode<T>(payload: &[u8]) -> Result<T, FrameError>
where
    T: rkyv::Archive,
    T::Archived: for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, rancor::Error>>
        + rkyv::Deserialize<T, rkyv::api::high::HighDeserializer<rancor::Error>>,
{
    let mut aligned = AlignedVec::<16>::with_capacity(payload.len());
    aligned.extend_from_slice(payload);
    rkyv::from_bytes::<T, rancor::Error>(&aligned).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Capacity a stream's buffers keep between reads. One large frame (up to [`MAX_FRAME_LEN`])
/// grows them; [`trim`] gives the excess back once it is consumed, so thousands of idle
/// streams that each once carried a large frame do not pin a megabyte apiece.
pub const KEEP_CAPACITY: usize = 128 * 1024;

/// Gives back a buffer's memory above [`KEEP_CAPACITY`] when it holds nothing.
pub fn trim(buf: &mut Vec<u8>) {
    if buf.is_empty() && buf.capacity() > KEEP_CAPACITY {
        *buf = Vec::new();
    }
}

/// [`trim`] for the aligned buffers archives are written to and read from.
pub fn trim_aligned(buf: &mut AlignedVec) {
    if buf.capacity() > KEEP_CAPACITY {
        *buf = AlignedVec::new();
    }
}

/// Reassembles frames from stream chunks.
#[derive(Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Start of the first unconsumed byte in `buf`.
    pos: usize,
    aligned: AlignedVec,
}

impl FrameDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes received from the stream.
    pub fn extend(&mut self, chunk: &[u8]) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 64 * 1024 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// Gives back what a large frame made the buffers grow to, once nothing is buffered.
    /// Called between reads, when no payload is borrowed.
    pub fn trim(&mut self) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            trim(&mut self.buf);
        }
        trim_aligned(&mut self.aligned);
    }

    /// Bytes held by the decoder's buffers, whatever they contain.
    pub fn capacity(&self) -> usize {
        self.buf.capacity() + self.aligned.capacity()
    }

    /// Whether bytes of an incomplete frame are buffered (a stream ending now is truncated).
    pub fn has_partial(&self) -> bool {
        self.pos < self.buf.len()
    }

    /// The next complete payload, copied into an aligned buffer, or `None` until more bytes come.
    pub fn next_payload(&mut self) -> Result<Option<&[u8]>, FrameError> {
        let pending = &self.buf[self.pos..];
        let Some(header) = pending.first_chunk::<FRAME_HEADER_LEN>() else {
            return Ok(None);
        };
        let len = u32::from_le_bytes(*header) as usize;
        if len > MAX_FRAME_LEN {
            return Err(FrameError::TooLarge(len));
        }
        let Some(payload) = pending.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else {
            return Ok(None);
        };
        self.aligned.clear();
        self.aligned.extend_from_slice(payload);
        self.pos += FRAME_HEADER_LEN + len;
        Ok(Some(&self.aligned))
    }

    /// The next request, read in place with checked access. `Ok(Some(Err(..)))` is a complete
    /// frame that is not a valid request: the stream can answer it and go on.
    pub fn next_request(
        &mut self,
    ) -> Result<Option<Result<&ArchivedRequest, FrameError>>, FrameError> {
        // `rancor::Failure`, not `rancor::Error`: the reply to a peer must not carry rkyv's
        // message, which prints addresses in this process's heap (a gift to anyone working
        // around ASLR), and formatting it was most of what a malformed frame cost.
        Ok(self.next_payload()?.map(|payload| {
            rkyv::access::<ArchivedRequest, rancor::Failure>(payload)
                .map_err(|_| FrameError::Malformed(NOT_A_REQUEST.into()))
        }))
    }

    /// The next response, deserialised.
    pub fn next_response(&mut self) -> Result<Option<Response>, FrameError> {
        match self.next_payload()? {
            None => Ok(None),
            Some(payload) => {
                let archived = rkyv::access::<ArchivedResponse, rancor::Error>(payload)
                    .map_err(|e| FrameError::Malformed(e.to_string()))?;
                rkyv::deserialize::<Response, rancor::Error>(archived)
                    .map(Some)
                    .map_err(|e| FrameError::Malformed(e.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{ErrorReply, Reply, Request};
    use proptest::prelude::*;

    fn frame(req: &Request) -> Vec<u8> {
        let mut out = Vec::new();
        encode(req, &mut AlignedVec::new(), &mut out).unwrap();
        out
    }

    #[test]
    fn requests_round_trip_in_pieces() {
        let reqs = [
            Request::Ping,
            Request::Tso { count: 7 },
            Request::GetMembers,
        ];
        let bytes: Vec<u8> = reqs.iter().flat_map(frame).collect();
        let mut dec = FrameDecoder::new();
        let mut seen = Vec::new();
        for b in bytes.chunks(3) {
            dec.extend(b);
            while let Some(req) = dec.next_request().unwrap() {
                seen.push(rkyv::deserialize::<Request, rancor::Error>(req.unwrap()).unwrap());
            }
        }
        assert_eq!(seen, reqs);
        assert!(!dec.has_partial());
    }

    #[test]
    fn buffers_shrink_back_after_a_large_frame() {
        let big = Request::GetRegion {
            key: vec![7; MAX_FRAME_LEN - 1024],
        };
        let mut scratch = AlignedVec::new();
        let mut out = Vec::new();
        encode(&big, &mut scratch, &mut out).unwrap();
        assert!(out.len() > MAX_FRAME_LEN / 2);
        let mut dec = FrameDecoder::new();
        for piece in out.chunks(64 * 1024) {
            dec.extend(piece);
        }
        dec.extend(&frame(&Request::Ping)[..2]);
        assert!(dec.next_request().unwrap().unwrap().is_ok());
        assert!(dec.capacity() > MAX_FRAME_LEN);
        // A partial frame is still buffered: trimming keeps it.
        dec.trim();
        dec.extend(&frame(&Request::Ping)[2..]);
        let ping = dec.next_request().unwrap().unwrap().unwrap();
        assert!(matches!(ping, ArchivedRequest::Ping));
        dec.trim();
        assert!(
            dec.capacity() <= 2 * KEEP_CAPACITY,
            "{} bytes kept",
            dec.capacity()
        );

        // The encoder's buffers shrink the same way once written out.
        out.clear();
        trim(&mut out);
        trim_aligned(&mut scratch);
        assert!(out.capacity() <= KEEP_CAPACITY && scratch.capacity() <= KEEP_CAPACITY);
        // Small buffers are kept for reuse.
        let mut small = Vec::with_capacity(4096);
        trim(&mut small);
        assert_eq!(small.capacity(), 4096);
    }

    #[test]
    fn responses_round_trip() {
        let resps = [
            Response::Ok(Reply::Tso {
                first: 1 << 40,
                count: 3,
            }),
            Response::Err(ErrorReply::InvalidArgument("count".into())),
            // A merge for the source region carries the target whole.
            Response::Ok(Reply::RegionHeartbeat {
                operator: Some(crate::placement::Operator::Merge(Box::new(
                    crate::placement::Region {
                        id: 7,
                        start_key: b"b".to_vec(),
                        end_key: b"c".to_vec(),
                        epoch: crate::placement::Epoch {
                            conf_ver: 3,
                            version: 9,
                        },
                        peers: vec![crate::placement::Peer {
                            id: 71,
                            store_id: 2,
                            role: crate::placement::PeerRole::Voter,
                        }],
                        leader: Some(71),
                    },
                ))),
            }),
        ];
        let mut out = Vec::new();
        let mut scratch = AlignedVec::new();
        for r in &resps {
            encode(r, &mut scratch, &mut out).unwrap();
        }
        let mut dec = FrameDecoder::new();
        dec.extend(&out);
        for r in &resps {
            assert_eq!(dec.next_response().unwrap(), Some(r.clone()));
        }
        assert_eq!(dec.next_response().unwrap(), None);
    }

    #[test]
    fn oversized_header_is_refused_before_buffering() {
        let mut dec = FrameDecoder::new();
        dec.extend(&((MAX_FRAME_LEN as u32) + 1).to_le_bytes());
        assert_eq!(
            dec.next_payload(),
            Err(FrameError::TooLarge(MAX_FRAME_LEN + 1))
        );
    }

    proptest! {
        /// Arbitrary bytes never panic the decoder: each frame is a request or a typed error.
        #[test]
        fn garbage_never_panics(payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut dec = FrameDecoder::new();
            dec.extend(&(payload.len() as u32).to_le_bytes());
            dec.extend(&payload);
            let _ = dec.next_request().unwrap().unwrap();
        }
    }
}
