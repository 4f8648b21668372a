//! Byte-level BPE (GPT-2 style): bytes map to printable code points, then ranked merges.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// GPT-2's reversible byte -> char table: printable Latin-1 bytes map to themselves, the rest to
/// U+0100 upwards, so every token is printable text.
pub fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let cp = if printable {
            b
        } else {
            next += 1;
            next - 1
        };
        // All code points used are below U+0180, so always valid.
        table[b as usize] = char::from_u32(cp).unwrap_or('\0');
    }
    table
}

/// Ranked merges over token ids: (left, right) -> (rank, merged id).
pub struct BpeMerges {
    ranks: HashMap<(u32, u32), (u32, u32)>,
}

impl BpeMerges {
    /// Builds from "left right" merge lines; merges whose parts or result are not in the vocab
    /// can never fire, so they are skipped. Returns the number skipped too.
    pub fn new(merges: &[&str], vocab: &HashMap<String, u32>) -> (Self, usize) {
        let mut ranks = HashMap::with_capacity(merges.len());
        let mut skipped = 0;
        for (rank, line) in merges.iter().enumerate() {
            let ids = line.split_once(' ').and_then(|(l, r)| {
                let merged = format!("{l}{r}");
                Some((*vocab.get(l)?, *vocab.get(r)?, *vocab.get(&merged)?))
            });
            match ids {
                // The first (lowest-rank) entry for a pair wins.
                Some((l, r, m)) => {
                    ranks.entry((l, r)).or_insert((rank as u32, m));
                }
                None => skipped += 1,
            }
        }
        (Self { ranks }, skipped)
    }

    /// Applies merges lowest rank first, leftmost among equal ranks (HF's order), using a heap
    /// over a linked list so long words stay O(n log n).
    pub fn apply(&self, symbols: &mut Vec<u32>) {
        let n = symbols.len();
        if n < 2 {
            return;
        }
        // Linked list over positions; a merged-away position is marked dead.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<Reverse<(u32, usize, u32, u32)>>,
                    s: &[u32],
                    l: usize,
                    r: usize| {
            if let Some(&(rank, _)) = self.ranks.get(&(s[l], s[r])) {
                heap.push(Reverse((rank, l, s[l], s[r])));
            }
        };
        for i in 0..n - 1 {
            push(&mut heap, symbols, i, i + 1);
        }
        while let Some(Reverse((_, l, a, b))) = heap.pop() {
            let r = next[l];
            // Stale if either side changed since this pair was queued.
            if !alive[l] || r >= n || symbols[l] != a || symbols[r] != b {
                continue;
            }
            let Some(&(_, merged)) = self.ranks.get(&(a, b)) else {
                continue;
            };
            symbols[l] = merged;
            alive[r] = false;
            next[l] = next[r];
            if next[l] < n {
                prev[next[l]] = l;
            }
            if prev[l] < n {
                push(&mut heap, symbols, prev[l], l);
            }
            if next[l] < n {
                push(&mut heap, symbols, l, next[l]);
            }
        }
        let mut out = Vec::with_capacity(n);
        out.extend((0..n).filter(|&i| alive[i]).map(|i| symbols[i]));
        *symbols = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_table_is_a_bijection() {
        let t = byte_to_char_table();
        let set: std::collections::HashSet<char> = t.iter().copied().collect();
        assert_eq!(set.len(), 256);
        assert_eq!(t[b' ' as usize], '\u{120}');
        assert_eq!(t[b'a' as usize], 'a');
    }

    #[test]
    fn merges_follow_rank() {
        let vocab: HashMap<String, u32> = ["a", "b", "c", "ab", "bc", "abc"]
            .iter()
            .enumerate()
            .map(|(i, s)| (s.to_string(), i as u32))
            .collect();
        let (m, skipped) = BpeMerges::new(&["b c", "a bc", "a b", "x y"], &vocab);
        assert_eq!(skipped, 1);
        let mut s = vec![0, 1, 2];
        m.apply(&mut s);
        assert_eq!(s, vec![5]);
    }
    /// Reference: repeatedly merge the leftmost occurrence of the lowest-ranked pair.
    fn naive(m: &BpeMerges, mut s: Vec<u32>) -> Vec<u32> {
        loop {
            let best = (0..s.len().saturating_sub(1))
                .filter_map(|i| m.ranks.get(&(s[i], s[i + 1])).map(|&(r, id)| (r, i, id)))
                .min_by_key(|&(r, i, _)| (r, i));
            let Some((_, i, id)) = best else { return s };
            s[i] = id;
            s.remove(i + 1);
        }
    }

    #[test]
    fn heap_merges_match_naive_order_on_random_vocabs() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..50 {
            let mut vocab: HashMap<String, u32> = HashMap::new();
            let mut names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
            let mut merges = Vec::new();
            for n in &names {
                vocab.insert(n.clone(), vocab.len() as u32);
            }
            for _ in 0..30 {
                let l = names[rng.gen_range(0..names.len())].clone();
                let r = names[rng.gen_range(0..names.len())].clone();
                let joined = format!("{l}{r}");
                if !vocab.contains_key(&joined) {
                    vocab.insert(joined.clone(), vocab.len() as u32);
                    names.push(joined);
                }
                merges.push(format!("{l} {r}"));
            }
            let refs: Vec<&str> = merges.iter().map(String::as_str).collect();
            let (m, _) = BpeMerges::new(&refs, &vocab);
            for _ in 0..20 {
                let s: Vec<u32> = (0..rng.gen_range(0..40))
                    .map(|_| rng.gen_range(0..3))
                    .collect();
                let mut fast = s.clone();
                m.apply(&mut fast);
                assert_eq!(fast, naive(&m, s));
            }
        }
    }
}
