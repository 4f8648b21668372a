//! `flexkern bench attn --device cuda --only prefill`: prefill and chunked-prefill attention
//! (issue 15's shapes and variants), bf16, timed with CUDA events around the launches of a
//! prepared call. Planning (the work list and its BlockMask-style trimming, the step upload) is
//! host work done once per batch shape, like FlexAttention's `create_block_mask`; it is timed
//! separately and reported beside the kernel time.

use super::{random, time_ms};
use crate::attention::{self, AttnCall, KvInput, KvOperand, PagedKv, QInput};
use crate::error::Result;
use crate::runtime::Device;
use flexkern::attention::problem::SeqLens;
use flexkern::builtins::{alibi, alibi_slopes, causal, document, sliding_window, softcap};
use flexkern::verify::Rng;
use flexkern::{DType, Variant};
use std::sync::Arc;

/// The variants of issue 15's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mod {
    Causal,
    Full,
    Sliding1024,
    Softcap30,
    Alibi,
    Document4,
}

impl Mod {
    pub const ALL: [Mod; 6] = [
        Mod::Causal,
        Mod::Full,
        Mod::Sliding1024,
        Mod::Softcap30,
        Mod::Alibi,
        Mod::Document4,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Mod::Causal => "causal",
            Mod::Full => "non-causal",
            Mod::Sliding1024 => "sliding 1024",
            Mod::Softcap30 => "causal + softcap 30",
            Mod::Alibi => "causal + alibi",
            Mod::Document4 => "document (4 docs, causal)",
        }
    }

    fn variant(self, heads: usize, kv_len: usize) -> Variant {
        let v = Variant::full();
        match self {
            Mod::Full => v,
            Mod::Causal => v.mask(causal()),
            Mod::Sliding1024 => v.mask(causal()).mask(sliding_window(1024)),
            Mod::Softcap30 => v.mask(causal()).score(softcap(30.0)),
            Mod::Alibi => v.mask(causal()).score(alibi(alibi_slopes(heads))),
            Mod::Document4 => {
                let ids = (0..kv_len as i64).map(|i| i * 4 / kv_len as i64).collect();
                v.mask(causal()).mask(document(ids))
            }
        }
    }

    /// Visible (query, key) pairs of one head: `q` queries at the end of `kv` keys.
    pub fn pairs(self, q: usize, kv: usize) -> usize {
        let off = kv - q;
        (0..q)
            .map(|i| {
                let p = off + i;
                match self {
                    Mod::Full => kv,
                    Mod::Sliding1024 => (p + 1).min(1024),
                    Mod::Document4 => p + 1 - (p * 4 / kv) * kv / 4,
                    _ => p + 1,
                }
            })
            .sum()
    }
}

/// One prefill case: `batch` sequences of `q_len` new queries after `prefix` cached keys,
/// `heads` query and KV heads of size `d`.
#[derive(Clone, Debug)]
pub struct PrefillCase {
    pub batch: usize,
    pub heads: usize,
    pub q_len: usize,
    pub prefix: usize,
    pub d: usize,
    pub variant: Mod,
    pub page_size: Option<usize>,
}

impl PrefillCase {
    pub fn name(&self) -> String {
        let kv = match self.page_size {
            Some(p) => format!(" paged{p}"),
            None => String::new(),
        };
        if self.prefix > 0 {
            format!(
                "chunked prefill {} on {} prefix H{} D{} {}{kv}",
                self.q_len,
                self.prefix,
                self.heads,
                self.d,
                self.variant.label()
            )
        } else {
            format!(
                "prefill B{} H{} S{} D{} {}{kv}",
                self.batch,
                self.heads,
                self.q_len,
                self.d,
                self.variant.label()
            )
        }
    }

    /// Floating-point work counted as attention kernels do: 4 D per visible pair (QKᵀ and PV).
    pub fn flops(&self) -> f64 {
        let pairs = self.variant.pairs(self.q_len, self.prefix + self.q_len);
        4.0 * (self.d * self.batch * self.heads) as f64 * pairs as f64
    }
}

/// Issue 15's cases: B2 H16 S8192 D128 and B4 H16 S4096 D64 under every variant, then 512 new
/// queries on a 32k prefix (paged by 16, and contiguous for the ratio). `quick` shrinks them.
pub fn prefill_cases(quick: bool) -> Vec<PrefillCase> {
    let case = |batch, heads, q_len, prefix, d, variant, page_size| PrefillCase {
        batch,
        heads,
        q_len,
        prefix,
        d,
        variant,
        page_size,
    };
    let mut v = Vec::new();
    let shapes = if quick {
        vec![(1, 4, 1024, 128)]
    } else {
        vec![(2, 16, 8192, 128), (4, 16, 4096, 64)]
    };
    for (b, h, s, d) in shapes {
        for m in Mod::ALL {
            v.push(case(b, h, s, 0, d, m, None));
        }
    }
    let (prefix, q) = if quick { (4096, 128) } else { (32768, 512) };
    for p in [Some(16), None] {
        v.push(case(1, 16, q, prefix, 128, Mod::Causal, p));
    }
    v
}

/// What one prefill case ran.
pub struct PrefillRun {
    pub ms: f64,
    /// Host planning and step upload, once per batch shape.
    pub plan_ms: f64,
    pub kernel: String,
    pub blocks: usize,
    pub regs: i32,
    pub local_bytes: i32,
    /// The last launch's block timeline (`FLEXKERN_CUDA_TRACE=1`).
    pub trace: Option<String>,
}

/// Times one case: median milliseconds of the attention and merge launches.
pub fn prefill(dev: &Arc<Device>, c: &PrefillCase, reps: usize) -> Result<PrefillRun> {
    let (b, h, d) = (c.batch, c.heads, c.d);
    let kv_len = c.prefix + c.q_len;
    let lens = SeqLens::uniform(b, c.q_len, kv_len);
    let q = random(dev, b * c.q_len * h * d, DType::BF16, 11)?;
    let k = random(dev, b * kv_len * h * d, DType::BF16, 12)?;
    let v = random(dev, b * kv_len * h * d, DType::BF16, 13)?;
    let out = dev.alloc(b * c.q_len * h * d * 4)?;
    let lse = dev.alloc(b * c.q_len * h * 4)?;
    let variant = c.variant.variant(h, kv_len).compile()?;
    let q_base: Vec<usize> = (0..b).map(|i| i * c.q_len * h * d).collect();
    let kv_base: Vec<usize> = (0..b).map(|i| i * kv_len * h * d).collect();
    let (cu, first, pages) = c.page_size.map_or((vec![0], vec![0; b], vec![]), |ps| {
        shuffled_pages(b, kv_len.div_ceil(ps), 5)
    });
    let operand = |buf| KvOperand {
        buf,
        dtype: DType::BF16,
        seq_base: &kv_base,
        tok_stride: h * d,
        head_stride: d,
    };
    let kv = match c.page_size {
        None => KvInput::Strided {
            k: operand(&k),
            v: operand(&v),
        },
        Some(ps) => KvInput::Paged(PagedKv {
            k: &k,
            v: &v,
            k_dtype: DType::BF16,
            v_dtype: DType::BF16,
            page_size: ps,
            num_pages: b * kv_len.div_ceil(ps),
            cu_pages: &cu,
            first_page: &first,
            page_indices: &pages,
            device_tables: None,
        }),
    };
    let call = AttnCall {
        lens: &lens,
        num_q_heads: h,
        num_kv_heads: h,
        head_dim: d,
        head_dim_v: d,
        scale: 1.0 / (d as f32).sqrt(),
        variant: &variant,
        q: QInput {
            buf: &q,
            dtype: DType::BF16,
            seq_base: &q_base,
            tok_stride: h * d,
            head_stride: d,
        },
        kv,
        k_scales: &[],
        v_scales: &[],
        out: &out,
        lse: Some(&lse),
        deterministic: false,
    };
    dev.synchronize()?;
    let t = std::time::Instant::now();
    let p = attention::prepare(dev, &call)?.expect("non-empty");
    dev.synchronize()?;
    let plan_ms = t.elapsed().as_secs_f64() * 1e3;
    let (regs, local_bytes) = p.kernel_resources()?;
    let ms = time_ms(dev, 2, reps, || p.launch())?;
    let trace = p.block_trace()?.map(|t| t.summary(dev.props.sms));
    Ok(PrefillRun {
        ms,
        plan_ms,
        kernel: p.config.name(),
        blocks: p.plan.items.len() * h,
        regs,
        local_bytes,
        trace,
    })
}

/// Page tables of `b` sequences of `per` pages each, pages shuffled over the pool (so no two
/// neighbouring pages are adjacent in memory): (cu_pages, first_page, page_indices).
pub fn shuffled_pages(b: usize, per: usize, seed: u64) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut order: Vec<u32> = (0..(b * per) as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let cu = (0..=b).map(|i| (i * per) as u32).collect();
    (cu, vec![0; b], order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_counts_match_the_masks() {
        // Brute force over a small square and a chunk on a prefix.
        for (q, kv) in [(64, 64), (16, 80)] {
            let off = (kv - q) as i64;
            for m in Mod::ALL {
                let ids: Vec<i64> = (0..kv as i64).map(|i| i * 4 / kv as i64).collect();
                let mut n = 0;
                for i in 0..q as i64 {
                    let p = off + i;
                    for k in 0..kv as i64 {
                        let vis = match m {
                            Mod::Full => true,
                            Mod::Sliding1024 => k <= p && k > p - 1024,
                            Mod::Document4 => k <= p && ids[p as usize] == ids[k as usize],
                            _ => k <= p,
                        };
                        n += vis as usize;
                    }
                }
                assert_eq!(m.pairs(q, kv), n, "{m:?} {q}x{kv}");
            }
        }
    }

    #[test]
    fn pages_are_a_permutation() {
        let (cu, first, mut pages) = shuffled_pages(3, 5, 1);
        assert_eq!((cu, first), (vec![0, 5, 10, 15], vec![0; 3]));
        pages.sort();
        assert_eq!(pages, (0..15).collect::<Vec<u32>>());
    }
}
