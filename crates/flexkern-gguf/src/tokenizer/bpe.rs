//! Byte-level BPE (GPT-2 style): bytes map to printable code points, then ranked merges.

use std::collections::HashMap;

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

    /// Applies merges to a symbol sequence, lowest rank first, leftmost among equals.
    pub fn apply(&self, symbols: &mut Vec<u32>) {
        loop {
            let best = symbols
                .windows(2)
                .filter_map(|w| {
                    self.ranks
                        .get(&(w[0], w[1]))
                        .map(|&(r, m)| (r, w[0], w[1], m))
                })
                .min_by_key(|&(r, ..)| r);
            let Some((_, l, r, merged)) = best else { break };
            // Merge every non-overlapping occurrence of this pair, left to right.
            let mut out = Vec::with_capacity(symbols.len());
            let mut i = 0;
            while i < symbols.len() {
                if i + 1 < symbols.len() && symbols[i] == l && symbols[i + 1] == r {
                    out.push(merged);
                    i += 2;
                } else {
                    out.push(symbols[i]);
                    i += 1;
                }
            }
            *symbols = out;
        }
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
}
