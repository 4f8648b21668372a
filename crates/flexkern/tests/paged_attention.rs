//! Paged KV cache and ragged paged attention: paged vs contiguous on shuffled page orders and
//! page sizes, forks and copy-on-write, window eviction, quantized KV against the oracle on the
//! dequantized cache, exhaustion and bad input.

use flexkern::attention::kv::{KvRow, KvSource};
use flexkern::attention::paged::{paged_attention, prepare};
use flexkern::builtins::{causal, sliding_window, softcap, tree};
use flexkern::dtype::DType;
use flexkern::expr::{int, kv_pos, q_pos};
use flexkern::kv_cache::{CacheConfig, KvCache, PageBuf, PageLayout, PagedKv, Scales, SeqId};
use flexkern::{reference, AttentionArgs, BlockMask, CpuBackend, Error, TensorView, Variant};
use rand::{rngs::StdRng, Rng, SeedableRng};

const HQ: usize = 4;
const HKV: usize = 2;
const D: usize = 16;

fn rand_vec(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

/// A ragged batch held contiguously: K/V `[total_kv, HKV, D]`, per-sequence (q_len, kv_len).
struct Batch {
    lens: Vec<(usize, usize)>,
    k: Vec<f32>,
    v: Vec<f32>,
    q: Vec<f32>,
}

impl Batch {
    fn new(seed: u64, lens: &[(usize, usize)]) -> Batch {
        let mut rng = StdRng::seed_from_u64(seed);
        let kv: usize = lens.iter().map(|l| l.1).sum();
        let nq: usize = lens.iter().map(|l| l.0).sum();
        Batch {
            lens: lens.to_vec(),
            k: rand_vec(&mut rng, kv * HKV * D),
            v: rand_vec(&mut rng, kv * HKV * D),
            q: rand_vec(&mut rng, nq * HQ * D),
        }
    }
    fn cu(&self, f: impl Fn(&(usize, usize)) -> usize) -> Vec<u64> {
        let mut c = vec![0u64];
        for l in &self.lens {
            c.push(c.last().unwrap() + f(l) as u64);
        }
        c
    }
    fn q_view(&self) -> TensorView<'_> {
        TensorView::contiguous(&self.q[..], &[self.q.len() / (HQ * D), HQ, D])
    }
    /// Rows `[a, b)` of K and V.
    fn kv_rows(&self, a: usize, b: usize) -> (TensorView<'_>, TensorView<'_>) {
        let n = HKV * D;
        (
            TensorView::contiguous(&self.k[a * n..b * n], &[b - a, HKV, D]),
            TensorView::contiguous(&self.v[a * n..b * n], &[b - a, HKV, D]),
        )
    }
    /// A cache holding every sequence, appended in chunks of `chunk` tokens into shuffled pages.
    fn cache(&self, cfg: CacheConfig, chunk: usize, seed: u64) -> (KvCache, Vec<SeqId>) {
        let mut c = KvCache::new(cfg).unwrap();
        c.shuffle_free_pages(seed);
        let mut ids = Vec::new();
        let mut base = 0;
        for &(_, kl) in &self.lens {
            let id = c.add_seq();
            let mut t = 0;
            while t < kl {
                let e = (t + chunk).min(kl);
                let (k, v) = self.kv_rows(base + t, base + e);
                c.append(id, &k, &v).unwrap();
                t = e;
            }
            base += kl;
            ids.push(id);
        }
        (c, ids)
    }
}

fn pages_for(lens: &[(usize, usize)], ps: usize) -> usize {
    lens.iter().map(|l| l.1.div_ceil(ps)).sum()
}

/// max |a - b| / max |b|; NaN in `a` gives infinity.
fn rel_err(a: &[f32], b: &[f64]) -> f64 {
    let scale = b.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
    a.iter().zip(b).fold(0.0, |m, (&x, &y)| {
        let e = (x as f64 - y).abs();
        if e.is_nan() {
            f64::INFINITY
        } else {
            m.max(e / scale)
        }
    })
}

fn lse_ok(a: &[f32], b: &[f64], tol: f64) -> bool {
    a.iter().zip(b).all(|(&x, &y)| {
        (x == f32::NEG_INFINITY && y == f64::NEG_INFINITY) || (x as f64 - y).abs() <= tol
    })
}

/// Runs paged attention (outputs poisoned with NaN) and checks it against the oracle read
/// through `oracle_kv`; returns the output.
fn run_and_check(
    b: &Batch,
    kv: &PagedKv,
    oracle_kv: &dyn KvSource,
    variant: &Variant,
    tol: f64,
) -> Vec<f32> {
    let cu_q = b.cu(|l| l.0);
    let q = b.q_view();
    let nq = q.shape[0];
    let mut out = vec![f32::NAN; nq * HQ * D];
    let mut lse = vec![f32::NAN; nq * HQ];
    paged_attention(
        &CpuBackend::default(),
        &q,
        &cu_q,
        kv,
        Some(0.3),
        variant,
        None,
        &mut out,
        Some(&mut lse),
    )
    .unwrap();
    let p = prepare(&q, &cu_q, kv, Some(0.3), variant).unwrap();
    let r = reference::attention(&p, oracle_kv);
    let e = rel_err(&out, &r.o);
    assert!(e <= tol, "output error {e} > {tol}");
    assert!(lse_ok(&lse, &r.lse, tol * 10.0), "lse differs");
    out
}

/// The contiguous KV of a batch, for the oracle on the original (unpaged) data.
fn contiguous<'a>(
    b: &'a Batch,
    cu_q: &'a [u64],
    cu_kv: &'a [u64],
    v: &Variant,
) -> impl KvSource + 'a {
    let args = AttentionArgs::new(
        b.q_view(),
        TensorView::contiguous(&b.k[..], &[b.k.len() / (HKV * D), HKV, D]),
        TensorView::contiguous(&b.v[..], &[b.v.len() / (HKV * D), HKV, D]),
    )
    .ragged(cu_q, cu_kv)
    .variant(v.clone());
    args.prepare().unwrap().1
}

/// Prefill chunks, decode tokens, an empty query and an empty sequence in one batch.
const MIXED: &[(usize, usize)] = &[
    (37, 100),
    (1, 300),
    (0, 20),
    (5, 5),
    (1, 1),
    (0, 0),
    (3, 77),
];

fn row_f32(r: KvRow) -> Vec<f32> {
    let mut v = vec![0f32; r.len()];
    r.to_f32(&mut v);
    v
}

#[test]
fn paged_rows_equal_contiguous_rows_for_every_page_size() {
    let b = Batch::new(1, MIXED);
    for ps in [1, 16, 64, 256, 24, 3] {
        let cfg = CacheConfig::new(pages_for(MIXED, ps) + 3, ps, HKV, D);
        let (cache, ids) = b.cache(cfg, 13, ps as u64);
        let kv = cache.view(&ids).unwrap();
        let mut base = 0;
        for (s, &(_, kl)) in MIXED.iter().enumerate() {
            assert_eq!(kv.kv_len(s), kl);
            for pos in 0..kl {
                for h in 0..HKV {
                    let at = ((base + pos) * HKV + h) * D;
                    assert_eq!(row_f32(kv.k_row(s, h, pos)), b.k[at..at + D], "ps {ps}");
                    assert_eq!(row_f32(kv.v_row(s, h, pos)), b.v[at..at + D], "ps {ps}");
                }
            }
            base += kl;
        }
    }
}

fn variants() -> Vec<(&'static str, Variant)> {
    // Tree over the last 3 tokens of the (3, 77) sequence: a chain, so token i sees 0..=i.
    let q_total: usize = MIXED.iter().map(|l| l.0).sum();
    let bits: Vec<i64> = (0..q_total)
        .map(|t| {
            if t + 3 >= q_total {
                (1 << (t + 4 - q_total)) - 1
            } else {
                -1
            }
        })
        .collect();
    vec![
        ("full", Variant::full()),
        ("causal", Variant::full().mask(causal())),
        (
            "window",
            Variant::full().mask(causal()).mask(sliding_window(19)),
        ),
        (
            "softcap",
            Variant::full().mask(causal()).score(softcap(2.0)),
        ),
        ("tree", Variant::full().mask(tree(bits))),
        (
            "sinks",
            Variant::full()
                .mask(causal())
                .sinks(vec![0.5, -1.0, 2.0, f32::NEG_INFINITY]),
        ),
        // A custom mod on positions: would break if the kernel saw physical slots.
        (
            "custom",
            Variant::full().mask(((q_pos() - kv_pos()) % 3).ne(int(1))),
        ),
    ]
}

#[test]
fn paged_attention_matches_contiguous_oracle_on_shuffled_pages() {
    let b = Batch::new(2, MIXED);
    let (cu_q, cu_kv) = (b.cu(|l| l.0), b.cu(|l| l.1));
    for ps in [1, 16, 64, 256, 24] {
        let cfg = CacheConfig::new(pages_for(MIXED, ps) + 2, ps, HKV, D);
        let (cache, ids) = b.cache(cfg, 29, 100 + ps as u64);
        let kv = cache.view(&ids).unwrap();
        for (name, var) in variants() {
            let ckv = contiguous(&b, &cu_q, &cu_kv, &var);
            eprintln!("page size {ps}, {name}");
            run_and_check(&b, &kv, &ckv, &var, 1e-5);
        }
    }
}
