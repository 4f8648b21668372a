//! Paged KV cache and ragged paged attention: paged vs contiguous on shuffled page orders and
//! page sizes, forks and copy-on-write, window eviction, quantized KV against the oracle on the
//! dequantized cache, exhaustion and bad input.

use flexkern::attention::kv::{KvRow, KvSource};
use flexkern::attention::paged::{paged_attention, prepare};
use flexkern::backend::host::{HostBuffer, HostStore};
use flexkern::builtins::{causal, sliding_window, softcap, tree};
use flexkern::expr::{int, kv_pos, q_pos};
use flexkern::kv_cache::{
    kv_lens_from_last_page, CacheConfig, PageStore, PageTables, PagedBinding, Scales, SeqId,
};
use flexkern::reference::Reference;
use flexkern::DType;
use flexkern::{
    reference, AttentionArgs, Backend, BlockMask, CpuBackend, Error, TensorView, Variant,
};

type KvCache = flexkern::kv_cache::KvCache<CpuBackend>;
type Binding<'a> = PagedBinding<'a, HostBuffer>;
use rand::{rngs::StdRng, Rng, SeedableRng};

const HQ: usize = 4;
const HKV: usize = 2;
const D: usize = 16;

/// Works whether the backend is a unit struct or carries state.
fn backend() -> CpuBackend {
    CpuBackend
}

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
        let mut c = KvCache::new(&backend(), cfg).unwrap();
        c.shuffle_free_pages(seed);
        let mut ids = Vec::new();
        let mut base = 0;
        for &(_, kl) in &self.lens {
            let id = c.add_seq();
            let mut t = 0;
            while t < kl {
                let e = (t + chunk).min(kl);
                let (k, v) = self.kv_rows(base + t, base + e);
                c.append(&backend(), id, &k, &v).unwrap();
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

/// What a paged run is checked against.
enum Oracle<'a> {
    /// The f64 result on the original (unpaged) data.
    Contiguous(&'a Reference),
    /// The oracle reading the same (dequantized) pages.
    Pages,
}

/// Runs paged attention (outputs poisoned with NaN) and checks it against the oracle; returns
/// the output.
fn run_and_check(b: &Batch, kv: &Binding, oracle: Oracle, variant: &Variant, tol: f64) -> Vec<f32> {
    run_and_check_on(&backend(), b, kv, oracle, variant, tol)
}

fn run_and_check_on<B: Backend<Buffer = HostBuffer>>(
    be: &B,
    b: &Batch,
    kv: &Binding,
    oracle: Oracle,
    variant: &Variant,
    tol: f64,
) -> Vec<f32> {
    let cu_q = b.cu(|l| l.0);
    let q = b.q_view();
    let nq = q.shape[0];
    let mut out = vec![f32::NAN; nq * HQ * D];
    let mut lse = vec![f32::NAN; nq * HQ];
    paged_attention(
        be,
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
    let own;
    let r = match oracle {
        Oracle::Contiguous(r) => r,
        Oracle::Pages => {
            own = pages_oracle(b, kv, variant);
            &own
        }
    };
    let e = rel_err(&out, &r.o);
    assert!(e <= tol, "output error {e} > {tol}");
    assert!(lse_ok(&lse, &r.lse, tol * 10.0), "lse differs");
    out
}

/// The oracle (scale 0.3) reading the cache's own pages.
fn pages_oracle(b: &Batch, kv: &Binding, variant: &Variant) -> Reference {
    let q = b.q_view();
    let p = prepare(
        &q,
        &b.cu(|l| l.0),
        &kv.store.layout,
        &kv.tables,
        Some(0.3),
        variant,
    )
    .unwrap();
    reference::attention(&p, q.data, &kv.host_kv().unwrap())
}

/// The oracle (scale 0.3) on the batch's contiguous (unpaged) data.
fn contiguous(b: &Batch, cu_q: &[u64], cu_kv: &[u64], v: &Variant) -> Reference {
    let args = AttentionArgs::new(
        b.q_view(),
        TensorView::contiguous(&b.k[..], &[b.k.len() / (HKV * D), HKV, D]),
        TensorView::contiguous(&b.v[..], &[b.v.len() / (HKV * D), HKV, D]),
    )
    .ragged(cu_q, cu_kv)
    .scale(0.3)
    .variant(v.clone());
    reference::of_args(&args).unwrap().1
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
        let binding = cache.view(&ids).unwrap();
        let kv = binding.host_kv().unwrap();
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
            run_and_check(&b, &kv, Oracle::Contiguous(&ckv), &var, 1e-5);
        }
    }
}

fn tv(x: &[f32]) -> TensorView<'_> {
    TensorView::contiguous(x, &[x.len() / (HKV * D), HKV, D])
}

/// All K rows (head 0 and 1) of sequence `s` of a view, widened.
fn k_rows(kv: &Binding, s: usize) -> Vec<f32> {
    let kv = kv.host_kv().unwrap();
    let mut out = Vec::new();
    for p in 0..kv.kv_len(s) {
        for h in 0..HKV {
            out.extend(row_f32(kv.k_row(s, h, p)));
        }
    }
    out
}

#[test]
fn fork_shares_prefix_pages_and_copies_a_shared_partial_page() {
    let mut rng = StdRng::seed_from_u64(3);
    let prefix = rand_vec(&mut rng, 20 * HKV * D);
    let (a_tail, b_tail) = (
        rand_vec(&mut rng, 7 * HKV * D),
        rand_vec(&mut rng, 30 * HKV * D),
    );
    let be = backend();
    let mut c = KvCache::new(&be, CacheConfig::new(10, 16, HKV, D)).unwrap();
    c.shuffle_free_pages(5);
    let a = c.add_seq();
    c.append(&be, a, &tv(&prefix), &tv(&prefix)).unwrap();
    let b = c.fork(a).unwrap();
    assert_eq!(c.page_table(a).unwrap(), c.page_table(b).unwrap());
    assert_eq!(c.num_free_pages(), 8);
    let shared = c.page_table(a).unwrap().to_vec();
    assert!(shared.iter().all(|&p| c.pool().refcount(p) == 2));
    // a writes into the shared partial page 1: it gets its own copy, page 0 stays shared.
    c.append(&be, a, &tv(&a_tail), &tv(&a_tail)).unwrap();
    let ta = c.page_table(a).unwrap().to_vec();
    assert_eq!(ta[0], shared[0]);
    assert_ne!(ta[1], shared[1]);
    assert_eq!(c.pool().refcount(shared[1]), 1);
    // b now owns page 1 alone: no copy needed.
    c.append(&be, b, &tv(&b_tail), &tv(&b_tail)).unwrap();
    let tb = c.page_table(b).unwrap().to_vec();
    assert_eq!(tb[..2], shared[..]);
    assert_eq!(tb.len(), 4);
    let kv = c.view(&[a, b]).unwrap();
    assert_eq!(k_rows(&kv, 0), [&prefix[..], &a_tail[..]].concat());
    assert_eq!(k_rows(&kv, 1), [&prefix[..], &b_tail[..]].concat());
    // Freeing both returns every page.
    drop(kv);
    c.free(a).unwrap();
    assert_eq!(c.pool().refcount(shared[0]), 1);
    c.free(b).unwrap();
    assert_eq!(c.num_free_pages(), 10);
    assert!(c.free(b).is_err() && c.len(a).is_err());
}

#[test]
fn exhaustion_and_bad_appends_leave_every_sequence_intact() {
    let mut rng = StdRng::seed_from_u64(4);
    let x = rand_vec(&mut rng, 40 * HKV * D);
    let be = backend();
    let mut c = KvCache::new(&be, CacheConfig::new(3, 16, HKV, D)).unwrap();
    let a = c.add_seq();
    c.append(&be, a, &tv(&x[..20 * HKV * D]), &tv(&x[..20 * HKV * D]))
        .unwrap();
    let b = c.fork(a).unwrap();
    let before = (
        c.page_table(a).unwrap().to_vec(),
        k_rows(&c.view(&[a]).unwrap(), 0),
    );
    // 20 + 40 tokens need 4 pages (one a CoW copy): 1 free.
    let err = c.append(&be, a, &tv(&x), &tv(&x)).unwrap_err();
    assert_eq!(err, Error::OutOfPages { needed: 3, free: 1 });
    let wrong = TensorView::contiguous(&x[..], &[40, HKV * D, 1]);
    assert!(c.append(&be, b, &wrong, &wrong).is_err());
    assert!(c
        .append(&be, b, &tv(&x[..HKV * D]), &tv(&x[..2 * HKV * D]))
        .is_err());
    assert!(c.append(&be, SeqId(99), &tv(&x), &tv(&x)).is_err());
    for id in [a, b] {
        assert_eq!(c.len(id).unwrap(), 20);
        assert_eq!(c.page_table(id).unwrap(), &before.0[..]);
        assert_eq!(k_rows(&c.view(&[id]).unwrap(), 0), before.1);
    }
    assert_eq!(c.num_free_pages(), 1);
    // Exactly enough: the CoW copy takes the last page.
    c.append(&be, b, &tv(&x[..4 * HKV * D]), &tv(&x[..4 * HKV * D]))
        .unwrap();
    assert_eq!(c.num_free_pages(), 0);
    assert_eq!(k_rows(&c.view(&[a]).unwrap(), 0), before.1);
}

#[test]
fn window_evicts_pages_and_attention_matches_the_unevicted_oracle() {
    let (w, ps) = (24usize, 8usize);
    let lens = [(1usize, 203usize), (9, 120), (3, 7)];
    let b = Batch::new(6, &lens);
    let mut cfg = CacheConfig::new(3 * (w / ps + 3), ps, HKV, D);
    cfg.window = Some(w);
    // Chunks of 9 tokens: a pool far smaller than the sequences proves pages are recycled.
    let (cache, ids) = b.cache(cfg, 9, 11);
    for (&id, &(_, kl)) in ids.iter().zip(&lens) {
        let first = cache.first_retained(id).unwrap();
        assert_eq!(first % ps, 0);
        assert!(first + w + 9 + ps >= kl, "kept too much: {first} of {kl}");
        assert_eq!(
            cache.page_table(id).unwrap().len(),
            kl.div_ceil(ps) - first / ps
        );
    }
    let kv = cache.view(&ids).unwrap();
    assert!(kv.tables.first_retained(0, ps) > 0);
    let (cu_q, cu_kv) = (b.cu(|l| l.0), b.cu(|l| l.1));
    let var = Variant::full()
        .mask(causal())
        .mask(sliding_window(w as i64));
    let ckv = contiguous(&b, &cu_q, &cu_kv, &var);
    run_and_check(&b, &kv, Oracle::Contiguous(&ckv), &var, 1e-5);
    // A mask that reaches evicted positions is refused before anything runs.
    let mut out = vec![0f32; 13 * HQ * D];
    for bad in [
        Variant::full(),
        Variant::full().mask(causal()),
        Variant::full().mask(sliding_window(w as i64 + 40)),
    ] {
        let e = paged_attention(
            &backend(),
            &b.q_view(),
            &cu_q,
            &kv,
            None,
            &bad,
            None,
            &mut out,
            None,
        );
        assert!(
            matches!(e, Err(Error::InvalidArgument { arg: "variant", .. })),
            "{e:?}"
        );
    }
}

#[test]
fn quantized_kv_matches_the_oracle_on_the_dequantized_cache() {
    let lens = [(1usize, 300usize), (17, 64), (1, 33)];
    let b = Batch::new(7, &lens);
    let (cu_q, cu_kv) = (b.cu(|l| l.0), b.cu(|l| l.1));
    let types = [
        (DType::Fp8E4M3, DType::Fp8E4M3, false),
        (DType::Fp8E5M2, DType::Fp8E5M2, true),
        (DType::I8, DType::I8, true),
        (DType::Fp8E4M3, DType::I8, true),
        (DType::BF16, DType::Fp8E5M2, false),
        (DType::F16, DType::BF16, false),
    ];
    let var = Variant::full().mask(causal()).score(softcap(3.0));
    let ckv = contiguous(&b, &cu_q, &cu_kv, &var);
    for (kt, vt, per_head) in types {
        let scales = |t: DType, x: &[f32]| {
            flexkern::kv_cache::quant::is_quantized(t)
                .then(|| Scales::calibrate(t, x, HKV, D, per_head).unwrap())
        };
        let mut cfg = CacheConfig::new(pages_for(&lens, 16) + 1, 16, HKV, D);
        (cfg.k_dtype, cfg.v_dtype) = (kt, vt);
        (cfg.k_scales, cfg.v_scales) = (scales(kt, &b.k), scales(vt, &b.v));
        let (cache, ids) = b.cache(cfg, 50, 13);
        let kv = cache.view(&ids).unwrap();
        eprintln!("{kt:?} / {vt:?}, per head {per_head}");
        // The kernel against the oracle on the same dequantized cache...
        let out = run_and_check(&b, &kv, Oracle::Pages, &var, 1e-2);
        // ...and the dequantized rows near the originals (format precision).
        let step = |t: DType| match t {
            DType::Fp8E5M2 => 0.13,
            DType::Fp8E4M3 => 0.07,
            DType::I8 => 0.005,
            _ => 0.01,
        };
        let got = k_rows(&kv, 0);
        let e = got
            .iter()
            .zip(&b.k)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(e <= step(kt), "{kt:?} K rows off by {e}");
        // The quantization error on the output stays small against the f32 truth.
        assert!(rel_err(&out, &ckv.o) < 0.2);
    }
}

#[test]
fn quantized_cache_without_scales_and_raw_bad_input_are_typed_errors() {
    let mut cfg = CacheConfig::new(4, 4, HKV, D);
    cfg.v_dtype = DType::I8;
    assert!(matches!(
        KvCache::new(&backend(), cfg),
        Err(Error::InvalidArgument {
            arg: "v_scales",
            ..
        })
    ));

    let (ps, np) = (4usize, 6usize);
    let n = np * ps * HKV * D;
    let floats = |n: usize| HostBuffer::from_store(HostStore::F32(vec![0.5f32; n]));
    let codes = || HostBuffer::from_store(HostStore::I8(vec![1i8; n]));
    let cfg = CacheConfig::new(np, ps, HKV, D);
    let raw = |idx: &[u32], cu: &[u64], lens: &[u64]| PageTables::from_raw(idx, cu, lens, np, ps);
    // Sharing a page across sequences is legal; within one table it is not.
    assert!(raw(&[0, 1, 1, 2], &[0, 2, 4], &[8, 5]).is_ok());
    fn arg<T: std::fmt::Debug>(r: Result<T, Error>) -> &'static str {
        match r {
            Err(Error::InvalidArgument { arg, .. }) => arg,
            Err(Error::Mismatch { a, .. }) => a,
            other => panic!("expected an error, got {other:?}"),
        }
    }
    assert_eq!(arg(raw(&[0, 6], &[0, 2], &[5])), "page_indices");
    assert_eq!(arg(raw(&[3, 3], &[0, 2], &[5])), "page_indices");
    assert_eq!(arg(raw(&[0, 1], &[0, 2], &[9])), "kv_lens");
    assert_eq!(arg(raw(&[0, 1], &[0, 3], &[5])), "cu_pages");
    assert_eq!(arg(raw(&[0, 1], &[0, 2], &[5, 1])), "cu_pages");
    assert_eq!(arg(raw(&[0, 1], &[1, 2], &[5])), "cu_pages");
    let v_short = PageStore::from_buffers(&cfg, floats(n), floats(n - 1));
    assert_eq!(arg(v_short), "v_pages");
    let mut icfg = cfg.clone();
    icfg.v_dtype = DType::I8;
    assert_eq!(
        arg(PageStore::from_buffers(&icfg, floats(n), codes())),
        "v_scales"
    );
    icfg.v_scales = Some(Scales::PerHead(vec![0.1, 0.2]));
    assert_eq!(
        arg(PageStore::from_buffers(&icfg, floats(n), floats(n))),
        "v_pages"
    );
    let store = PageStore::from_buffers(&icfg, floats(n), codes()).unwrap();
    let kv = PagedBinding::new(&store, raw(&[4, 2], &[0, 2], &[6]).unwrap()).unwrap();
    assert_eq!(
        row_f32(kv.host_kv().unwrap().v_row(0, 1, 5)),
        vec![0.2f32; D]
    );
    // Last-page lengths (FlashInfer style) beyond the page size are refused.
    assert!(kv_lens_from_last_page(&[0, 2], &[5], ps).is_err());
    assert_eq!(
        kv_lens_from_last_page(&[0, 2, 2], &[3, 0], ps).unwrap(),
        vec![7, 0]
    );

    // paged_attention's own arguments.
    let q = vec![0.1f32; 2 * HQ * D];
    let qv = TensorView::contiguous(&q[..], &[2, HQ, D]);
    let mut out = vec![0f32; 2 * HQ * D];
    let be = backend();
    let full = Variant::full();
    let call = |q: &TensorView, cu: &[u64], out: &mut [f32]| {
        paged_attention(&be, q, cu, &kv, None, &full, None, out, None)
    };
    assert!(call(&qv, &[0, 2], &mut out).is_ok());
    assert!(call(&qv, &[0, 1, 2], &mut out).is_err());
    assert!(call(&qv, &[0, 3], &mut out).is_err());
    assert!(call(&qv, &[0, 2], &mut out[1..]).is_err());
    let q4 = TensorView::contiguous(&q[..], &[1, 2, HQ, D]);
    assert!(call(&q4, &[0, 2], &mut out).is_err());
    let q3 = TensorView::contiguous(&q[..2 * 3 * D], &[2, 3, D]);
    assert!(call(&q3, &[0, 2], &mut out).is_err());
}

#[test]
fn raw_sglang_arrays_give_the_same_attention_as_the_cache_view() {
    let b = Batch::new(8, MIXED);
    let ps = 16;
    let (cache, ids) = b.cache(
        CacheConfig::new(pages_for(MIXED, ps) + 4, ps, HKV, D),
        40,
        9,
    );
    let kv = cache.view(&ids).unwrap();
    let t = &kv.tables;
    let cu: Vec<u64> = t.cu_pages.iter().map(|&x| x as u64).collect();
    let lens: Vec<u64> = MIXED.iter().map(|l| l.1 as u64).collect();
    let np = cache.config().num_pages;
    let tables = PageTables::from_raw(&t.page_indices, &cu, &lens, np, ps).unwrap();
    let raw = PagedBinding::new(cache.store(), tables).unwrap();
    let var = Variant::full().mask(causal());
    let a = run_and_check(&b, &kv, Oracle::Pages, &var, 1e-5);
    let r = run_and_check(&b, &raw, Oracle::Pages, &var, 1e-5);
    assert_eq!(a, r);
}

#[test]
fn logical_block_mask_maps_to_physical_pages() {
    let b = Batch::new(9, MIXED);
    let ps = 16;
    let (cache, ids) = b.cache(CacheConfig::new(pages_for(MIXED, ps), ps, HKV, D), 16, 21);
    let kv = cache.view(&ids).unwrap();
    let var = Variant::full().mask(causal()).mask(sliding_window(40));
    let p = prepare(
        &b.q_view(),
        &b.cu(|l| l.0),
        &kv.store.layout,
        &kv.tables,
        None,
        &var,
    )
    .unwrap();
    let bm = BlockMask::build(p.variant.mask.as_ref(), &p.lens, HQ, 8, ps).unwrap();
    let host = kv.host_kv().unwrap();
    let phys = host.physical_blocks(&bm).unwrap();
    assert_eq!(phys.kv_pages.len(), bm.kv_indices.len());
    assert_eq!(phys.full_kv_pages.len(), bm.full_kv_indices.len());
    // Walk the rows the same way and check each page through the table.
    let (mut i, mut j) = (0, 0);
    for (s, &id) in ids.iter().enumerate() {
        let table = cache.page_table(id).unwrap();
        for qb in 0..bm.q_blocks(s) {
            for &kb in bm.partial_blocks(s, 0, qb) {
                assert_eq!(phys.kv_pages[i], table[kb as usize]);
                i += 1;
            }
            for &kb in bm.full_blocks(s, 0, qb) {
                assert_eq!(phys.full_kv_pages[j], table[kb as usize]);
                j += 1;
            }
        }
    }
    assert_eq!((i, j), (phys.kv_pages.len(), phys.full_kv_pages.len()));
    // A user BlockMask with kv_block == page_size runs the same kernel path.
    let cu_q = b.cu(|l| l.0);
    let mut o1 = vec![f32::NAN; b.q.len()];
    let mut o2 = vec![f32::NAN; b.q.len()];
    let be = backend();
    paged_attention(
        &be,
        &b.q_view(),
        &cu_q,
        &kv,
        None,
        &var,
        Some(&bm),
        &mut o1,
        None,
    )
    .unwrap();
    paged_attention(
        &be,
        &b.q_view(),
        &cu_q,
        &kv,
        None,
        &var,
        None,
        &mut o2,
        None,
    )
    .unwrap();
    let r = reference::attention(&p, b.q_view().data, &host);
    assert!(rel_err(&o1, &r.o) <= 1e-5 && rel_err(&o2, &r.o) <= 1e-5);
    let other = BlockMask::build(None, &p.lens, HQ, 8, 32).unwrap();
    assert!(host.physical_blocks(&other).is_err());
}

#[test]
fn long_decode_split_into_partitions_matches_the_oracle() {
    // Long enough for the planner to split the KV into partitions and merge them.
    let lens = [(1usize, 5000usize), (2, 3100), (1, 17)];
    let b = Batch::new(10, &lens);
    let (cu_q, cu_kv) = (b.cu(|l| l.0), b.cu(|l| l.1));
    for ps in [16, 13] {
        let (cache, ids) = b.cache(CacheConfig::new(pages_for(&lens, ps), ps, HKV, D), 700, 31);
        let kv = cache.view(&ids).unwrap();
        for var in [
            Variant::full().mask(causal()),
            Variant::full().mask(causal()).mask(sliding_window(1000)),
        ] {
            let ckv = contiguous(&b, &cu_q, &cu_kv, &var);
            run_and_check(&b, &kv, Oracle::Contiguous(&ckv), &var, 1e-5);
        }
    }
}

#[test]
fn portable_kernels_on_paged_and_quantized_kv() {
    let b = Batch::new(12, MIXED);
    let (cu_q, cu_kv) = (b.cu(|l| l.0), b.cu(|l| l.1));
    let scalar = CpuBackend::scalar();
    for (ps, dt) in [(24, DType::F32), (16, DType::Fp8E4M3), (1, DType::I8)] {
        let mut cfg = CacheConfig::new(pages_for(MIXED, ps), ps, HKV, D);
        (cfg.k_dtype, cfg.v_dtype) = (dt, dt);
        if dt != DType::F32 {
            cfg.k_scales = Some(Scales::calibrate(dt, &b.k, HKV, D, true).unwrap());
            cfg.v_scales = Some(Scales::PerTensor(0.01));
        }
        let (cache, ids) = b.cache(cfg, 31, 77);
        let kv = cache.view(&ids).unwrap();
        for (_, var) in variants() {
            let tol = if dt == DType::F32 { 1e-5 } else { 1e-2 };
            let ckv = contiguous(&b, &cu_q, &cu_kv, &var);
            let oracle = if dt == DType::F32 {
                Oracle::Contiguous(&ckv)
            } else {
                Oracle::Pages
            };
            run_and_check_on(&scalar, &b, &kv, oracle, &var, tol);
        }
    }
}

/// Decode over fused heads reads every stored format in place (widened in registers, scales
/// folded into Q and P): it matches the oracle on the same cache.
#[test]
fn decode_reads_every_kv_format_in_place() {
    let lens = [(1usize, 300usize), (1, 33), (1, 129)];
    let b = Batch::new(21, &lens);
    let var = Variant::full().mask(causal());
    let types = [
        (DType::F32, DType::F32),
        (DType::F16, DType::F16),
        (DType::BF16, DType::BF16),
        (DType::Fp8E4M3, DType::Fp8E4M3),
        (DType::Fp8E5M2, DType::Fp8E5M2),
        (DType::I8, DType::I8),
        (DType::Fp8E4M3, DType::BF16),
    ];
    for (kt, vt) in types {
        let scales = |t: DType, x: &[f32]| {
            flexkern::kv_cache::quant::is_quantized(t)
                .then(|| Scales::calibrate(t, x, HKV, D, true).unwrap())
        };
        let mut cfg = CacheConfig::new(pages_for(&lens, 16), 16, HKV, D);
        (cfg.k_dtype, cfg.v_dtype) = (kt, vt);
        (cfg.k_scales, cfg.v_scales) = (scales(kt, &b.k), scales(vt, &b.v));
        let (cache, ids) = b.cache(cfg, 50, 5);
        let kv = cache.view(&ids).unwrap();
        eprintln!("{kt:?} / {vt:?}");
        run_and_check(&b, &kv, Oracle::Pages, &var, 1e-4);
    }
}

/// e4m3 keys are read as f32 bits (factor 2^120 folded into Q) only while Q is small enough for
/// that; a huge Q takes the f16 re-bias instead. Both match the oracle.
#[test]
fn decode_e4m3_keys_with_small_and_huge_queries() {
    let lens = [(1usize, 200usize), (1, 48)];
    let var = Variant::full().mask(causal());
    // |Q| * 0.3 * log2(e) times the K scale (~1/448) passes 64 at the second scale.
    for q_scale in [1.0f32, 1e6] {
        let mut b = Batch::new(23, &lens);
        b.q.iter_mut().for_each(|x| *x *= q_scale);
        let mut cfg = CacheConfig::new(pages_for(&lens, 16), 16, HKV, D);
        (cfg.k_dtype, cfg.v_dtype) = (DType::Fp8E4M3, DType::Fp8E4M3);
        cfg.k_scales = Some(Scales::calibrate(DType::Fp8E4M3, &b.k, HKV, D, true).unwrap());
        cfg.v_scales = Some(Scales::calibrate(DType::Fp8E4M3, &b.v, HKV, D, true).unwrap());
        let (cache, ids) = b.cache(cfg, 50, 9);
        let kv = cache.view(&ids).unwrap();
        let (cu_q, q) = (b.cu(|l| l.0), b.q_view());
        let mut out = vec![f32::NAN; 2 * HQ * D];
        let mut lse = vec![f32::NAN; 2 * HQ];
        let be = backend();
        paged_attention(
            &be,
            &q,
            &cu_q,
            &kv,
            Some(0.3),
            &var,
            None,
            &mut out,
            Some(&mut lse),
        )
        .unwrap();
        let r = pages_oracle(&b, &kv, &var);
        let e = rel_err(&out, &r.o);
        assert!(e <= 1e-4, "q scale {q_scale}: output error {e}");
        // Scores grow with Q: the LSE is checked relative to its size.
        for (&x, &y) in lse.iter().zip(&r.lse) {
            assert!((x as f64 - y).abs() <= 1e-3 + 1e-6 * y.abs(), "{x} vs {y}");
        }
    }
}

/// Decode of one query over `n` positions of fp8 pages `k`, `v` (logical pages 0, 1, 2 at
/// physical 2, 0, 1) with per-head scales.
fn fp8_decode(dtype: DType, k: &[u8], v: &[u8], ps: usize, q: &[f32], n: usize) -> Vec<f32> {
    let mut cfg = CacheConfig::new(3, ps, HKV, D);
    (cfg.k_dtype, cfg.v_dtype) = (dtype, dtype);
    cfg.k_scales = Some(Scales::PerHead(vec![0.01, 0.02]));
    cfg.v_scales = Some(Scales::PerHead(vec![0.03, 0.04]));
    let be = backend();
    let buf = |x: &[u8]| flexkern::backend::to_device_as(&be, dtype, x).unwrap();
    let store = PageStore::from_buffers(&cfg, buf(k), buf(v)).unwrap();
    let tables = PageTables::from_raw(&[2, 0, 1], &[0, 3], &[n as u64], 3, ps).unwrap();
    let kv = PagedBinding::new(&store, tables).unwrap();
    let qv = TensorView::contiguous(q, &[1, HQ, D]);
    let mut out = vec![0f32; HQ * D];
    let full = Variant::full();
    paged_attention(&be, &qv, &[0, 1], &kv, None, &full, None, &mut out, None).unwrap();
    out
}

/// An fp8 e4m3 NaN code read in place would re-bias into a number: it must still poison the
/// heads that see it, and only those.
#[test]
fn decode_keeps_fp8_e4m3_nan_codes_nan() {
    let (ps, pages, n) = (16, 3, 40);
    let mut rng = StdRng::seed_from_u64(4);
    let len = pages * ps * HKV * D;
    // Clearing bit 0 keeps every code off the NaN ones (0x7f, 0xff).
    let mut kc: Vec<u8> = (0..len).map(|_| rng.gen::<u8>() & !1).collect();
    let vc: Vec<u8> = (0..len).map(|_| rng.gen::<u8>() & !1).collect();
    let q: Vec<f32> = rand_vec(&mut rng, HQ * D);
    let run = |kc: &[u8]| fp8_decode(DType::Fp8E4M3, kc, &vc, ps, &q, n);
    let clean = run(&kc);
    assert!(clean.iter().all(|x| x.is_finite()));
    // Position 5 (logical page 0 = physical page 2), kv head 0.
    kc[((2 * ps + 5) * HKV) * D + 3] = 0x7f;
    let out = run(&kc);
    let g = HQ / HKV;
    assert!(
        out[..g * D].iter().all(|x| x.is_nan()),
        "kv head 0 sees NaN"
    );
    // (The tile is widened to f32 then, which rounds a little differently.)
    for (a, b) in out[g * D..].iter().zip(&clean[g * D..]) {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "kv head 1 does not: {a} vs {b}"
        );
    }
}

/// fp8 e5m2 read as f32 bits would take inf and NaN codes for numbers: a tile holding one is
/// read the f16 way, so the heads that see it still get inf or NaN, and only those.
#[test]
fn decode_keeps_fp8_e5m2_inf_and_nan_codes() {
    let (ps, pages, n) = (16, 3, 40);
    let mut rng = StdRng::seed_from_u64(5);
    let len = pages * ps * HKV * D;
    // Clearing bit 6 keeps every exponent below 11111 (the inf and NaN codes).
    let kc: Vec<u8> = (0..len).map(|_| rng.gen::<u8>() & !0x40).collect();
    let vc: Vec<u8> = (0..len).map(|_| rng.gen::<u8>() & !0x40).collect();
    let q: Vec<f32> = rand_vec(&mut rng, HQ * D);
    let run = |kc: &[u8], vc: &[u8]| fp8_decode(DType::Fp8E5M2, kc, vc, ps, &q, n);
    let clean = run(&kc, &vc);
    assert!(clean.iter().all(|x| x.is_finite()));
    let g = HQ / HKV;
    let same = |out: &[f32]| {
        out[g * D..]
            .iter()
            .zip(&clean[g * D..])
            .all(|(a, b)| (a - b).abs() <= 1e-5 * b.abs().max(1.0))
    };
    // Position 5 (logical page 0 = physical page 2), kv head 0: a NaN key poisons every column,
    // an inf value its own column.
    let at = ((2 * ps + 5) * HKV) * D + 3;
    let mut k_nan = kc.clone();
    k_nan[at] = 0x7d;
    let out = run(&k_nan, &vc);
    assert!(
        out[..g * D].iter().all(|x| x.is_nan()),
        "kv head 0 sees NaN"
    );
    assert!(same(&out), "kv head 1 does not see the NaN key");
    let mut v_inf = vc.clone();
    v_inf[at] = 0x7c;
    let out = run(&kc, &v_inf);
    assert!(
        (0..g).all(|h| !out[h * D + 3].is_finite()),
        "kv head 0 sees inf"
    );
    assert!(same(&out), "kv head 1 does not see the inf value");
}
