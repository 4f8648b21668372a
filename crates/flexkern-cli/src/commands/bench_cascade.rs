//! `flexkern bench attn --only cascade`: 32 decoding sequences forked from one long prompt
//! (prefix pages shared copy-on-write), cascade attention against independent paged attention
//! over the same cache. Both keep their operands in buffers and build their plans once; the two
//! are timed alternately, so a neighbour's load lands on both.

use super::bench_common::Row;
use super::limits::median;
use anyhow::{bail, Result};
use flexkern::attention::cascade::{plan_cascade, CascadeArgs};
use flexkern::attention::paged::{paged_bufs, prepare_buffers};
use flexkern::attention::plan::plan;
use flexkern::backend::{to_device, to_host, AttnIo, Backend};
use flexkern::builtins::causal;
use flexkern::kv_cache::{CacheConfig, KvCache};
use flexkern::mem::huge_vec;
use flexkern::{CpuBackend, DType, TensorView, Variant};
use std::time::Instant;

const SEQS: usize = 32;
const HQ: usize = 32;
const HKV: usize = 8;
const D: usize = 128;

/// Suffix (tokens generated so far) of sequence `s`: 64 to 312, so the sequences differ.
fn suffix_len(s: usize) -> usize {
    64 + 8 * s
}

/// Rows for `kv_dtype` KV: the cascade's time (ratio: independent time / cascade time) and the
/// independent time, each with the bytes of K/V it must read. `fma` (GFLOP/s, measured in the
/// same run) bounds the speed-up too: both compute every score, so the cascade can at best turn
/// the independent run's rate into the FMA peak.
pub fn bench_cascade(prefix: usize, kv_dtype: DType, iters: usize, fma: f64) -> Result<Vec<Row>> {
    let b = CpuBackend;
    let ps = 16;
    let row = HKV * D;
    let pages = prefix.div_ceil(ps) + (0..SEQS).map(|s| suffix_len(s) / ps + 2).sum::<usize>();
    let mut cfg = CacheConfig::new(pages, ps, HKV, D);
    (cfg.k_dtype, cfg.v_dtype) = (kv_dtype, kv_dtype);
    let mut cache = KvCache::new(&b, cfg)?;
    cache.shuffle_free_pages(1);
    let gen = |n: usize, s: f32| -> Vec<f32> { huge_vec(n, |i| (i as f32 * s).sin()) };
    fn tv(x: &[f32]) -> TensorView<'_> {
        TensorView::contiguous(x, &[x.len() / (HKV * D), HKV, D])
    }
    let root = cache.add_seq();
    for c in (0..prefix).step_by(4096) {
        let n = (prefix - c).min(4096) * row;
        let (k, v) = (gen(n, 0.011 + c as f32), gen(n, 0.023 + c as f32));
        cache.append(&b, root, &tv(&k), &tv(&v))?;
    }
    let mut ids = Vec::new();
    for s in 0..SEQS {
        let id = cache.fork(root)?;
        let n = suffix_len(s) * row;
        let (k, v) = (gen(n, 0.031 + s as f32), gen(n, 0.047 + s as f32));
        cache.append(&b, id, &tv(&k), &tv(&v))?;
        ids.push(id);
    }
    cache.free(root)?;
    let kv = cache.view(&ids)?;
    let cu_q: Vec<u64> = (0..=SEQS as u64).collect();
    let var = Variant::full().mask(causal());
    let q = to_device(&b, &gen(SEQS * HQ * D, 0.37))?;
    // Independent: one paged call over every sequence's whole KV.
    let layout = &kv.store.layout;
    let pi = prepare_buffers(DType::F32, HQ, &cu_q, layout, &kv.tables, None, &var)?;
    let plan_i = plan(&pi, &b.caps(), None)?;
    let tables_i = to_device(&b, &kv.tables.packed())?;
    // Cascade: one group, the prefix once per kv head.
    let args = CascadeArgs {
        cu_q_lens: &cu_q,
        cu_groups: &[0, SEQS as u64],
        prefix_lens: &[prefix as u64],
        scale: None,
        variant: &var,
    };
    let pc = plan_cascade(&args, DType::F32, HQ, layout, &kv.tables, &b.caps())?;
    if pc.shared != [prefix / ps * ps] {
        bail!("cascade shares {:?} of a {prefix}-token prefix", pc.shared);
    }
    let tables_c = to_device(&b, &pc.packed_tables())?;
    let mut scratch = pc.scratch(&b)?;
    let (mut oi, mut oc) = (
        b.alloc(DType::F32, SEQS * HQ * D)?,
        b.alloc(DType::F32, SEQS * HQ * D)?,
    );
    let (mut ti, mut tc, mut t1) = (Vec::new(), Vec::new(), Vec::new());
    let mut lse = b.alloc(DType::F32, SEQS * HQ)?;
    for i in 0..=iters {
        let t = Instant::now();
        let io = AttnIo {
            q: &q,
            kv: paged_bufs(&kv.tables, &kv.store.k, &kv.store.v, &tables_i, 0),
            out: &mut oi,
            lse: None,
        };
        b.attention(&pi, &plan_i, io)?;
        let a = t.elapsed().as_secs_f64();
        let t = Instant::now();
        pc.run(&b, &q, kv.store, &tables_c, &mut scratch, &mut oc, None)?;
        let c = t.elapsed().as_secs_f64();
        // Level 1 alone (the shared prefix, once per kv head), into scratch outputs.
        let t = Instant::now();
        let io = AttnIo {
            q: &q,
            kv: paged_bufs(&pc.prefix_tables, &kv.store.k, &kv.store.v, &tables_c, 0),
            out: &mut oi,
            lse: Some(&mut lse),
        };
        b.attention(&pc.prefix, &pc.prefix_plan, io)?;
        let l1 = t.elapsed().as_secs_f64();
        if i > 0 {
            // The first round warms caches and the thread pool.
            ti.push(a);
            tc.push(c);
            t1.push(l1);
        }
    }
    let io = AttnIo {
        q: &q,
        kv: paged_bufs(&kv.tables, &kv.store.k, &kv.store.v, &tables_i, 0),
        out: &mut oi,
        lse: None,
    };
    b.attention(&pi, &plan_i, io)?;
    // The two computed the same attention.
    let (x, y) = (to_host::<_, f32>(&b, &oi)?, to_host::<_, f32>(&b, &oc)?);
    let scale = y.iter().fold(1e-30f32, |m, v| m.max(v.abs()));
    let err = x
        .iter()
        .zip(&y)
        .fold(0f32, |m, (a, c)| m.max((a - c).abs()))
        / scale;
    if err.is_nan() || err > 1e-4 {
        bail!("cascade and independent attention differ: relative error {err}");
    }
    let (t_i, t_c, t_1) = (median(ti), median(tc), median(t1));
    let tok = (row * 2 * kv_dtype.size()) as f64;
    let suffixes: usize = (0..SEQS).map(suffix_len).sum();
    let bytes_i = tok * (SEQS * prefix + suffixes) as f64;
    let bytes_c = tok * (prefix + suffixes) as f64;
    let allow = bytes_i / bytes_c;
    // Both compute every score: the same flops.
    let flops = 4.0 * (HQ * D) as f64 * (SEQS * prefix + suffixes) as f64;
    let name = kv_dtype.name();
    let roof = fma / (flops / t_i / 1e9);
    println!(
        "cascade {name}: independent {:.2} ms, cascade {:.2} ms: {:.2}x faster; the saved reads \
         allow {allow:.2}x (independent reads {SEQS} x the prefix, cascade once); the same flops \
         at the FMA peak ({fma:.1} GFLOP/s) allow {roof:.2}x; level 1 alone {:.2} ms \
         ({:.1} GFLOP/s)",
        t_i * 1e3,
        t_c * 1e3,
        t_i / t_c,
        t_1 * 1e3,
        4.0 * (HQ * D * SEQS * prefix) as f64 / t_1 / 1e9
    );
    let case = |what: &str| format!("cascade {what} {SEQS}x{prefix}+sfx {name} Hq32/Hkv8");
    Ok(vec![
        Row {
            case: case("(indep/cascade)"),
            ms: t_c * 1e3,
            gflops: flops / t_c / 1e9,
            gbs: bytes_c / t_c / 1e9,
            ratio: t_i / t_c,
            limit: format!("independent time; saved reads allow {allow:.2}x"),
        },
        Row {
            case: case("independent"),
            ms: t_i * 1e3,
            gflops: flops / t_i / 1e9,
            gbs: bytes_i / t_i / 1e9,
            ratio: 1.0,
            limit: "independent time".into(),
        },
    ])
}
