//! SentencePiece-style BPE (llama): merge the adjacent pair whose concatenation is the
//! highest-scoring vocab entry, then fall back to `<0xXX>` byte tokens for unknown characters.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// SentencePiece's visible space.
pub const SPACE: char = '\u{2581}';

struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    // Max-heap: highest score first, then the leftmost pair.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| o.left.cmp(&self.left))
    }
}

/// Encodes already-escaped text (spaces replaced by U+2581) into ids.
pub fn encode(
    text: &str,
    vocab: &HashMap<String, u32>,
    scores: &[f32],
    byte_ids: &[Option<u32>; 256],
    unk: Option<u32>,
    out: &mut Vec<u32>,
) {
    let mut syms: Vec<Symbol> = text
        .char_indices()
        .map(|(i, c)| Symbol {
            start: i,
            len: c.len_utf8(),
            prev: None,
            next: None,
        })
        .collect();
    let n = syms.len();
    for (i, s) in syms.iter_mut().enumerate() {
        s.prev = i.checked_sub(1);
        s.next = (i + 1 < n).then_some(i + 1);
    }
    let mut heap = BinaryHeap::new();
    let try_pair = |heap: &mut BinaryHeap<Bigram>, syms: &[Symbol], l: usize, r: usize| {
        let (a, b) = (&syms[l], &syms[r]);
        let piece = &text[a.start..b.start + b.len];
        if let Some(&id) = vocab.get(piece) {
            let score = scores.get(id as usize).copied().unwrap_or(0.0);
            heap.push(Bigram {
                score,
                left: l,
                right: r,
                len: piece.len(),
            });
        }
    };
    for i in 1..n {
        try_pair(&mut heap, &syms, i - 1, i);
    }
    while let Some(bg) = heap.pop() {
        let (l, r) = (bg.left, bg.right);
        // Skip stale entries: a side was merged away or changed since it was queued
        // (a dead symbol keeps its old `next`, so liveness is checked on both sides).
        let stale = syms[l].len == 0
            || syms[r].len == 0
            || syms[l].next != Some(r)
            || syms[l].len + syms[r].len != bg.len;
        if stale {
            continue;
        }
        syms[l].len += syms[r].len;
        syms[r].len = 0;
        syms[l].next = syms[r].next;
        if let Some(nx) = syms[r].next {
            syms[nx].prev = Some(l);
        }
        if let Some(p) = syms[l].prev {
            try_pair(&mut heap, &syms, p, l);
        }
        if let Some(nx) = syms[l].next {
            try_pair(&mut heap, &syms, l, nx);
        }
    }
    let mut cur = (n > 0).then_some(0);
    while let Some(i) = cur {
        let s = &syms[i];
        let piece = &text[s.start..s.start + s.len];
        match vocab.get(piece) {
            Some(&id) => out.push(id),
            None => {
                for b in piece.bytes() {
                    if let Some(id) = byte_ids[b as usize].or(unk) {
                        out.push(id);
                    }
                }
            }
        }
        cur = s.next;
    }
}

/// Parses a byte-fallback token `<0xXX>`.
pub fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "ab" merges first (killing "b"), then "cd"; the queued "bc" pair is stale and must not
    /// fire even though its length still matches.
    #[test]
    fn stale_pairs_after_a_dead_left_symbol_are_skipped() {
        let pieces = ["a", "b", "c", "d", "ab", "cd", "bc"];
        let scores = [-9.0, -9.0, -9.0, -9.0, -1.0, -2.0, -3.0];
        let vocab = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (p.to_string(), i as u32))
            .collect();
        let mut out = Vec::new();
        encode("abcd", &vocab, &scores, &[None; 256], None, &mut out);
        assert_eq!(out, vec![4, 5]);
    }

    #[test]
    fn byte_tokens_parse() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(10));
        assert_eq!(parse_byte_token("<0xZZ>"), None);
        assert_eq!(parse_byte_token("<0x0AB>"), None);
    }
    #[test]
    fn heap_matches_naive_highest_score_leftmost() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for _ in 0..40 {
            let mut pieces: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
            for _ in 0..25 {
                let l = pieces[rng.gen_range(0..pieces.len())].clone();
                let r = pieces[rng.gen_range(0..pieces.len())].clone();
                let joined = l + &r;
                if !pieces.contains(&joined) {
                    pieces.push(joined);
                }
            }
            // Few distinct scores so ties (broken leftmost) are common.
            let scores: Vec<f32> = pieces.iter().map(|_| rng.gen_range(0..4) as f32).collect();
            let vocab: HashMap<String, u32> = pieces
                .iter()
                .enumerate()
                .map(|(i, p)| (p.clone(), i as u32))
                .collect();
            for _ in 0..20 {
                let text: String = (0..rng.gen_range(0..30))
                    .map(|_| ['a', 'b', 'c'][rng.gen_range(0..3)])
                    .collect();
                let mut fast = Vec::new();
                encode(&text, &vocab, &scores, &[None; 256], None, &mut fast);
                // Reference: merge the best-scoring adjacent pair, leftmost on ties.
                let mut syms: Vec<String> = text.chars().map(String::from).collect();
                loop {
                    let best = (0..syms.len().saturating_sub(1))
                        .filter_map(|i| {
                            let id = *vocab.get(&format!("{}{}", syms[i], syms[i + 1]))?;
                            Some((scores[id as usize], i))
                        })
                        .fold(None, |acc: Option<(f32, usize)>, (sc, i)| match acc {
                            Some((bs, _)) if bs >= sc => acc,
                            _ => Some((sc, i)),
                        });
                    let Some((_, i)) = best else { break };
                    let r = syms.remove(i + 1);
                    syms[i].push_str(&r);
                }
                let naive: Vec<u32> = syms.iter().map(|s| vocab[s]).collect();
                assert_eq!(fast, naive, "text {text:?}");
            }
        }
    }
}
