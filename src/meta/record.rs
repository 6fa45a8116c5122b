//! The embedded store's record format, shared by its log and its snapshot:
//! `crc32 | body_len | op | key_len | key | value`, integers little-endian, and the parsers
//! that find where whole, checksummed records end. Knows nothing of files or of what the
//! records mean.

pub(super) const OP_PUT: u8 = 1;
pub(super) const OP_DELETE: u8 = 2;
/// Bytes of a record before its key: crc, body length, op, key length.
pub(super) const HEADER: usize = 4 + 4 + 1 + 4;

// `pub(crate)`, like `encode`, `parse_records` and `next_valid_record`: `crate::fuzzing` runs the
// parser on fuzzed bytes and re-encodes what it returns.
pub(crate) struct Record {
    pub(super) op: u8,
    pub(super) key: Vec<u8>,
    pub(super) value: Vec<u8>,
}

impl Record {
    /// `crc32 | body_len | op | key_len | key | value`, integers little-endian.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let mut body = Vec::with_capacity(5 + self.key.len() + self.value.len());
        body.push(self.op);
        body.extend_from_slice(&(self.key.len() as u32).to_le_bytes());
        body.extend_from_slice(&self.key);
        body.extend_from_slice(&self.value);
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
    }

    fn decode(body: &[u8]) -> Option<Record> {
        let (&op, rest) = body.split_first()?;
        let key_len = u32::from_le_bytes(*rest.first_chunk::<4>()?) as usize;
        let rest = &rest[4..];
        if key_len > rest.len() || !(op == OP_PUT || op == OP_DELETE) {
            return None;
        }
        let (key, value) = rest.split_at(key_len);
        Some(Record {
            op,
            key: key.to_vec(),
            value: value.to_vec(),
        })
    }
}

/// Parses records until the first incomplete or damaged one; returns them and the length of the
/// good prefix. Only the fuzzers need the records themselves (the store replays as it parses).
#[cfg(feature = "testkit")]
pub(crate) fn parse_records(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut pos = 0;
    while let Some((record, len)) = record_at(bytes, pos) {
        records.push(record);
        pos += len;
    }
    (records, pos)
}

/// The record starting at `pos` and its encoded length, if one is there, whole and checksummed.
pub(super) fn record_at(bytes: &[u8], pos: usize) -> Option<(Record, usize)> {
    let header = bytes.get(pos..pos.checked_add(8)?)?;
    let crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    let body = bytes.get(pos + 8..(pos + 8).checked_add(len)?)?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    Some((Record::decode(body)?, 8 + len))
}

/// The offset of the first whole, checksummed record after `damaged`, if any: a torn tail has
/// none (zero-filled or cut pages never checksum as a record, since an empty body is invalid).
pub(crate) fn next_valid_record(bytes: &[u8], damaged: usize) -> Option<usize> {
    (damaged + 1..bytes.len()).find(|&at| record_at(bytes, at).is_some())
}
