//! Stable sorting of table-sized lists that is compiled once. `slice::sort_by` is generic over
//! its comparator, so every call with a closure of its own compiles the whole sort again (about
//! 4 KB of wasm each); [`by`] and [`by_key`] sort a list of positions with one comparator behind
//! a `&dyn`, so the sort itself is compiled once and each caller adds only its closure and the
//! final reordering. The order is exactly `slice::sort_by`'s (both are stable).
//!
//! They cost one indirect call per comparison and a list of positions: use them for rows,
//! modules, requests, findings and steps; a list that grows with the file (spans, memory
//! events, ops) keeps the slice's own sort.

use alloc::vec::Vec;
use core::cmp::Ordering;

/// Sorts `v` by `compare`, stably: equal elements keep their order, as `slice::sort_by`.
pub fn by<T>(v: &mut [T], mut compare: impl FnMut(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let order = positions(v.len(), &mut |a, b| compare(&v[a], &v[b]));
    reorder(v, order);
}

/// Sorts `v` by the key `key` gives each element, stably, as `slice::sort_by_key`.
pub fn by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    by(v, |a, b| key(a).cmp(&key(b)));
}

/// The positions `0..n` sorted stably by `compare` on positions.
fn positions(n: usize, compare: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| compare(a, b));
    order
}

/// Puts the element at `order[i]` at `i`, in place: each cycle of the permutation is walked
/// once, every visited position marked as done by `order[j] = j`.
fn reorder<T>(v: &mut [T], mut order: Vec<usize>) {
    for start in 0..v.len() {
        let mut at = start;
        loop {
            let from = order[at];
            order[at] = at;
            if from == start {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn same_order_as_the_slices_stable_sort() {
        // Every permutation of a list with ties (pairs whose second field is the original
        // position, so a difference in how ties are kept shows), against `sort_by_key`.
        let base = [3u8, 1, 3, 0, 1, 2];
        let mut seen = 0;
        let mut stack = vec![(vec![], base.to_vec())];
        while let Some((chosen, left)) = stack.pop() {
            if left.is_empty() {
                let mut ours: Vec<(u8, usize)> = chosen.iter().copied().zip(0..).collect();
                let mut theirs = ours.clone();
                by_key(&mut ours, |p| p.0);
                theirs.sort_by_key(|p| p.0);
                assert_eq!(ours, theirs, "from {chosen:?}");
                seen += 1;
                continue;
            }
            for i in 0..left.len() {
                let (mut c, mut l) = (chosen.clone(), left.clone());
                c.push(l.remove(i));
                stack.push((c, l));
            }
        }
        assert_eq!(seen, 720);
    }

    #[test]
    fn reorders_by_hand() {
        // Descending by the number, ties in their order: (9,b) (9,d) (5,a) (1,c).
        let mut v = vec![(5, 'a'), (9, 'b'), (1, 'c'), (9, 'd')];
        by(&mut v, |x, y| y.0.cmp(&x.0));
        assert_eq!(v, [(9, 'b'), (9, 'd'), (5, 'a'), (1, 'c')]);
        // One cycle through every position: [b c d a] -> by name.
        let mut w = vec!['b', 'c', 'd', 'a'];
        by_key(&mut w, |c| *c);
        assert_eq!(w, ['a', 'b', 'c', 'd']);
        let (mut empty, mut one): (Vec<u8>, Vec<u8>) = (vec![], vec![7]);
        by_key(&mut empty, |x| *x);
        by_key(&mut one, |x| *x);
        assert_eq!((empty, one), (vec![], vec![7]));
    }
}
