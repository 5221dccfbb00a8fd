//! A run's event id → sequence number index, for logs past the scanned length.
//!
//! Open addressing over the log itself: a slot holds `seq + 1` (0 = empty) and the id is
//! read from the log, so an entry is 4 bytes (a general map of id → seq holds 16 and a
//! control byte) and a duplicate check plus insert is one probe sequence, no more. The
//! table is kept at most half full; it only grows (runs do not remove events).

use crate::ids::{EventId, Seq};

/// The smallest table (slots); always a power of two.
const MIN_SLOTS: usize = 64;

/// Event id → the first seq logged with it (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct IdIndex {
    slots: Vec<u32>,
    len: usize,
}

/// Where an id's probe sequence starts: 64 bits mixed from all 12 bytes (counter ids differ
/// in their last bytes, derived ids everywhere).
#[inline(always)]
fn hash(id: &EventId) -> usize {
    let b = id.as_bytes();
    let lo = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let hi = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as u64;
    let h = (lo ^ hi.rotate_left(32) ^ hi).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h ^ (h >> 29)) as usize
}

impl IdIndex {
    /// How many ids the index holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slots allocated (for memory accounting).
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Where the slots are (tests: whether a table was reused).
    #[cfg(test)]
    pub(crate) fn slots_ptr(&self) -> *const u32 {
        self.slots.as_ptr()
    }

    pub(crate) fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
    }

    /// Frees the spare slots of an ended run's index (rebuilt at the smallest size that
    /// keeps it at most half full).
    pub(crate) fn shrink_to_fit(&mut self, id_of: impl Fn(Seq) -> EventId) {
        let want = Self::slots_for(self.len);
        if want < self.slots.len() {
            self.rebuild(want, id_of);
        }
    }

    fn slots_for(ids: usize) -> usize {
        (ids.saturating_mul(2)).max(MIN_SLOTS).next_power_of_two()
    }

    /// The seq of `id`, if the index holds it; `id_of` reads a logged event's id.
    #[inline]
    pub(crate) fn get(&self, id: &EventId, id_of: impl Fn(Seq) -> EventId) -> Option<Seq> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = hash(id) & mask;
        loop {
            match self.slots[i] {
                0 => return None,
                s if id_of(s - 1) == *id => return Some(s - 1),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The first seq of `id` if the index holds it; otherwise records `id` at `seq` (the
    /// caller logs it there) and returns `None`. One probe sequence for both.
    #[inline(always)]
    pub(crate) fn get_or_insert(
        &mut self,
        id: &EventId,
        seq: Seq,
        id_of: impl Fn(Seq) -> EventId,
    ) -> Option<Seq> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow(self.len + 1, &id_of);
        }
        let mask = self.slots.len() - 1;
        let mut i = hash(id) & mask;
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = seq + 1;
                    self.len += 1;
                    return None;
                }
                s if id_of(s - 1) == *id => return Some(s - 1),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Room for `additional` more ids without growing on the way.
    pub(crate) fn reserve(&mut self, additional: usize, id_of: impl Fn(Seq) -> EventId) {
        let ids = self.len.saturating_add(additional);
        if ids.saturating_mul(2) > self.slots.len() {
            self.grow(ids, &id_of);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, ids: usize, id_of: &dyn Fn(Seq) -> EventId) {
        self.rebuild(Self::slots_for(ids), id_of);
    }

    fn rebuild(&mut self, slots: usize, id_of: impl Fn(Seq) -> EventId) {
        let old = std::mem::replace(&mut self.slots, vec![0; slots]);
        let mask = slots - 1;
        for s in old.into_iter().filter(|s| *s != 0) {
            let mut i = hash(&id_of(s - 1)) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ExecutionId, counter_event_id, derived_event_id};

    /// The first seq of each id is found again, duplicates report it, absent ids are not
    /// found, across several growths and for both kinds of ids.
    #[test]
    fn the_id_index_finds_the_first_seq_of_every_id_across_growths() {
        let mut log: Vec<EventId> = Vec::new();
        let mut index = IdIndex::default();
        for n in 0..5_000u32 {
            let id = if n % 2 == 0 {
                counter_event_id(n as u64)
            } else {
                derived_event_id(7, ExecutionId(n), 0)
            };
            let seq = log.len() as Seq;
            assert_eq!(index.get_or_insert(&id, seq, |s| log[s as usize]), None);
            log.push(id);
        }
        assert_eq!(index.len(), 5_000);
        assert!(index.capacity() >= 10_000, "at most half full");
        for (seq, id) in log.iter().enumerate() {
            let seq = seq as Seq;
            assert_eq!(index.get(id, |s| log[s as usize]), Some(seq));
            // A second arrival of the id is a duplicate of the first.
            assert_eq!(
                index.get_or_insert(id, 9_999_999, |s| log[s as usize]),
                Some(seq)
            );
        }
        assert_eq!(
            index.get(&counter_event_id(1), |s| log[s as usize]),
            None,
            "odd counters were never inserted"
        );
        index.shrink_to_fit(|s| log[s as usize]);
        assert_eq!(index.get(&log[4_321], |s| log[s as usize]), Some(4_321));
        index.clear();
        assert_eq!(index.get(&log[0], |s| log[s as usize]), None);
        assert_eq!(index.len(), 0);
    }

    /// Reserving room first gives the same answers as growing one id at a time.
    #[test]
    fn a_reserved_id_index_answers_like_a_grown_one() {
        let log: Vec<EventId> = (0..300).map(counter_event_id).collect();
        let mut index = IdIndex::default();
        index.reserve(300, |s| log[s as usize]);
        let slots = index.capacity();
        for (seq, id) in log.iter().enumerate() {
            assert_eq!(
                index.get_or_insert(id, seq as Seq, |s| log[s as usize]),
                None
            );
        }
        assert_eq!(index.capacity(), slots, "no growth after the reservation");
        assert_eq!(index.get(&log[299], |s| log[s as usize]), Some(299));
    }
}
