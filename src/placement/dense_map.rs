//! An id-keyed map for a million regions: the values sit densely in one vector, and the hash
//! table holds only their 4-byte positions. A hash table runs between 44% and 87% full, so
//! its empty half should cost as little per slot as it can: 5 bytes here (position and
//! hashbrown's control byte), 9 in an `IndexMap` (whose entries also carry an 8-byte hash),
//! 17 in a `HashMap<u64, Arc<_>>`.
//!
//! Owns: that layout and its lookups. Knows nothing of what the values are.

use hashbrown::HashTable;

#[derive(Debug)]
pub struct DenseIdMap<V> {
    entries: Vec<(u64, V)>,
    /// Positions in `entries`.
    table: HashTable<u32>,
}

impl<V> Default for DenseIdMap<V> {
    fn default() -> Self {
        DenseIdMap {
            entries: Vec::new(),
            table: HashTable::new(),
        }
    }
}

/// Ids are allocated, not chosen by clients, so one multiply spreads them (Fibonacci hashing),
/// with the well-mixed high bits folded down: hashbrown takes its tag from the top 7 bits and
/// its bucket from the low ones.
fn hash(id: u64) -> u64 {
    let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 32)
}

impl<V> DenseIdMap<V> {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, id: u64) -> Option<usize> {
        let entries = &self.entries;
        self.table
            .find(hash(id), |&i| entries[i as usize].0 == id)
            .map(|&i| i as usize)
    }

    pub fn get(&self, id: &u64) -> Option<&V> {
        self.position(*id).map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, id: &u64) -> Option<&mut V> {
        self.position(*id).map(|i| &mut self.entries[i].1)
    }

    pub fn contains_key(&self, id: &u64) -> bool {
        self.position(*id).is_some()
    }

    /// Inserts or replaces; returns the value replaced.
    pub fn insert(&mut self, id: u64, value: V) -> Option<V> {
        if let Some(i) = self.position(id) {
            return Some(std::mem::replace(&mut self.entries[i].1, value));
        }
        // Each entry costs hundreds of bytes with its region, so 2^32 of them cannot be held.
        let at = u32::try_from(self.entries.len()).expect("fewer than 2^32 entries");
        let entries = &self.entries;
        self.table
            .insert_unique(hash(id), at, |&i| hash(entries[i as usize].0));
        self.entries.push((id, value));
        None
    }

    /// Removes by moving the last entry into the hole (order is not kept).
    pub fn remove(&mut self, id: &u64) -> Option<V> {
        let entries = &self.entries;
        let slot = self
            .table
            .find_entry(hash(*id), |&i| entries[i as usize].0 == *id)
            .ok()?;
        let (i, _) = slot.remove();
        let i = i as usize;
        let last = self.entries.len() - 1;
        if i != last {
            let moved = self.entries[last].0;
            if let Some(p) = self.table.find_mut(hash(moved), |&p| p as usize == last) {
                *p = i as u32;
            }
        }
        Some(self.entries.swap_remove(i).1)
    }

    /// The entry at position `i` (positions run 0..len; a removal moves the last one).
    pub fn at_mut(&mut self, i: usize) -> Option<(u64, &mut V)> {
        self.entries.get_mut(i).map(|(id, v)| (*id, v))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut V)> {
        self.entries.iter_mut().map(|(id, v)| (*id, v))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.table.clear();
    }

    /// Room for `more` entries without growing (a rehash of millions is one long pause).
    pub fn reserve(&mut self, more: usize) {
        self.entries.reserve(more);
        let entries = &self.entries;
        self.table.reserve(more, |&i| hash(entries[i as usize].0));
    }
}

impl<V> FromIterator<(u64, V)> for DenseIdMap<V> {
    fn from_iter<I: IntoIterator<Item = (u64, V)>>(iter: I) -> Self {
        let mut map = DenseIdMap::default();
        for (id, v) in iter {
            map.insert(id, v);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Against std's map: every answer, after every insert and remove (the hole filled by
        /// the last entry), over ids that collide in few or many bits.
        #[test]
        fn answers_as_a_hash_map_does(
            ops in proptest::collection::vec((any::<bool>(), 0u64..64, any::<u32>()), 1..400),
            shift in 0u32..40,
        ) {
            let mut map = DenseIdMap::default();
            let mut model = HashMap::new();
            for (insert, id, v) in ops {
                let id = id << shift;
                if insert {
                    prop_assert_eq!(map.insert(id, v), model.insert(id, v));
                } else {
                    prop_assert_eq!(map.remove(&id), model.remove(&id));
                }
                prop_assert_eq!(map.len(), model.len());
                for probe in 0u64..64 {
                    let probe = probe << shift;
                    prop_assert_eq!(map.get(&probe), model.get(&probe));
                    prop_assert_eq!(map.contains_key(&probe), model.contains_key(&probe));
                }
                let mut values: Vec<u32> = map.values().copied().collect();
                let mut expected: Vec<u32> = model.values().copied().collect();
                values.sort_unstable();
                expected.sort_unstable();
                prop_assert_eq!(values, expected);
            }
            if let Some(v) = map.get_mut(&0) {
                *v = 7;
                prop_assert_eq!(map.get(&0), Some(&7));
            }
            map.clear();
            prop_assert!(map.is_empty());
            prop_assert_eq!(map.get(&0), None);
        }
    }
}
