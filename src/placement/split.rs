//! What a split report must be, as PD checks it (`checkSplitRegions`): at least two regions,
//! in key order, each ending where the next begins, and each range non-empty (a region whose
//! end is not after the previous one's start cannot follow it). Pure; the shape of each region
//! on its own is `RegionShape::validate`'s.

use super::Region;

/// A split report PD refuses; it changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid split region")]
pub struct InvalidSplit;

pub fn check_split(regions: &[Region]) -> Result<(), InvalidSplit> {
    if regions.len() < 2 {
        return Err(InvalidSplit);
    }
    for pair in regions.windows(2) {
        let (left, right) = (&pair[0], &pair[1]);
        if left.end_key != right.start_key {
            return Err(InvalidSplit);
        }
        if !right.end_key.is_empty() && left.start_key >= right.end_key {
            return Err(InvalidSplit);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Epoch;

    fn r(start: &[u8], end: &[u8]) -> Region {
        Region {
            id: 1,
            start_key: start.to_vec(),
            end_key: end.to_vec(),
            epoch: Epoch::default(),
            peers: vec![],
            leader: None,
        }
    }

    #[test]
    fn only_contiguous_reports_of_two_or_more_pass() {
        assert_eq!(check_split(&[r(b"", b"m"), r(b"m", b"")]), Ok(()));
        assert_eq!(
            check_split(&[r(b"a", b"c"), r(b"c", b"e"), r(b"e", b"g")]),
            Ok(())
        );
        for bad in [
            vec![],
            vec![r(b"", b"")],
            vec![r(b"", b"m"), r(b"n", b"")],
            vec![r(b"m", b""), r(b"", b"m")],
            vec![r(b"z", b"a"), r(b"a", b"b")],
        ] {
            assert_eq!(check_split(&bad), Err(InvalidSplit), "{bad:?}");
        }
    }
}
