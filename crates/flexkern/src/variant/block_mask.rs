//! BlockMask (FlexAttention section 4.2): for every (sequence, head, q-block) the kv-blocks that
//! are partial (the mask must run) and full (the mask is skipped); all others are skipped.
//!
//! Tiles are classified by the shared classifier (`classify.rs`): interval analysis of the mask
//! without touching their elements, exact evaluation of only the tiles it cannot decide. When
//! the mask does not read the head, one entry serves every head (broadcast).

pub use super::classify::BlockKind;
use super::classify::Classifier;
use super::expr::Var;
use super::program::{Program, TileCtx};
use crate::attention::problem::SeqLens;
use crate::error::{invalid, Result};
use rayon::prelude::*;

/// One sequence's slice of the mask.
#[derive(Clone, Debug)]
struct SeqEntry {
    /// This sequence's tile: a mixed batch tiles decode and prefill sequences differently.
    q_block: usize,
    kv_block: usize,
    q_blocks: usize,
    kv_blocks: usize,
    /// Index of this sequence's first row (head 0, q-block 0) in the row tables.
    row0: usize,
    /// Offset of this sequence's first kind in `kinds`.
    kind0: usize,
}

/// The block-sparsity structure of a mask over a batch of sequences. Each sequence has its
/// own tile size (`tiles`); `build` gives every sequence the same one.
#[derive(Clone, Debug)]
pub struct BlockMask {
    /// 1 when the mask does not depend on the head (broadcast), else the number of q heads.
    pub heads: usize,
    seqs: Vec<SeqEntry>,
    /// Dense kinds, `[seq][head][q_block][kv_block]`.
    kinds: Vec<u8>,
    /// FlexAttention form, CSR over rows (seq, head, q_block): partial blocks...
    pub kv_num_blocks: Vec<u32>,
    pub kv_indices: Vec<u32>,
    kv_ptr: Vec<usize>,
    /// ...and full blocks.
    pub full_kv_num_blocks: Vec<u32>,
    pub full_kv_indices: Vec<u32>,
    full_ptr: Vec<usize>,
}

impl BlockMask {
    /// Builds the mask's block structure for `lens` with tiles of `q_block` x `kv_block`.
    /// `mask = None` means every in-range tile is full.
    pub fn build(
        mask: Option<&Program>,
        lens: &SeqLens,
        num_q_heads: usize,
        q_block: usize,
        kv_block: usize,
    ) -> Result<BlockMask> {
        Self::build_tiled(mask, lens, num_q_heads, &|_| (q_block, kv_block))
    }

    /// Builds the mask with sequence `s` tiled `tile(s) = (q_block, kv_block)`.
    pub fn build_tiled(
        mask: Option<&Program>,
        lens: &SeqLens,
        num_q_heads: usize,
        tile: &dyn Fn(usize) -> (usize, usize),
    ) -> Result<BlockMask> {
        let heads = if mask.is_some_and(|m| m.uses(Var::Head)) {
            num_q_heads.max(1)
        } else {
            1
        };
        let mut seqs = Vec::with_capacity(lens.num_seqs());
        let (mut row0, mut kind0) = (0usize, 0usize);
        for s in 0..lens.num_seqs() {
            let (q_block, kv_block) = tile(s);
            if q_block == 0 || kv_block == 0 {
                return Err(invalid("block_size", "block sizes must be positive"));
            }
            let q_blocks = lens.q_len(s).div_ceil(q_block);
            let kv_blocks = lens.kv_len(s).div_ceil(kv_block);
            seqs.push(SeqEntry {
                q_block,
                kv_block,
                q_blocks,
                kv_blocks,
                row0,
                kind0,
            });
            row0 += heads * q_blocks;
            let n = q_blocks
                .checked_mul(kv_blocks)
                .and_then(|x| x.checked_mul(heads))
                .ok_or_else(|| invalid("block_size", "block table size overflows"))?;
            kind0 = kind0
                .checked_add(n)
                .ok_or_else(|| invalid("block_size", "block table size overflows"))?;
        }
        let mut kinds = vec![BlockKind::Full as u8; kind0];
        // Rows (seq, head, q_block) are independent: classify them in parallel.
        let mut rows: Vec<(usize, usize, usize, &mut [u8])> = Vec::with_capacity(row0);
        {
            let mut rest: &mut [u8] = &mut kinds;
            for (s, e) in seqs.iter().enumerate() {
                for hh in 0..heads {
                    for qb in 0..e.q_blocks {
                        let (row, tail) = rest.split_at_mut(e.kv_blocks);
                        rows.push((s, hh, qb, row));
                        rest = tail;
                    }
                }
            }
        }
        if let Some(m) = mask {
            rows.par_iter_mut()
                .for_each_init(Classifier::default, |c, (s, hh, qb, row)| {
                    let (qb_size, kb_size) = (seqs[*s].q_block, seqs[*s].kv_block);
                    classify_row(m, lens, *s, *hh, *qb, qb_size, kb_size, row, c)
                });
        }
        drop(rows);
        let mut bm = BlockMask {
            heads,
            seqs,
            kinds,
            kv_num_blocks: Vec::with_capacity(row0),
            kv_indices: Vec::new(),
            kv_ptr: vec![0],
            full_kv_num_blocks: Vec::with_capacity(row0),
            full_kv_indices: Vec::new(),
            full_ptr: vec![0],
        };
        bm.build_lists();
        Ok(bm)
    }

    fn build_lists(&mut self) {
        for e in &self.seqs {
            for r in 0..self.heads * e.q_blocks {
                let row = &self.kinds[e.kind0 + r * e.kv_blocks..][..e.kv_blocks];
                let (mut np, mut nf) = (0u32, 0u32);
                for (kb, &k) in row.iter().enumerate() {
                    if k == BlockKind::Partial as u8 {
                        self.kv_indices.push(kb as u32);
                        np += 1;
                    } else if k == BlockKind::Full as u8 {
                        self.full_kv_indices.push(kb as u32);
                        nf += 1;
                    }
                }
                self.kv_num_blocks.push(np);
                self.full_kv_num_blocks.push(nf);
                self.kv_ptr.push(self.kv_indices.len());
                self.full_ptr.push(self.full_kv_indices.len());
            }
        }
    }

    pub fn num_seqs(&self) -> usize {
        self.seqs.len()
    }
    pub fn q_blocks(&self, seq: usize) -> usize {
        self.seqs[seq].q_blocks
    }
    pub fn kv_blocks(&self, seq: usize) -> usize {
        self.seqs[seq].kv_blocks
    }
    /// Sequence `seq`'s tile, `(q_block, kv_block)`.
    pub fn tiles(&self, seq: usize) -> (usize, usize) {
        let e = &self.seqs[seq];
        (e.q_block, e.kv_block)
    }
    /// The tile every sequence shares, if they all share one (always for `build`; an empty
    /// batch has none).
    pub fn uniform_tiles(&self) -> Option<(usize, usize)> {
        let first = self.seqs.first().map(|e| (e.q_block, e.kv_block))?;
        (0..self.seqs.len())
            .all(|s| self.tiles(s) == first)
            .then_some(first)
    }

    fn row(&self, seq: usize, head: usize, qb: usize) -> usize {
        let e = &self.seqs[seq];
        let hh = if self.heads == 1 { 0 } else { head };
        e.row0 + hh * e.q_blocks + qb
    }

    /// The kinds of every kv-block of one row.
    pub fn kinds(&self, seq: usize, head: usize, qb: usize) -> &[u8] {
        let e = &self.seqs[seq];
        let hh = if self.heads == 1 { 0 } else { head };
        &self.kinds[e.kind0 + (hh * e.q_blocks + qb) * e.kv_blocks..][..e.kv_blocks]
    }

    pub fn kind(&self, seq: usize, head: usize, qb: usize, kb: usize) -> BlockKind {
        match self.kinds(seq, head, qb)[kb] {
            0 => BlockKind::Empty,
            1 => BlockKind::Partial,
            _ => BlockKind::Full,
        }
    }

    /// Partial kv-blocks of a row, ascending.
    pub fn partial_blocks(&self, seq: usize, head: usize, qb: usize) -> &[u32] {
        let r = self.row(seq, head, qb);
        &self.kv_indices[self.kv_ptr[r]..self.kv_ptr[r + 1]]
    }

    /// Full kv-blocks of a row, ascending.
    pub fn full_blocks(&self, seq: usize, head: usize, qb: usize) -> &[u32] {
        let r = self.row(seq, head, qb);
        &self.full_kv_indices[self.full_ptr[r]..self.full_ptr[r + 1]]
    }

    /// Whether this mask was built for exactly these lengths and head count.
    pub fn matches(&self, lens: &SeqLens, num_q_heads: usize) -> bool {
        self.seqs.len() == lens.num_seqs()
            && (self.heads == 1 || self.heads == num_q_heads)
            && self.seqs.iter().enumerate().all(|(s, e)| {
                e.q_blocks == lens.q_len(s).div_ceil(e.q_block)
                    && e.kv_blocks == lens.kv_len(s).div_ceil(e.kv_block)
            })
    }

    /// Fraction of in-range tiles that are visited (partial or full): the work the kernel does.
    pub fn density(&self) -> f64 {
        self.density_of(&|_| true)
    }

    /// `density` over the sequences `s` with `pick(s)` only.
    pub fn density_of(&self, pick: &dyn Fn(usize) -> bool) -> f64 {
        let (mut visited, mut all) = (0usize, 0usize);
        for (_, e) in self.seqs.iter().enumerate().filter(|(s, _)| pick(*s)) {
            let n = self.heads * e.q_blocks * e.kv_blocks;
            let kinds = &self.kinds[e.kind0..][..n];
            visited += kinds.iter().filter(|&&k| k != 0).count();
            all += n;
        }
        visited as f64 / all.max(1) as f64
    }
}

#[allow(clippy::too_many_arguments)]
fn classify_row(
    m: &Program,
    lens: &SeqLens,
    s: usize,
    head: usize,
    qb: usize,
    q_block: usize,
    kv_block: usize,
    row: &mut [u8],
    classifier: &mut Classifier,
) {
    let (ql, kl) = (lens.q_len(s) as i64, lens.kv_len(s) as i64);
    let q0 = (qb * q_block) as i64;
    let mut t = TileCtx {
        batch: s as i64,
        head: head as i64,
        q_len: ql,
        kv_len: kl,
        q_pos0: kl - ql + q0,
        q_token0: lens.q_start(s) as i64 + q0,
        rows: (q_block as i64).min(ql - q0) as usize,
        kv_pos0: 0,
        cols: 0,
    };
    for (kb, kind) in row.iter_mut().enumerate() {
        t.kv_pos0 = (kb * kv_block) as i64;
        t.cols = (kv_block as i64).min(kl - t.kv_pos0) as usize;
        *kind = classifier.classify(m, &t).kind() as u8;
    }
}
