//! GPU-only verification beside `flexkern::verify`'s matrix (which `flexkern verify --device
//! cuda` runs through `CudaBackend`): typed errors on bad input, deterministic mode, CUDA-graph
//! replay, one module per structure, and the helpers they share (paged pools with NaN-poisoned
//! unused slots, the encodings).

use crate::Result;
use flexkern::attention::problem::SeqLens;
use flexkern::dtype::{f32_to_fp8_e4m3, f32_to_fp8_e5m2, fp8_e4m3_to_f32, fp8_e5m2_to_f32};
use flexkern::kv_cache::quant::max_code;
use flexkern::verify::{Input, Outcome, Rng};
use flexkern::DType;
use half::{bf16, f16};

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

pub(crate) fn bytes(i: &Input) -> &[u8] {
    match i {
        Input::F32(v) => bytemuck::cast_slice(v),
        Input::F16(v) => bytemuck::cast_slice(v),
        Input::BF16(v) => bytemuck::cast_slice(v),
    }
}

pub(crate) fn cu(seqs: &[(usize, usize)]) -> (Vec<u64>, Vec<u64>) {
    let mut cu_q = vec![0u64];
    let mut cu_kv = vec![0u64];
    for &(a, b) in seqs {
        cu_q.push(cu_q.last().unwrap() + a as u64);
        cu_kv.push(cu_kv.last().unwrap() + b as u64);
    }
    (cu_q, cu_kv)
}

/// A paged pool in `dtype` with shuffled pages and NaN-poisoned unused slots.
pub(crate) struct PagedPool {
    pub k: Vec<u8>,
    pub v: Vec<u8>,
    pub cu_pages: Vec<u32>,
    pub first_page: Vec<u32>,
    pub pages: Vec<u32>,
    pub num_pages: usize,
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
    let (mut cu_pages, mut first_page, mut pages) = (vec![0u32], Vec::new(), Vec::new());
    for &(_, kl) in seqs {
        let mine: Vec<u32> = order[pages.len()..pages.len() + kl.div_ceil(ps)].to_vec();
        for i in 0..kl {
            let slot = mine[i / ps] as usize * ps + i % ps;
            for (h, &scale) in scales.iter().enumerate() {
                for (pool, dim) in [(&mut k, dk), (&mut v, dv)] {
                    for e in 0..dim {
                        let (code, _) = encode(dtype, rng.uniform() * 2.0, scale);
                        let at = ((slot * hkv + h) * dim + e) * es;
                        pool[at..at + es].copy_from_slice(&code);
                    }
                }
            }
        }
        pages.extend_from_slice(&mine);
        cu_pages.push(pages.len() as u32);
        first_page.push(0);
    }
    PagedPool {
        k,
        v,
        cu_pages,
        first_page,
        pages,
        num_pages,
    }
}

mod extra;
pub mod gemv;
pub mod ops;
mod waves;
pub use extra::extra_checks;
pub use waves::wave_cases;

/// Lengths helper for the extra checks.
pub(crate) fn lens_of(seqs: &[(usize, usize)]) -> SeqLens {
    let (cu_q, cu_kv) = cu(seqs);
    SeqLens::from_cu(&cu_q, &cu_kv).expect("valid lengths")
}
