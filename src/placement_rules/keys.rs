//! Keys as rules carry them: hex as Go's `hex.DecodeString` reads it (either case, even
//! length), PD's upper-case hex for messages, and the check that a key is memcomparable-encoded
//! bytes (TiDB's `codec.DecodeBytes`: groups of eight bytes and a marker `0xFF - padding`,
//! padding zeros), which PD makes of rule keys in its default `table` key type.

/// Go's `hex.DecodeString`: `None` for an odd length or a byte that is not a hex digit.
pub fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.len() % 2 != 0 || !bytes.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

/// PD's hex in messages: upper case.
pub fn upper_hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02X}")).collect()
}

const GROUP: usize = 8;
const MARKER: u8 = 0xFF;

/// TiDB's `codec.DecodeBytes` over the start of `key`: `Err` with its words when the key does
/// not begin with a complete memcomparable-encoded byte string.
pub fn check_table_key(key: &[u8]) -> Result<(), &'static str> {
    let mut rest = key;
    loop {
        if rest.len() < GROUP + 1 {
            return Err("insufficient bytes to decode value");
        }
        let (group, tail) = rest.split_at(GROUP);
        let marker = tail[0];
        let pad = MARKER - marker;
        if pad as usize > GROUP {
            return Err("invalid marker byte");
        }
        let real = GROUP - pad as usize;
        if group[real..].iter().any(|b| *b != 0) {
            return Err("invalid padding byte");
        }
        rest = &tail[1..];
        if pad != 0 {
            return Ok(());
        }
    }
}

/// TiDB's `codec.EncodeBytes`: what `check_table_key` accepts (used by the tests and by
/// whoever writes a rule for a raw key).
pub fn encode_table_key(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity((raw.len() / GROUP + 1) * (GROUP + 1));
    for chunk in raw.chunks(GROUP).chain(
        // A length that is a multiple of eight ends with an empty, fully padded group.
        (raw.len() % GROUP == 0).then_some(&[][..]),
    ) {
        let pad = GROUP - chunk.len();
        out.extend_from_slice(chunk);
        out.extend(std::iter::repeat_n(0, pad));
        out.push(MARKER - pad as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn table_keys_are_checked_as_tidb_decodes_them() {
        // TiDB's table prefix for table 1: `t` + the int encoding, memcomparable-encoded.
        let key = encode_table_key(b"t\x80\x00\x00\x00\x00\x00\x00\x01");
        assert_eq!(check_table_key(&key), Ok(()));
        assert_eq!(
            check_table_key(b"t"),
            Err("insufficient bytes to decode value")
        );
        assert_eq!(
            check_table_key(&[0, 0, 0, 0, 0, 0, 0, 0, 0x10]),
            Err("invalid marker byte")
        );
        assert_eq!(
            check_table_key(&[1, 2, 3, 4, 5, 6, 7, 8, 0xF8]),
            Err("invalid padding byte")
        );
        assert_eq!(encode_table_key(b""), vec![0, 0, 0, 0, 0, 0, 0, 0, 0xF7]);
        assert_eq!(decode_hex("7480"), Some(vec![0x74, 0x80]));
        assert_eq!(decode_hex("74a"), None);
        assert_eq!(decode_hex("+1"), None);
        assert_eq!(upper_hex(&[0xab, 1]), "AB01");
    }

    proptest! {
        /// Every encoding is accepted, whatever follows it; cut anywhere short of its end it
        /// is refused.
        #[test]
        fn encodings_are_accepted_and_their_prefixes_are_not(
            raw in proptest::collection::vec(any::<u8>(), 0..40),
            suffix in proptest::collection::vec(any::<u8>(), 0..10),
        ) {
            let key = encode_table_key(&raw);
            prop_assert_eq!(check_table_key(&key), Ok(()));
            let mut longer = key.clone();
            longer.extend(&suffix);
            prop_assert_eq!(check_table_key(&longer), Ok(()));
            for cut in 0..key.len() {
                prop_assert!(check_table_key(&key[..cut]).is_err());
            }
        }

        #[test]
        fn hex_round_trips(key in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(decode_hex(&upper_hex(&key)), Some(key.clone()));
            prop_assert_eq!(decode_hex(&upper_hex(&key).to_lowercase()), Some(key));
        }
    }
}
