//! The `frame_to_request` target: QUIC stream bytes through the core's framing and dispatch
//! (`server::service::Op`), then through [`super::model`]. Owns the target, its oracle of
//! read-cutting independence and the wire round trip; touches no shared state.

use std::fmt::Debug;

use rkyv::util::AlignedVec;

use crate::auth::RequestCall;
use crate::proto::{self, FrameDecoder, FrameError, Request};
use crate::server::service::Op;

use super::model::{serve, Model};

/// QUIC stream bytes, as a core reads them: `data[0]` says how the rest arrives (low 6 bits:
/// chunk length, 0 for all at once; high 2 bits: the test index's segment size - 1, so small
/// maps still cross segment boundaries), the rest is the stream. Every complete request goes
/// through what the core does before it touches shared state (`Op::of_archived`, the authorization
/// of every role set, `[limits]`), then is applied to a small region map and index whose
/// invariants are checked. The same bytes fed at once must give the same requests and errors.
pub fn frame_to_request(data: &[u8]) {
    let Some((&ctl, stream)) = data.split_first() else {
        return;
    };
    let piece = usize::from(ctl & 0x3f);
    let mut model = Model::new(1 + usize::from(ctl >> 6));

    let mut decoder = FrameDecoder::new();
    let mut in_pieces = Vec::new();
    // Outcomes already served: each read serves only the frames it completed.
    let mut served = 0;
    let chunks: Box<dyn Iterator<Item = &[u8]>> = if piece == 0 {
        Box::new(std::iter::once(stream))
    } else {
        Box::new(stream.chunks(piece))
    };
    for chunk in chunks {
        decoder.extend(chunk);
        let fatal = drain(&mut decoder, &mut in_pieces);
        for req in in_pieces[served..].iter().flatten() {
            serve(&mut model, req);
            wire_round_trip(req);
        }
        served = in_pieces.len();
        if fatal {
            // The core resets the stream: nothing after a frame that is too large is read.
            break;
        }
        // Between reads the core gives back what a large frame made the buffers grow to.
        decoder.trim();
    }

    // Framing does not depend on how the stream was cut into reads.
    let mut whole = FrameDecoder::new();
    whole.extend(stream);
    let mut at_once = Vec::new();
    drain(&mut whole, &mut at_once);
    assert_eq!(
        in_pieces, at_once,
        "reads cut differently decode differently"
    );
}

/// What one frame became: the request a core acts on, or the error it answers (or resets with).
pub(super) type Outcome = Result<Request, Refusal>;

/// Why a frame is not a request. Only the kind: the reason's words are not part of the
/// protocol (a client acts on the error's type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Not a valid archive: answered `InvalidArgument`, the stream goes on.
    Frame,
    /// A valid archive that does not deserialise to a request: answered the same way.
    Request,
    /// A header over `MAX_FRAME_LEN`: the stream is reset, with the announced length.
    TooLarge(usize),
}

/// Takes every complete frame out of `decoder`, as a core does after a read. True when the
/// stream hit a fatal error (an oversized frame).
pub(super) fn drain(decoder: &mut FrameDecoder, out: &mut Vec<Outcome>) -> bool {
    loop {
        match decoder.next_request() {
            Ok(None) => return false,
            Ok(Some(Ok(archived))) => {
                out.push(Op::of_archived(archived).map_err(|_| Refusal::Request).map(
                    |(call, _op)| {
                        // The call a core authorizes is the request's own, whether it was
                        // read from the archive or from the deserialised request.
                        let req = rkyv::deserialize::<Request, rkyv::rancor::Error>(archived)
                            .expect("an archive that sorted deserialises");
                        assert_eq!(call, req.call());
                        req
                    },
                ))
            }
            Ok(Some(Err(_))) => out.push(Err(Refusal::Frame)),
            Err(e) => {
                let FrameError::TooLarge(len) = e else {
                    panic!("a fatal frame error other than an oversized header: {e}");
                };
                assert!(len > proto::MAX_FRAME_LEN);
                out.push(Err(Refusal::TooLarge(len)));
                return true;
            }
        }
    }
}

/// A request the server decoded re-encodes (as a client frames it) to a frame that decodes to
/// the same request.
pub(super) fn wire_round_trip(req: &Request) {
    let (mut scratch, mut framed) = (AlignedVec::new(), Vec::new());
    // Only a request larger than a frame fails to encode; fuzzed ones are far smaller, but
    // the limit is the encoder's to enforce, not an invariant of the input.
    if proto::encode(req, &mut scratch, &mut framed).is_err() {
        return;
    }
    let mut decoder = FrameDecoder::new();
    decoder.extend(&framed);
    let mut back = Vec::new();
    drain(&mut decoder, &mut back);
    assert_eq!(
        back,
        vec![Ok(req.clone())],
        "a request does not survive re-encoding"
    );
}
