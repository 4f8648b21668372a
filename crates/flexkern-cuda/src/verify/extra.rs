//! GPU-only checks: typed errors before any launch, deterministic mode, CUDA-graph capture of a
//! prepared call, and one compiled module for variants of equal structure.

use super::{bytes, lens_of, outcome, paged_pool};
use crate::attention::{self, AttnCall, KvInput, PagedKv, QInput};
use crate::error::{CudaError, Result};
use crate::runtime::{Device, DeviceBuf};
use cudarc::driver::result::{graph, stream};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use flexkern::attention::problem::SeqLens;
use flexkern::builtins::{causal, sliding_window};
use flexkern::verify::{Input, Outcome, Rng};
use flexkern::{DType, Variant};
use std::sync::Arc;

fn check(name: &str, r: Result<String>) -> Outcome {
    let ok = r
        .as_ref()
        .map(|_| (0.0, 0.0))
        .map_err(|e| CudaError::Invalid {
            arg: "check",
            msg: e.to_string(),
        });
    let mut o = outcome(name.to_string(), DType::F32, 0.0, ok);
    if let Ok(note) = r {
        o.note = note;
    }
    o
}

/// Decode over a paged bf16 pool: Hq 8 / Hkv 2, D 128, page 16, the given lengths.
struct Fixture {
    q: DeviceBuf,
    k: DeviceBuf,
    v: DeviceBuf,
    pool: super::PagedPool,
    lens: SeqLens,
    q_base: Vec<usize>,
}

const HQ: usize = 8;
const HKV: usize = 2;
const D: usize = 128;
const PS: usize = 16;

fn fixture(dev: &Arc<Device>, seqs: &[(usize, usize)], seed: u64) -> Result<Fixture> {
    let mut rng = Rng::new(seed);
    let total_q: usize = seqs.iter().map(|s| s.0).sum();
    let q: Vec<f32> = (0..total_q * HQ * D).map(|_| rng.uniform() * 2.0).collect();
    let pool = paged_pool(&mut rng, seqs, HKV, D, D, PS, DType::BF16);
    let lens = lens_of(seqs);
    let q_base = (0..lens.num_seqs())
        .map(|s| lens.q_start(s) * HQ * D)
        .collect();
    Ok(Fixture {
        q: dev.upload(bytes(&Input::F32(q)))?,
        k: dev.upload(&pool.k)?,
        v: dev.upload(&pool.v)?,
        pool,
        lens,
        q_base,
    })
}

fn call<'a>(
    f: &'a Fixture,
    v: &'a flexkern::variant::CompiledVariant,
    out: &'a DeviceBuf,
    lse: &'a DeviceBuf,
    det: bool,
) -> AttnCall<'a> {
    AttnCall {
        lens: &f.lens,
        num_q_heads: HQ,
        num_kv_heads: HKV,
        head_dim: D,
        head_dim_v: D,
        scale: 1.0 / (D as f32).sqrt(),
        variant: v,
        q: QInput {
            buf: &f.q,
            dtype: DType::F32,
            seq_base: &f.q_base,
            tok_stride: HQ * D,
            head_stride: D,
        },
        kv: KvInput::Paged(PagedKv {
            k: &f.k,
            v: &f.v,
            k_dtype: DType::BF16,
            v_dtype: DType::BF16,
            page_size: PS,
            num_pages: f.pool.num_pages,
            cu_pages: &f.pool.cu_pages,
            first_page: &f.pool.first_page,
            page_indices: &f.pool.pages,
            device_tables: None,
        }),
        k_scales: &[],
        v_scales: &[],
        out,
        lse: Some(lse),
        deterministic: det,
    }
}

fn bad_input(dev: &Arc<Device>) -> Result<String> {
    let f = fixture(dev, &[(1, 100), (1, 40)], 7)?;
    let v = Variant::full().mask(causal()).compile()?;
    let out = dev.alloc(2 * HQ * D * 4)?;
    let small = dev.alloc(16)?;
    let lse = dev.alloc(2 * HQ * 4)?;
    let bad_page = vec![f.pool.num_pages as u32; f.pool.pages.len()];
    let short_cu = vec![0u32, 1, 2];
    let sinks3 = Variant::full().sinks(vec![0.0; 3]).compile()?;
    let mut n = 0;
    let mut expect_err = |what: &str, c: AttnCall| -> Result<()> {
        match attention::attention(dev, &c) {
            // The shared host checks answer in flexkern's own typed errors.
            Err(CudaError::Invalid { .. }) | Err(CudaError::Flexkern(_)) => {
                n += 1;
                Ok(())
            }
            other => Err(CudaError::Invalid {
                arg: "bad input",
                msg: format!("{what}: expected a typed error, got {other:?}"),
            }),
        }
    };
    let mut c = call(&f, &v, &out, &lse, false);
    if let KvInput::Paged(PagedKv { page_indices, .. }) = &mut c.kv {
        *page_indices = &bad_page;
    }
    expect_err("page outside the pool", c)?;
    let mut c = call(&f, &v, &out, &lse, false);
    if let KvInput::Paged(PagedKv { cu_pages, .. }) = &mut c.kv {
        *cu_pages = &short_cu;
    }
    expect_err("too few pages listed", c)?;
    let mut c = call(&f, &v, &out, &lse, false);
    if let KvInput::Paged(PagedKv { page_size, .. }) = &mut c.kv {
        *page_size = 300;
    }
    expect_err("page size 300", c)?;
    expect_err("output too small", call(&f, &v, &small, &lse, false))?;
    expect_err("lse too small", call(&f, &v, &out, &small, false))?;
    expect_err("3 sinks for 8 heads", call(&f, &sinks3, &out, &lse, false))?;
    let mut c = call(&f, &v, &out, &lse, false);
    c.num_kv_heads = 3;
    expect_err("8 q heads over 3 kv heads", c)?;
    let mut c = call(&f, &v, &out, &lse, false);
    c.head_dim = 577;
    expect_err("head size 577", c)?;
    let mut c = call(&f, &v, &out, &lse, false);
    c.scale = f32::NAN;
    expect_err("NaN scale", c)?;
    Ok(format!("{n} typed errors, nothing launched"))
}

fn read(dev: &Device, b: &DeviceBuf, n: usize) -> Result<Vec<f32>> {
    let mut v = vec![0f32; n];
    dev.read(b, 0, &mut v)?;
    Ok(v)
}

/// A sequence's bits alone and inside a batch of other lengths agree in deterministic mode (the
/// same pool and page table; the batch only adds sequences).
fn deterministic(dev: &Arc<Device>) -> Result<String> {
    let v = Variant::full().mask(causal()).compile()?;
    let seqs = [(1usize, 9000usize), (1, 70000), (1, 5)];
    let f = fixture(dev, &seqs, 11)?;
    let out = dev.alloc(seqs.len() * HQ * D * 4)?;
    let lse = dev.alloc(seqs.len() * HQ * 4)?;
    attention::attention(dev, &call(&f, &v, &out, &lse, true))?;
    let batch = read(dev, &out, HQ * D)?;
    let alone_lens = lens_of(&seqs[..1]);
    let cu1 = [0, f.pool.cu_pages[1]];
    let mut c = call(&f, &v, &out, &lse, true);
    c.lens = &alone_lens;
    c.q.seq_base = &f.q_base[..1];
    if let KvInput::Paged(PagedKv {
        cu_pages,
        first_page,
        ..
    }) = &mut c.kv
    {
        *cu_pages = &cu1;
        *first_page = &f.pool.first_page[..1];
    }
    dev.memset(&out, 0, HQ * D * 4, 0xff)?;
    attention::attention(dev, &c)?;
    let alone = read(dev, &out, HQ * D)?;
    if alone
        .iter()
        .zip(&batch)
        .any(|(a, b)| a.to_bits() != b.to_bits())
    {
        return Err(CudaError::Invalid {
            arg: "deterministic",
            msg: "sequence 0 differs inside the batch".into(),
        });
    }
    Ok("bit-identical alone and in a batch".into())
}

/// A prepared call captured into a CUDA graph and replayed gives the direct launch's bits.
fn graph_replay(dev: &Arc<Device>) -> Result<String> {
    let v = Variant::full()
        .mask(causal())
        .mask(sliding_window(3000))
        .compile()?;
    let f = fixture(dev, &[(1, 5000), (2, 300)], 13)?;
    let n = 3 * HQ;
    let (out, lse) = (dev.alloc(n * D * 4)?, dev.alloc(n * 4)?);
    let (out2, lse2) = (dev.alloc(n * D * 4)?, dev.alloc(n * 4)?);
    attention::attention(dev, &call(&f, &v, &out, &lse, false))?;
    dev.memset(&out2, 0, n * D * 4, 0xff)?;
    let p = attention::prepare(dev, &call(&f, &v, &out2, &lse2, false))?.expect("work");
    dev.synchronize()?;
    let d = |e| crate::error::driver("graph", e);
    // SAFETY: the stream is ours; only kernel launches on pre-uploaded buffers are captured.
    unsafe {
        stream::begin_capture(
            dev.stream(),
            CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
        .map_err(d)?;
        let launched = p.launch();
        let g = stream::end_capture(dev.stream()).map_err(d)?;
        launched?;
        let exec = graph::instantiate(g, CUgraphInstantiate_flags(0)).map_err(d)?;
        graph::launch(exec, dev.stream()).map_err(d)?;
        graph::launch(exec, dev.stream()).map_err(d)?;
        dev.synchronize()?;
        let _ = graph::exec_destroy(exec);
        let _ = graph::destroy(g);
    }
    let (a, b) = (read(dev, &out, n * D)?, read(dev, &out2, n * D)?);
    if a.iter().zip(&b).any(|(x, y)| x.to_bits() != y.to_bits()) {
        return Err(CudaError::Invalid {
            arg: "graph",
            msg: "replay differs from the direct launch".into(),
        });
    }
    Ok(format!(
        "{} blocks + merge captured, replayed twice, bit-identical",
        p.plan.items.len() * HKV
    ))
}

/// `c` with its K and V pools exchanged (same layout when Dk = Dv).
fn swap_kv(c: AttnCall<'_>) -> AttnCall<'_> {
    let kv = match c.kv {
        KvInput::Paged(p) => KvInput::Paged(PagedKv {
            k: p.v,
            v: p.k,
            ..p
        }),
        KvInput::Strided { k, v } => KvInput::Strided { k: v, v: k },
    };
    AttnCall { kv, ..c }
}

/// A plan reused for a call on other buffers (the model's next layer: K and V swapped here)
/// gives exactly what a fresh plan gives, and the call after it, on the first buffers again,
/// too: the reuse rebinds every buffer and the kernel resets its arrival counters.
fn plan_reuse(dev: &Arc<Device>) -> Result<String> {
    use std::sync::atomic::Ordering;
    let v = Variant::full().mask(causal()).compile()?;
    let f = fixture(dev, &[(1, 3000), (5, 700), (1, 64)], 17)?;
    let n = 7 * HQ;
    let bufs =
        || -> Result<(DeviceBuf, DeviceBuf)> { Ok((dev.alloc(n * D * 4)?, dev.alloc(n * 4)?)) };
    let (r1, l1) = bufs()?;
    let (r2, l2) = bufs()?;
    attention::attention(dev, &call(&f, &v, &r1, &l1, false))?;
    attention::attention(dev, &swap_kv(call(&f, &v, &r2, &l2, false)))?;
    let memo = attention::PlanMemo::default();
    let outs = [bufs()?, bufs()?, bufs()?];
    for (i, (o, l)) in outs.iter().enumerate() {
        dev.memset(o, 0, n * D * 4, 0xff)?;
        let c = call(&f, &v, o, l, false);
        let c = if i == 1 { swap_kv(c) } else { c };
        attention::attention_memo(dev, &c, &memo)?;
    }
    let same = |a: &DeviceBuf, b: &DeviceBuf| -> Result<bool> {
        let (x, y) = (read(dev, a, n * D)?, read(dev, b, n * D)?);
        Ok(x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()))
    };
    let ok = same(&outs[0].0, &r1)? && same(&outs[1].0, &r2)? && same(&outs[2].0, &r1)?;
    let hits = memo.hits.load(Ordering::Relaxed);
    if !ok || hits != 2 || same(&r1, &r2)? {
        return Err(CudaError::Invalid {
            arg: "plan memo",
            msg: format!("reused plans differ from fresh ones (or were not reused: {hits} hits)"),
        });
    }
    Ok("3 calls, 2 on the reused plan, bit-identical to fresh plans".into())
}

/// sliding_window(4096) and (2048) share one module (the window is a parameter).
fn one_module(dev: &Arc<Device>) -> Result<String> {
    let f = fixture(dev, &[(1, 6000)], 17)?;
    let (out, lse) = (dev.alloc(HQ * D * 4)?, dev.alloc(HQ * 4)?);
    let before = dev.load_stats().len();
    let mut outs = Vec::new();
    for w in [4096, 2048] {
        let v = Variant::full()
            .mask(causal())
            .mask(sliding_window(w))
            .compile()?;
        attention::attention(dev, &call(&f, &v, &out, &lse, false))?;
        outs.push(read(dev, &lse, HQ)?);
    }
    let loads = dev.load_stats().len() - before;
    if loads > 1 || outs[0] == outs[1] {
        return Err(CudaError::Invalid {
            arg: "modules",
            msg: format!(
                "{loads} module loads, outputs equal: {}",
                outs[0] == outs[1]
            ),
        });
    }
    Ok(format!("{loads} module load for two window sizes"))
}

/// Unused slots of a pool poisoned with NaN (the tails of partly filled last pages, whole unused
/// pages) never reach an output: every O and LSE of rows with visible keys stays finite (a NaN
/// read anywhere, even weighted by 0, would show), on the cp.async and the register paths.
fn poison_does_not_leak(dev: &Arc<Device>) -> Result<String> {
    let seqs = [(1usize, 100usize), (3, 40), (1, 7)];
    let f = fixture(dev, &seqs, 19)?;
    let v = Variant::full().mask(causal()).compile()?;
    let n = 5 * HQ;
    let (out, lse) = (dev.alloc(n * D * 4)?, dev.alloc(n * 4)?);
    for pipeline in ["32,3", "0"] {
        std::env::set_var("FLEXKERN_CUDA_ASYNC", pipeline);
        let r = attention::attention(dev, &call(&f, &v, &out, &lse, false));
        std::env::remove_var("FLEXKERN_CUDA_ASYNC");
        r?;
        let (o, l) = (read(dev, &out, n * D)?, read(dev, &lse, n)?);
        if let Some(i) = o.iter().chain(&l).position(|x| !x.is_finite()) {
            return Err(CudaError::Invalid {
                arg: "poison",
                msg: format!("element {i} is not finite (pipeline {pipeline})"),
            });
        }
    }
    Ok("O and LSE finite over a NaN-poisoned pool, both kernel paths".into())
}

/// A kept NaN score (a score mod giving NaN at key 3) makes exactly the rows that see key 3 NaN
/// in O and LSE, through the `Backend` trait, on a prefill and on a split-KV decode (the merge).
fn nan_score_poisons_the_row(dev: &Arc<Device>) -> Result<String> {
    use flexkern::expr::{float, int, kv_pos, score, select};
    let backend = crate::backend::CudaBackend::on(dev.clone());
    let (hq, d) = (2usize, 64usize);
    let seqs = [(8usize, 8usize), (1, 5000)];
    let (tq, tk) = (9usize, 5008usize);
    let mut rng = Rng::new(23);
    let mut gen = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.uniform()).collect() };
    let (q, k, v) = (gen(tq * hq * d), gen(tk * d), gen(tk * d));
    let (cu_q, cu_kv) = super::cu(&seqs);
    let variant = Variant::full().mask(causal()).score(select(
        kv_pos().eq(int(3)),
        // NaN made at run time: non-finite constants are refused when a variant compiles.
        score() + float(-1.0).sqrt(),
        score(),
    ));
    let args = flexkern::AttentionArgs::new(
        flexkern::TensorView::contiguous(q.as_slice(), &[tq, hq, d]),
        flexkern::TensorView::contiguous(k.as_slice(), &[tk, 1, d]),
        flexkern::TensorView::contiguous(v.as_slice(), &[tk, 1, d]),
    )
    .ragged(&cu_q, &cu_kv)
    .variant(variant);
    let (mut o, mut l) = (vec![0f32; tq * hq * d], vec![0f32; tq * hq]);
    flexkern::attention(&backend, &args, None, &mut o, Some(&mut l))?;
    for t in 0..tq {
        // Rows 0..8 are prefill queries at positions 0..7; row 8 is the decode query.
        let sees_key3 = t >= 3;
        for h in 0..hq {
            let row_o = &o[(t * hq + h) * d..][..d];
            let ok = if sees_key3 {
                row_o.iter().all(|x| x.is_nan()) && l[t * hq + h].is_nan()
            } else {
                row_o.iter().all(|x| x.is_finite()) && l[t * hq + h].is_finite()
            };
            if !ok {
                return Err(CudaError::Invalid {
                    arg: "nan",
                    msg: format!(
                        "row {t} head {h}: sees key 3 = {sees_key3}, lse {}",
                        l[t * hq + h]
                    ),
                });
            }
        }
    }
    Ok("NaN exactly in the rows that keep the NaN score (prefill and split-KV decode)".into())
}

/// Every GPU-only check, each as one verify row.
/// Small uploads from several threads, each thread synchronizing the shared stream between its
/// own uploads, all arrive intact (the pinned staging arena must not be reused under a copy
/// still in flight).
fn concurrent_uploads(dev: &Arc<Device>) -> Result<String> {
    const THREADS: u32 = 8;
    const ROUNDS: u32 = 200;
    let bad = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let bad = &bad;
                s.spawn(move || -> Result<()> {
                    for r in 0..ROUNDS {
                        let pattern: Vec<u32> = (0..4096).map(|i| t << 24 ^ r << 12 ^ i).collect();
                        let buf = dev.upload(&pattern)?;
                        if r % 3 == 0 {
                            dev.synchronize()?;
                        }
                        let mut back = vec![0u32; pattern.len()];
                        dev.read(&buf, 0, &mut back)?;
                        if back != pattern {
                            bad.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().expect("upload thread")?;
        }
        Ok(())
    })?;
    match bad.into_inner() {
        0 => Ok(format!(
            "{} uploads from {THREADS} threads intact",
            THREADS * ROUNDS
        )),
        n => Err(CudaError::Invalid {
            arg: "staging",
            msg: format!("{n} of {} uploads arrived corrupted", THREADS * ROUNDS),
        }),
    }
}

pub fn extra_checks(dev: &Arc<Device>) -> Vec<Outcome> {
    let mut v = vec![
        check("bad input: typed errors", bad_input(dev)),
        check("deterministic split-KV", deterministic(dev)),
        check("CUDA graph capture + replay", graph_replay(dev)),
        check("one module per structure", one_module(dev)),
        check("NaN-poisoned unused page slots", poison_does_not_leak(dev)),
        check(
            "kept NaN score poisons its row",
            nan_score_poisons_the_row(dev),
        ),
        check("concurrent uploads and syncs", concurrent_uploads(dev)),
        check("plan reuse across buffers", plan_reuse(dev)),
    ];
    v.extend(super::gemv::gemv_checks(dev, 0x5eed_0014));
    v.extend(super::ops::ops_checks(dev, 0x5eed_0015));
    v
}
