//! `flexkern verify --device cuda`: the CPU's case matrix (`flexkern::verify`) run on the GPU
//! against the same f64 oracle, outputs NaN-poisoned before each run, plus the GPU-only checks
//! (typed errors on bad input, deterministic mode, CUDA-graph replay, one module per structure).

use crate::attention::{self, AttnCall, KvInput, KvOperand, QInput};
use crate::runtime::{Device, DeviceBuf};
use crate::Result;
use flexkern::attention::problem::{KvLayout, Layout, Problem, SeqLens};
use flexkern::attention::AttentionArgs;
use flexkern::dtype::{f32_to_fp8_e4m3, f32_to_fp8_e5m2, fp8_e4m3_to_f32, fp8_e5m2_to_f32};
use flexkern::kv_cache::quant::max_code;
use flexkern::reference;
use flexkern::verify::{rel_err, tolerance, Case, Input, Outcome, PagedCase, Rng};
use flexkern::{DType, TensorView};
use half::{bf16, f16};
use std::sync::Arc;

fn outcome(name: String, dtype: DType, tol: f64, r: Result<(f64, f64)>) -> Outcome {
    match r {
        Ok((err_o, err_lse)) => Outcome {
            name,
            dtype,
            err_o,
            err_lse,
            tol,
            passed: err_o <= tol && err_lse <= tol,
            note: String::new(),
        },
        Err(e) => Outcome {
            name,
            dtype,
            err_o: f64::INFINITY,
            err_lse: f64::INFINITY,
            tol,
            passed: false,
            note: format!("{e}"),
        },
    }
}

fn fill(rng: &mut Rng, n: usize, dtype: DType) -> Input {
    let v: Vec<f32> = (0..n).map(|_| rng.uniform() * 2.0).collect();
    match dtype {
        DType::F16 => Input::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
        DType::BF16 => Input::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
        _ => Input::F32(v),
    }
}

pub(crate) fn bytes(i: &Input) -> &[u8] {
    match i {
        Input::F32(v) => bytemuck::cast_slice(v),
        Input::F16(v) => bytemuck::cast_slice(v),
        Input::BF16(v) => bytemuck::cast_slice(v),
    }
}

/// Output buffers poisoned with NaN (all-ones bits), so unwritten elements show.
fn poisoned(dev: &Arc<Device>, n: usize) -> Result<DeviceBuf> {
    let b = dev.alloc(n.max(1) * 4)?;
    dev.memset(&b, 0, n.max(1) * 4, 0xff)?;
    Ok(b)
}

/// Runs `p` on the GPU with Q from `qb` and the given KV, and compares with the oracle `want`.
fn run_and_judge(
    dev: &Arc<Device>,
    p: &Problem,
    qb: &DeviceBuf,
    q_dtype: DType,
    kv: KvInput,
    scales: (&[f32], &[f32]),
    want: &reference::Reference,
    deterministic: bool,
) -> Result<(f64, f64)> {
    let (o, lse) = run_problem(dev, p, qb, q_dtype, kv, scales, deterministic)?;
    Ok((rel_err(&o, &want.o), rel_err(&lse, &want.lse)))
}

pub(crate) fn run_problem(
    dev: &Arc<Device>,
    p: &Problem,
    qb: &DeviceBuf,
    q_dtype: DType,
    kv: KvInput,
    scales: (&[f32], &[f32]),
    deterministic: bool,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let total = p.total_q();
    let out = poisoned(dev, total * p.num_q_heads * p.head_dim_v)?;
    let lse = poisoned(dev, total * p.num_q_heads)?;
    let call = AttnCall {
        lens: &p.lens,
        num_q_heads: p.num_q_heads,
        num_kv_heads: p.num_kv_heads,
        head_dim: p.head_dim,
        head_dim_v: p.head_dim_v,
        scale: p.scale,
        variant: &p.variant,
        q: QInput {
            buf: qb,
            dtype: q_dtype,
            seq_base: &p.q.seq_base,
            tok_stride: p.q.tok_stride,
            head_stride: p.q.head_stride,
        },
        kv,
        k_scales: scales.0,
        v_scales: scales.1,
        out: &out,
        lse: Some(&lse),
        deterministic,
    };
    attention::attention(dev, &call)?;
    let mut o = vec![0f32; total * p.num_q_heads * p.head_dim_v];
    let mut l = vec![0f32; total * p.num_q_heads];
    dev.read(&out, 0, &mut o)?;
    dev.read(&lse, 0, &mut l)?;
    Ok((o, l))
}

fn strided<'a>(
    buf: &'a DeviceBuf,
    dtype: DType,
    o: &'a Layout,
) -> KvOperand<'a> {
    KvOperand {
        buf,
        dtype,
        seq_base: &o.seq_base,
        tok_stride: o.tok_stride,
        head_stride: o.head_stride,
    }
}

fn cu(seqs: &[(usize, usize)]) -> (Vec<u64>, Vec<u64>) {
    let mut cu_q = vec![0u64];
    let mut cu_kv = vec![0u64];
    for &(a, b) in seqs {
        cu_q.push(cu_q.last().unwrap() + a as u64);
        cu_kv.push(cu_kv.last().unwrap() + b as u64);
    }
    (cu_q, cu_kv)
}

/// One standard case over contiguous ragged Q/K/V.
pub fn run_case(dev: &Arc<Device>, c: &Case, seed: u64) -> Outcome {
    let tol = tolerance(c.dtype);
    let r = (|| -> Result<(f64, f64)> {
        let mut rng = Rng::new(seed);
        let total_q: usize = c.seqs.iter().map(|s| s.0).sum();
        let total_kv: usize = c.seqs.iter().map(|s| s.1).sum();
        let q = fill(&mut rng, total_q * c.hq * c.dk, c.dtype);
        let k = fill(&mut rng, total_kv * c.hkv * c.dk, c.dtype);
        let v = fill(&mut rng, total_kv * c.hkv * c.dv, c.dtype);
        let (cu_q, cu_kv) = cu(&c.seqs);
        let args = AttentionArgs::new(
            q.view(&[total_q, c.hq, c.dk]),
            k.view(&[total_kv, c.hkv, c.dk]),
            v.view(&[total_kv, c.hkv, c.dv]),
        )
        .ragged(&cu_q, &cu_kv)
        .variant(c.variant.clone());
        let (p, want) = reference::of_args(&args)?;
        let KvLayout::Strided { k: kl, v: vl } = &p.kv else {
            return Err(crate::error::invalid("k", "strided arguments give a strided layout"));
        };
        let (qb, kb, vb) = (
            dev.upload(bytes(&q))?,
            dev.upload(bytes(&k))?,
            dev.upload(bytes(&v))?,
        );
        let kv = KvInput::Strided {
            k: strided(&kb, c.dtype, kl),
            v: strided(&vb, c.dtype, vl),
        };
        run_and_judge(dev, &p, &qb, c.dtype, kv, (&[], &[]), &want, false)
    })();
    outcome(c.name.clone(), c.dtype, tol, r)
}

/// A paged pool in `dtype` with shuffled pages and NaN-poisoned unused slots, and the f32 values
/// it dequantizes to (what the oracle reads).
pub(crate) struct PagedPool {
    pub k: Vec<u8>,
    pub v: Vec<u8>,
    pub k_deq: Vec<f32>,
    pub v_deq: Vec<f32>,
    pub cu_pages: Vec<u32>,
    pub first_page: Vec<u32>,
    pub pages: Vec<u32>,
    pub num_pages: usize,
    pub scales: Vec<f32>,
}

pub(crate) fn encode(dtype: DType, x: f32, scale: f32) -> (Vec<u8>, f32) {
    match dtype {
        DType::F32 => (x.to_le_bytes().to_vec(), x),
        DType::F16 => {
            let h = f16::from_f32(x);
            (h.to_bits().to_le_bytes().to_vec(), h.to_f32())
        }
        DType::BF16 => {
            let h = bf16::from_f32(x);
            (h.to_bits().to_le_bytes().to_vec(), h.to_f32())
        }
        DType::Fp8E4M3 => {
            let c = f32_to_fp8_e4m3(x / scale);
            (vec![c], fp8_e4m3_to_f32(c) * scale)
        }
        DType::Fp8E5M2 => {
            let c = f32_to_fp8_e5m2(x / scale);
            (vec![c], fp8_e5m2_to_f32(c) * scale)
        }
        DType::I8 => {
            let c = (x / scale).round_ties_even().clamp(-127.0, 127.0) as i8;
            (vec![c as u8], c as f32 * scale)
        }
        // Index types never store K/V (callers pass KV dtypes only): zeros.
        DType::U8 | DType::U32 | DType::U64 => (vec![0; dtype.size()], 0.0),
    }
}

/// Poison of one element: NaN where the type has one, else the largest code.
pub(crate) fn poison(dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => vec![0xff; 4],
        DType::F16 | DType::BF16 => vec![0xff; 2],
        DType::Fp8E4M3 | DType::Fp8E5M2 => vec![0x7f],
        DType::I8 => vec![0x7f],
        DType::U8 | DType::U32 | DType::U64 => vec![0xff; dtype.size()],
    }
}

pub(crate) fn paged_pool(
    rng: &mut Rng,
    seqs: &[(usize, usize)],
    hkv: usize,
    dk: usize,
    dv: usize,
    ps: usize,
    dtype: DType,
) -> PagedPool {
    let needed: usize = seqs.iter().map(|s| s.1.div_ceil(ps)).sum();
    let num_pages = needed + 2;
    // Distinct per-head scales exercise the per-kv-head path.
    let scales: Vec<f32> = (0..hkv)
        .map(|h| max_code(dtype).map_or(1.0, |m| 2.0 / m * (1.0 + 0.25 * h as f32)))
        .collect();
    let mut order: Vec<u32> = (0..num_pages as u32).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let es = dtype.size();
    let mut k: Vec<u8> = poison(dtype).repeat(num_pages * ps * hkv * dk);
    let mut v: Vec<u8> = poison(dtype).repeat(num_pages * ps * hkv * dv);
    let total_kv: usize = seqs.iter().map(|s| s.1).sum();
    let mut k_deq = vec![0f32; total_kv * hkv * dk];
    let mut v_deq = vec![0f32; total_kv * hkv * dv];
    let (mut cu_pages, mut first_page, mut pages) = (vec![0u32], Vec::new(), Vec::new());
    let mut tok0 = 0;
    for &(_, kl) in seqs {
        let mine: Vec<u32> = order[pages.len()..pages.len() + kl.div_ceil(ps)].to_vec();
        for i in 0..kl {
            let slot = mine[i / ps] as usize * ps + i % ps;
            for h in 0..hkv {
                for (pool, deq, dim) in [(&mut k, &mut k_deq, dk), (&mut v, &mut v_deq, dv)] {
                    for e in 0..dim {
                        let (code, val) = encode(dtype, rng.uniform() * 2.0, scales[h]);
                        let at = ((slot * hkv + h) * dim + e) * es;
                        pool[at..at + es].copy_from_slice(&code);
                        deq[((tok0 + i) * hkv + h) * dim + e] = val;
                    }
                }
            }
        }
        pages.extend_from_slice(&mine);
        cu_pages.push(pages.len() as u32);
        first_page.push(0);
        tok0 += kl;
    }
    PagedPool {
        k,
        v,
        k_deq,
        v_deq,
        cu_pages,
        first_page,
        pages,
        num_pages,
        scales,
    }
}

/// One paged case: the case's Q over a shuffled, poisoned, quantized page pool.
pub fn run_paged_case(dev: &Arc<Device>, pc: &PagedCase, seed: u64) -> Outcome {
    let c = &pc.case;
    let name = format!(
        "paged p{} {} | {}",
        pc.page_size,
        pc.kv_dtype.name(),
        c.name
    );
    let tol = tolerance(pc.kv_dtype);
    let r = (|| -> Result<(f64, f64)> {
        let mut rng = Rng::new(seed);
        let total_q: usize = c.seqs.iter().map(|s| s.0).sum();
        let total_kv: usize = c.seqs.iter().map(|s| s.1).sum();
        let q = fill(&mut rng, total_q * c.hq * c.dk, c.dtype);
        let pool = paged_pool(
            &mut rng,
            &c.seqs,
            c.hkv,
            c.dk,
            c.dv,
            pc.page_size,
            pc.kv_dtype,
        );
        let (cu_q, cu_kv) = cu(&c.seqs);
        let args = AttentionArgs::new(
            q.view(&[total_q, c.hq, c.dk]),
            TensorView::contiguous(pool.k_deq.as_slice(), &[total_kv, c.hkv, c.dk]),
            TensorView::contiguous(pool.v_deq.as_slice(), &[total_kv, c.hkv, c.dv]),
        )
        .ragged(&cu_q, &cu_kv)
        .variant(c.variant.clone());
        let (p, want): (Problem, _) = reference::of_args(&args)?;
        let (qb, kb, vb) = (
            dev.upload(bytes(&q))?,
            dev.upload(&pool.k)?,
            dev.upload(&pool.v)?,
        );
        let kv = KvInput::Paged {
            k: &kb,
            v: &vb,
            k_dtype: pc.kv_dtype,
            v_dtype: pc.kv_dtype,
            page_size: pc.page_size,
            num_pages: pool.num_pages,
            cu_pages: &pool.cu_pages,
            first_page: &pool.first_page,
            page_indices: &pool.pages,
        device_tables: None,
        };
        run_and_judge(
            dev,
            &p,
            &qb,
            c.dtype,
            kv,
            (&pool.scales, &pool.scales),
            &want,
            false,
        )
    })();
    outcome(name, c.dtype, tol, r)
}

mod extra;
pub use extra::extra_checks;

/// Lengths helper for the extra checks.
pub(crate) fn lens_of(seqs: &[(usize, usize)]) -> SeqLens {
    let (cu_q, cu_kv) = cu(seqs);
    SeqLens::from_cu(&cu_q, &cu_kv).expect("valid lengths")
}
