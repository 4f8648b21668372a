//! Oracle comparison over a matrix of shapes, dtypes and variants: the engine behind
//! `flexkern verify`, usable with any backend.

use crate::attention::{attention, AttentionArgs};
use crate::backend::host::HostBuffer;
use crate::backend::{Backend, Buffer};
use crate::builtins::*;
use crate::expr::{int, kv_pos, q_pos};
use crate::kv_cache::{PagedBinding, PagedKv};
use crate::reference;
use crate::tensor::TensorView;
use crate::variant::Variant;
use crate::DType;
use half::{bf16, f16};

/// A small deterministic generator (xorshift64*), so cases are reproducible from a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// One verification case.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub dtype: DType,
    /// (q_len, kv_len) per sequence.
    pub seqs: Vec<(usize, usize)>,
    pub hq: usize,
    pub hkv: usize,
    pub dk: usize,
    pub dv: usize,
    pub variant: Variant,
}

/// Outcome of one case.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub name: String,
    pub dtype: DType,
    /// max |out - ref| / max(1, max |ref|).
    pub err_o: f64,
    pub err_lse: f64,
    pub tol: f64,
    pub passed: bool,
    pub note: String,
}

impl Outcome {
    fn failed(name: String, dtype: DType, tol: f64, note: String) -> Outcome {
        Outcome {
            name,
            dtype,
            err_o: f64::INFINITY,
            err_lse: f64::INFINITY,
            tol,
            passed: false,
            note,
        }
    }
}

/// Runs `run` on NaN-poisoned outputs (so unwritten elements show) and judges it against `want`.
fn judge(
    name: String,
    dtype: DType,
    tol: f64,
    want: &reference::Reference,
    run: impl FnOnce(&mut [f32], &mut [f32]) -> crate::Result<()>,
) -> Outcome {
    let mut o = vec![f32::NAN; want.o.len()];
    let mut lse = vec![f32::NAN; want.lse.len()];
    if let Err(e) = run(&mut o, &mut lse) {
        return Outcome::failed(name, dtype, tol, format!("run: {e}"));
    }
    let (err_o, err_lse) = (rel_err(&o, &want.o), rel_err(&lse, &want.lse));
    Outcome {
        name,
        dtype,
        err_o,
        err_lse,
        tol,
        passed: err_o <= tol && err_lse <= tol,
        note: String::new(),
    }
}

/// The tolerance of DEVELOPERS.md for inputs of `dtype`.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        _ => 1e-2,
    }
}

/// (name, (q_len, kv_len) per sequence, Hq, Hkv, Dk, Dv, variant).
type Spec = (
    String,
    Vec<(usize, usize)>,
    usize,
    usize,
    usize,
    usize,
    Variant,
);

/// The standard matrix: every built-in mod, compositions, GQA/MQA, head sizes, ragged batches,
/// zero-length and fully masked sequences, split-KV decode, mixed prefill + decode batches, for
/// each activation dtype.
pub fn standard_cases(quick: bool) -> Vec<Case> {
    let ids: Vec<i64> = (0..600).map(|i| (i / 70) as i64).collect();
    let tree_bits: Vec<i64> = (0..8)
        .map(|i: i64| (1 << i) | if i > 0 { 1 } else { 0 } | if i > 3 { 1 << 2 } else { 0 })
        .collect();
    let ragged = vec![(37, 300), (1, 129), (0, 50), (64, 64), (5, 0), (1, 1)];
    // A prefill chunk beside split decodes, a speculative run, empty and fully masked rows:
    // each sequence takes its own kernel family in one plan.
    let mixed = vec![
        (150, 600),
        (1, 2400),
        (0, 30),
        (4, 1200),
        (1, 0),
        (20, 10),
        (1, 900),
    ];
    let neighborhood = {
        // 2D neighborhood attention on a 16x16 image, radius 2 (FlexAttention appendix).
        let w = 16;
        let (qr, qc) = (q_pos() / w, q_pos() % w);
        let (kr, kc) = (kv_pos() / w, kv_pos() % w);
        (qr - kr).abs().le(int(2)).and((qc - kc).abs().le(int(2)))
    };
    #[rustfmt::skip]
    let mut base: Vec<Spec> = vec![
        ("full".into(), vec![(100, 100)], 4, 4, 64, 64, Variant::full()),
        ("causal".into(), vec![(200, 200)], 4, 2, 128, 128, Variant::full().mask(causal())),
        ("causal ragged".into(), ragged.clone(), 8, 2, 64, 64, Variant::full().mask(causal())),
        ("sliding 48 + causal".into(), vec![(300, 300)], 2, 1, 64, 64, Variant::full().mask(causal()).mask(sliding_window(48))),
        ("local 10:5".into(), vec![(150, 150)], 2, 2, 80, 80, Variant::full().mask(local(10, 5))),
        ("chunked 32 + causal".into(), vec![(130, 130)], 2, 2, 96, 96, Variant::full().mask(chunked(32)).mask(causal())),
        ("document".into(), vec![(600, 600)], 2, 1, 64, 64, Variant::full().mask(document(ids)).mask(causal())),
        ("prefix-lm 40".into(), vec![(120, 120)], 2, 2, 64, 64, Variant::full().mask(prefix_lm(40))),
        ("tree (spec decode)".into(), vec![(8, 200)], 4, 1, 128, 128, Variant::full().mask(tree(tree_bits))),
        ("block-sparse".into(), vec![(256, 256)], 4, 2, 64, 64, Variant::full().mask(block_sparse(16, 2, 4, true))),
        ("softcap 30".into(), vec![(90, 90)], 2, 2, 128, 128, Variant::full().mask(causal()).score(softcap(30.0))),
        ("alibi".into(), vec![(100, 140)], 4, 4, 64, 64, Variant::full().mask(causal()).score(alibi(alibi_slopes(4)))),
        ("relative bias".into(), vec![(70, 70)], 2, 1, 64, 64, Variant::full().score(relative_bias((0..2 * 17).map(|i| (i as f32 * 0.37).sin()).collect(), 8))),
        ("sinks".into(), vec![(50, 80), (1, 0)], 4, 2, 64, 64, Variant::full().mask(causal()).sinks(vec![0.5, -1.0, 2.0, f32::NEG_INFINITY])),
        ("causal+softcap+alibi+sinks".into(), vec![(60, 90), (1, 700)], 4, 2, 128, 128, Variant::full().mask(causal()).score(softcap(20.0)).score(alibi(alibi_slopes(4))).sinks(vec![0.1, 0.2, 0.3, 0.4])),
        ("neighborhood 2D".into(), vec![(256, 256)], 2, 2, 64, 64, Variant::full().mask(neighborhood)),
        ("fully masked rows".into(), vec![(20, 10)], 2, 2, 64, 64, Variant::full().mask(causal())),
        ("decode split-KV".into(), vec![(1, 5000), (1, 3000)], 8, 2, 128, 128, Variant::full().mask(causal())),
        ("prefill chunks on a prefix".into(), vec![(200, 1000), (130, 130), (1, 333), (64, 1500)], 8, 2, 128, 128, Variant::full().mask(causal())),
        ("mixed prefill + decode".into(), mixed.clone(), 8, 2, 128, 128, Variant::full().mask(causal())),
        ("mixed sliding 64".into(), mixed, 8, 2, 64, 64, Variant::full().mask(causal()).mask(sliding_window(64))),
        ("decode D=256".into(), vec![(2, 2000)], 4, 1, 256, 256, Variant::full().mask(causal())),
        ("Dk 192 / Dv 128".into(), vec![(64, 64)], 2, 2, 192, 128, Variant::full().mask(causal())),
        ("MLA decode 576/512".into(), vec![(1, 500)], 8, 1, 576, 512, Variant::full().mask(causal())),
        ("head size 1".into(), vec![(33, 33)], 2, 1, 1, 1, Variant::full().mask(causal())),
    ];
    if quick {
        base.retain(|c| !c.0.starts_with("decode split") && c.0 != "document");
    }
    let mut out = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (name, seqs, hq, hkv, dk, dv, variant) in &base {
            out.push(Case {
                name: name.clone(),
                dtype,
                seqs: seqs.clone(),
                hq: *hq,
                hkv: *hkv,
                dk: *dk,
                dv: *dv,
                variant: variant.clone(),
            });
        }
    }
    out
}

fn fill(rng: &mut Rng, n: usize, dtype: DType) -> Input {
    let v: Vec<f32> = (0..n).map(|_| rng.uniform() * 2.0).collect();
    match dtype {
        DType::F16 => Input::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
        DType::BF16 => Input::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
        _ => Input::F32(v),
    }
}

/// Owned random input of one dtype.
pub enum Input {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
}

impl Input {
    pub fn view(&self, shape: &[usize]) -> TensorView<'_> {
        match self {
            Input::F32(v) => TensorView::contiguous(v.as_slice(), shape),
            Input::F16(v) => TensorView::contiguous(v.as_slice(), shape),
            Input::BF16(v) => TensorView::contiguous(v.as_slice(), shape),
        }
    }
}

/// Relative max error with NaN treated as infinite error; -inf must match -inf exactly.
pub fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    let scale = want
        .iter()
        .filter(|x| x.is_finite())
        .fold(1.0f64, |a, &b| a.max(b.abs()));
    let mut e = 0.0f64;
    for (&g, &w) in got.iter().zip(want) {
        let g = g as f64;
        let d = if w.is_infinite() || g.is_infinite() {
            if g == w {
                0.0
            } else {
                f64::INFINITY
            }
        } else if g.is_nan() || w.is_nan() {
            f64::INFINITY
        } else {
            (g - w).abs()
        };
        e = e.max(d);
    }
    e / scale
}

/// Runs one case on `backend` and compares with the oracle on the same rounded inputs.
pub fn run_case<B: Backend + ?Sized>(backend: &B, c: &Case, seed: u64) -> Outcome {
    let mut rng = Rng::new(seed);
    let total_q: usize = c.seqs.iter().map(|s| s.0).sum();
    let total_kv: usize = c.seqs.iter().map(|s| s.1).sum();
    let q = fill(&mut rng, total_q * c.hq * c.dk, c.dtype);
    let k = fill(&mut rng, total_kv * c.hkv * c.dk, c.dtype);
    let v = fill(&mut rng, total_kv * c.hkv * c.dv, c.dtype);
    let mut cu_q = vec![0u64];
    let mut cu_kv = vec![0u64];
    for &(a, b) in &c.seqs {
        cu_q.push(cu_q.last().unwrap() + a as u64);
        cu_kv.push(cu_kv.last().unwrap() + b as u64);
    }
    let args = AttentionArgs::new(
        q.view(&[total_q, c.hq, c.dk]),
        k.view(&[total_kv, c.hkv, c.dk]),
        v.view(&[total_kv, c.hkv, c.dv]),
    )
    .ragged(&cu_q, &cu_kv)
    .variant(c.variant.clone());
    let tol = tolerance(c.dtype);
    let fail = |note: String| Outcome::failed(c.name.clone(), c.dtype, tol, note);
    let want = match reference::of_args(&args) {
        Ok((_, r)) => r,
        Err(e) => return fail(format!("prepare: {e}")),
    };
    judge(c.name.clone(), c.dtype, tol, &want, |o, lse| {
        attention(backend, &args, None, o, Some(lse))
    })
}

/// The store's K and V pages as host buffers.
fn host_pages<B: Backend + ?Sized>(
    backend: &B,
    kv: &PagedBinding<'_, B::Buffer>,
) -> crate::error::Result<(HostBuffer, HostBuffer)> {
    let get = |b: &B::Buffer| -> crate::error::Result<HostBuffer> {
        let mut h = HostBuffer::zeros(b.dtype(), b.len())?;
        backend.download(b, 0, h.bytes_mut())?;
        Ok(h)
    };
    Ok((get(&kv.store.k)?, get(&kv.store.v)?))
}

/// One paged verification case: a standard case run through a shuffled paged cache.
#[derive(Clone, Debug)]
pub struct PagedCase {
    pub case: Case,
    pub page_size: usize,
    /// Storage type of the cache (the activations stay `case.dtype`).
    pub kv_dtype: DType,
    /// The cache's sliding window (`CacheConfig::window`): each sequence's context, then its
    /// queries' own keys, are appended apart, so the second append evicts the pages wholly
    /// before the window and the tables start past page 0 (`first_page`).
    pub window: Option<usize>,
}

/// Paged matrix: ragged prefill + decode, windows, score mods, sinks, split-KV decode, over page
/// sizes 1, 7 (not a power of two), 16 and 256, with f32 / bf16 / fp8 / int8 caches; and 2-byte
/// queries over caches of their own type.
pub fn paged_cases(quick: bool) -> Vec<PagedCase> {
    let keep = [
        "causal ragged",
        "sliding 48 + causal",
        "causal+softcap+alibi+sinks",
        "tree (spec decode)",
        "decode split-KV",
        "mixed prefill + decode",
    ];
    let base: Vec<Case> = standard_cases(quick)
        .into_iter()
        .filter(|c| c.dtype == DType::F32 && keep.contains(&c.name.as_str()))
        .collect();
    let mut out = Vec::new();
    for (i, c) in base.iter().enumerate() {
        for (page_size, kv_dtype) in [
            (16, DType::F32),
            (7, DType::BF16),
            (256, DType::Fp8E4M3),
            (1, DType::I8),
            (16, DType::Fp8E5M2),
        ] {
            if quick && (i + page_size) % 2 == 1 {
                continue;
            }
            out.push(PagedCase {
                case: c.clone(),
                page_size,
                kv_dtype,
                window: None,
            });
        }
    }
    // 2-byte queries over a cache of their own type (the GPU's tensor-core kernels): prefill
    // chunks on cached prefixes, GQA, windows, score mods and sinks, pages of 16 and 7.
    let tensor_core = [
        "causal ragged",
        "sliding 48 + causal",
        "causal+softcap+alibi+sinks",
        "mixed prefill + decode",
        "prefill chunks on a prefix",
    ];
    for (i, c) in standard_cases(quick)
        .into_iter()
        .filter(|c| c.dtype != DType::F32 && tensor_core.contains(&c.name.as_str()))
        .enumerate()
    {
        for page_size in [16, 7] {
            if quick && (i + page_size) % 2 == 1 {
                continue;
            }
            out.push(PagedCase {
                kv_dtype: c.dtype,
                case: c.clone(),
                page_size,
                window: None,
            });
        }
    }
    // Window-evicted pages under 2-byte queries: decode, a speculative run and a prefill chunk
    // whose keys start pages into their tables, so the GPU's tiles begin before, across and
    // after a sequence's first visible key.
    let evicted = standard_cases(quick)
        .into_iter()
        .find(|c| c.dtype == DType::BF16 && c.name == "sliding 48 + causal")
        .map(|c| Case {
            name: "sliding 48 + causal, evicted pages".into(),
            seqs: vec![(1, 700), (4, 333), (64, 400), (16, 170), (1, 40)],
            hq: 8,
            hkv: 2,
            dk: 128,
            dv: 128,
            ..c
        });
    if let Some(c) = evicted {
        for (page_size, kv_dtype) in [
            (16, DType::BF16),
            (7, DType::BF16),
            (16, DType::Fp8E4M3),
            (16, DType::I8),
        ] {
            out.push(PagedCase {
                case: c.clone(),
                page_size,
                kv_dtype,
                window: Some(48),
            });
        }
    }
    out
}

/// Runs one paged case and compares with the oracle reading the same (dequantized) cache.
pub fn run_paged_case<B: Backend + ?Sized>(backend: &B, pc: &PagedCase, seed: u64) -> Outcome {
    use crate::attention::paged::{paged_attention, prepare};
    use crate::kv_cache::{quant::max_code, CacheConfig, KvCache, Scales};
    let c = &pc.case;
    let name = format!(
        "paged p{} {} | {}",
        pc.page_size,
        pc.kv_dtype.name(),
        c.name
    );
    let tol = tolerance(pc.kv_dtype);
    let fail = |note: String| Outcome::failed(name.clone(), c.dtype, tol, note);
    let mut rng = Rng::new(seed);
    let total_q: usize = c.seqs.iter().map(|s| s.0).sum();
    let q = fill(&mut rng, total_q * c.hq * c.dk, c.dtype);
    let pages: usize = c.seqs.iter().map(|s| s.1.div_ceil(pc.page_size)).sum();
    // Inputs are uniform in [-2, 2): a per-tensor scale maps 2 to the largest code.
    let scales = max_code(pc.kv_dtype).map(|m| Scales::PerTensor(2.0 / m));
    let cfg = CacheConfig {
        num_pages: pages + 1,
        page_size: pc.page_size,
        num_kv_heads: c.hkv,
        head_dim: c.dk,
        head_dim_v: c.dv,
        k_dtype: pc.kv_dtype,
        v_dtype: pc.kv_dtype,
        k_scales: scales.clone(),
        v_scales: scales,
        window: pc.window,
    };
    let mut cache = match KvCache::new(backend, cfg) {
        Ok(x) => x,
        Err(e) => return fail(format!("cache: {e}")),
    };
    cache.shuffle_free_pages(seed);
    let mut ids = Vec::new();
    let mut cu_q = vec![0u64];
    for &(ql, kl) in &c.seqs {
        let id = cache.add_seq();
        let k: Vec<f32> = (0..kl * c.hkv * c.dk)
            .map(|_| rng.uniform() * 2.0)
            .collect();
        let v: Vec<f32> = (0..kl * c.hkv * c.dv)
            .map(|_| rng.uniform() * 2.0)
            .collect();
        // In window mode the queries' own keys come second: that append evicts.
        let split = if pc.window.is_some() {
            kl - ql.min(kl)
        } else {
            kl
        };
        for (from, to) in [(0, split), (split, kl)] {
            if to == from {
                continue;
            }
            let (k, v) = (
                &k[from * c.hkv * c.dk..to * c.hkv * c.dk],
                &v[from * c.hkv * c.dv..to * c.hkv * c.dv],
            );
            if let Err(e) = cache.append(
                backend,
                id,
                &TensorView::contiguous(k, &[to - from, c.hkv, c.dk]),
                &TensorView::contiguous(v, &[to - from, c.hkv, c.dv]),
            ) {
                return fail(format!("append: {e}"));
            }
        }
        ids.push(id);
        cu_q.push(cu_q.last().unwrap() + ql as u64);
    }
    let kv = match cache.view(&ids) {
        Ok(x) => x,
        Err(e) => return fail(format!("view: {e}")),
    };
    // A window case that evicted nothing would not test what it is there for.
    if pc.window.is_some() && kv.tables.first_page.iter().all(|&f| f == 0) {
        return fail("window: no page was evicted (every first_page is 0)".into());
    }
    let qv = q.view(&[total_q, c.hq, c.dk]);
    let p = match prepare(&qv, &cu_q, &kv.store.layout, &kv.tables, None, &c.variant) {
        Ok(x) => x,
        Err(e) => return fail(format!("prepare: {e}")),
    };
    // The oracle reads the pages the backend holds, copied to the host.
    let want = match host_pages(backend, &kv) {
        Ok((hk, hv)) => {
            let t = &kv.tables;
            let bound = (|| {
                PagedKv::bind(
                    &kv.store.layout,
                    hk.page_buf("k_pages")?,
                    hv.page_buf("v_pages")?,
                    &t.cu_pages,
                    &t.first_page,
                    &t.page_indices,
                    &p.lens,
                )
            })();
            match bound {
                Ok(hkv) => reference::attention(&p, qv.data, &hkv),
                Err(e) => return fail(format!("bind: {e}")),
            }
        }
        Err(e) => return fail(format!("download: {e}")),
    };
    judge(name, c.dtype, tol, &want, |o, lse| {
        paged_attention(
            backend,
            &qv,
            &cu_q,
            &kv,
            None,
            &c.variant,
            None,
            o,
            Some(lse),
        )
    })
}
