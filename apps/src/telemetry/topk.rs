//! The heavy-hitter table: the k keys with the largest estimates.
//!
//! A binary min-heap on the estimate (the root is the entry to evict) plus
//! an open-addressing index from key to heap position, so an offer costs
//! O(log k) with no scan and no allocation: finding the key is one or two
//! probes, changing an estimate re-sifts one entry, and evicting replaces
//! the root. The index has at least twice as many slots as entries and uses
//! linear probing with backward-shift deletion (no tombstones).

use crate::hash::mix64;

#[derive(Clone, Debug)]
pub(super) struct TopK {
    /// (key, estimate), a min-heap on estimate.
    heap: Vec<(u64, f64)>,
    capacity: usize,
    /// Heap position + 1 of the key homed here; 0 is empty.
    slots: Vec<u32>,
    mask: usize,
}

impl TopK {
    /// A table of `capacity` entries, at most [`super::MAX_TOP_K`]
    /// (`NitroSketch::new` checks), so the index size cannot overflow and
    /// heap positions fit its `u32` slots.
    pub(super) fn new(capacity: usize) -> Self {
        debug_assert!(capacity <= super::MAX_TOP_K);
        let n = (2 * capacity).next_power_of_two().max(2);
        TopK {
            heap: Vec::with_capacity(capacity),
            capacity,
            slots: vec![0; n],
            mask: n - 1,
        }
    }

    /// Keys and their last offered estimates, in no particular order.
    pub(super) fn entries(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        self.heap.iter().copied()
    }

    pub(super) fn clear(&mut self) {
        self.heap.clear();
        self.slots.fill(0);
    }

    /// Records `estimate` for `key`: updates it if tracked, adds it if
    /// there is room, or replaces the smallest entry if it is larger.
    #[inline]
    pub(super) fn offer(&mut self, key: u64, estimate: f64) {
        if let Some(i) = self.find_slot(key) {
            let p = self.slots[i] as usize - 1;
            let old = self.heap[p].1;
            self.heap[p].1 = estimate;
            if estimate < old {
                self.sift_up(p);
            } else {
                self.sift_down(p);
            }
        } else if self.heap.len() < self.capacity {
            self.heap.push((key, estimate));
            let p = self.heap.len() - 1;
            self.insert_slot(key, p);
            self.sift_up(p);
        } else if estimate > self.heap[0].1 {
            let evicted = self.heap[0].0;
            let i = self.find_slot(evicted).expect("heap keys are indexed");
            self.remove_slot(i);
            self.heap[0] = (key, estimate);
            self.insert_slot(key, 0);
            self.sift_down(0);
        }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        mix64(key) as usize & self.mask
    }

    #[inline]
    fn find_slot(&self, key: u64) -> Option<usize> {
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if self.heap[s as usize - 1].0 == key {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    fn insert_slot(&mut self, key: u64, pos: usize) {
        let mut i = self.home(key);
        while self.slots[i] != 0 {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = pos as u32 + 1;
    }

    /// Empties slot `i` and shifts later members of its probe run back so
    /// that every key stays reachable from its home slot.
    fn remove_slot(&mut self, mut i: usize) {
        self.slots[i] = 0;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let s = self.slots[j];
            if s == 0 {
                return;
            }
            let home = self.home(self.heap[s as usize - 1].0);
            // The entry at j may move to i unless its home lies cyclically
            // in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = s;
                self.slots[j] = 0;
                i = j;
            }
        }
    }

    /// Swaps two heap entries and their index slots (found while the
    /// index still agrees with the heap).
    fn swap(&mut self, a: usize, b: usize) {
        let ia = self
            .find_slot(self.heap[a].0)
            .expect("heap keys are indexed");
        let ib = self
            .find_slot(self.heap[b].0)
            .expect("heap keys are indexed");
        self.heap.swap(a, b);
        self.slots[ia] = b as u32 + 1;
        self.slots[ib] = a as u32 + 1;
    }

    fn sift_up(&mut self, mut p: usize) {
        while p > 0 {
            let parent = (p - 1) / 2;
            if self.heap[p].1 >= self.heap[parent].1 {
                break;
            }
            self.swap(p, parent);
            p = parent;
        }
    }

    fn sift_down(&mut self, mut p: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * p + 1, 2 * p + 2);
            let mut smallest = p;
            if l < n && self.heap[l].1 < self.heap[smallest].1 {
                smallest = l;
            }
            if r < n && self.heap[r].1 < self.heap[smallest].1 {
                smallest = r;
            }
            if smallest == p {
                return;
            }
            self.swap(p, smallest);
            p = smallest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use std::collections::HashMap;

    fn check_invariants(t: &TopK) {
        for p in 1..t.heap.len() {
            assert!(t.heap[(p - 1) / 2].1 <= t.heap[p].1, "heap order at {p}");
        }
        for (p, &(k, _)) in t.heap.iter().enumerate() {
            let i = t.find_slot(k).expect("indexed");
            assert_eq!(t.slots[i] as usize, p + 1);
        }
        assert_eq!(t.slots.iter().filter(|&&s| s != 0).count(), t.heap.len());
    }

    /// Against a map with the same policy: update if present, insert if
    /// room, else replace the minimum when larger. Estimates are distinct,
    /// so the minimum is unambiguous.
    #[test]
    fn matches_a_naive_model() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(77);
        for (capacity, keys) in [(1usize, 5u64), (3, 10), (100, 300), (100, 100_000)] {
            let mut t = TopK::new(capacity);
            let mut model: HashMap<u64, f64> = HashMap::new();
            for step in 0..20_000 {
                let key = rng.gen_range(0..keys);
                let est: f64 = rng.gen::<f64>() * 1e6;
                t.offer(key, est);
                if let Some(e) = model.get_mut(&key) {
                    *e = est;
                } else if model.len() < capacity {
                    model.insert(key, est);
                } else {
                    let (&min_key, &min_est) =
                        model.iter().min_by(|a, b| a.1.total_cmp(b.1)).unwrap();
                    if est > min_est {
                        model.remove(&min_key);
                        model.insert(key, est);
                    }
                }
                if step % 97 == 0 {
                    check_invariants(&t);
                }
                let got: HashMap<u64, f64> = t.entries().collect();
                assert_eq!(got, model, "capacity {capacity}, step {step}");
            }
            t.clear();
            assert_eq!(t.entries().count(), 0);
            check_invariants(&t);
        }
    }
}
