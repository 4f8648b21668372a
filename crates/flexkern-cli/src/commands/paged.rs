//! The paged path of `flexkern attn`: `--page-size P` copies K/V into a paged cache with a
//! shuffled page order (so the page-table lookup is exercised from files) and `--kv-dtype`
//! quantizes it, then runs `paged_attention`, the same kernels as the contiguous path.

use anyhow::{bail, Context, Result};
use flexkern::attention::paged::{paged_attention, paged_bufs, prepare};
use flexkern::attention::plan::plan;
use flexkern::attention::upload_data;
use flexkern::backend::{to_device, AttnIo, Backend, KvBufs};
use flexkern::kv_cache::quant::is_quantized;
use flexkern::kv_cache::{CacheConfig, KvCache, Scales, SeqId};
use flexkern::{AttentionArgs, CpuBackend, DType, TensorView};

/// `--kv-dtype` values: fp8e4m3 | fp8e5m2 | int8 (and the float types, for comparison).
pub fn parse_kv_dtype(s: &str) -> Result<DType> {
    DType::from_name(s).with_context(|| {
        format!("--kv-dtype {s}: expected fp8e4m3, fp8e5m2, int8, f32, f16 or bf16")
    })
}

/// All of a rank-3 `[tokens, H, D]` view, contiguous f32 (for calibrating scales).
fn widen(t: &TensorView) -> Vec<f32> {
    let (n, h, d) = (t.shape[0], t.shape[1], t.shape[2]);
    let mut out = vec![0f32; n * h * d];
    for (i, row) in out.chunks_exact_mut(d).enumerate() {
        t.data
            .read_f32((i / h) * t.strides[0] + (i % h) * t.strides[1], row);
    }
    out
}

/// Pages K `[tokens, Hkv, D]` and V `[tokens, Hkv, Dv]` (sequence `s` is rows
/// `cu_kv_lens[s]..cu_kv_lens[s+1]`; one sequence when `None`) into a cache of `page_size`,
/// allocating pages in an order shuffled by `seed`. `kv_dtype` `None` keeps the input dtype;
/// quantized types get per-head scales calibrated on the data (largest |x| -> largest code).
pub fn page_kv<B: Backend>(
    backend: &B,
    k: &TensorView,
    v: &TensorView,
    cu_kv_lens: Option<&[u64]>,
    page_size: usize,
    kv_dtype: Option<DType>,
    seed: u64,
) -> Result<(KvCache<B>, Vec<SeqId>)> {
    if k.rank() != 3 || v.rank() != 3 {
        bail!("--page-size needs K and V as [tokens, Hkv, D]");
    }
    k.validate("k")?;
    v.validate("v")?;
    let tokens = k.shape[0] as u64;
    let single = [0, tokens];
    let cu = cu_kv_lens.unwrap_or(&single);
    if cu.first() != Some(&0)
        || cu.windows(2).any(|w| w[1] < w[0])
        || *cu.last().unwrap() > tokens
        || v.shape[0] as u64 != tokens
    {
        bail!("cu_kv_lens {cu:?} does not fit K/V of {tokens} tokens");
    }
    if page_size == 0 {
        bail!("--page-size must be at least 1");
    }
    let dtype = kv_dtype.unwrap_or(k.dtype());
    let scales = |t: &TensorView| -> Result<Option<Scales>> {
        Ok(if is_quantized(dtype) {
            Some(Scales::calibrate(
                dtype,
                &widen(t),
                t.shape[1],
                t.shape[2],
                true,
            )?)
        } else {
            None
        })
    };
    let num_pages: u64 = cu
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(page_size as u64))
        .sum();
    let mut cfg = CacheConfig::new(num_pages as usize, page_size, k.shape[1], k.shape[2]);
    cfg.head_dim_v = v.shape[2];
    (cfg.k_dtype, cfg.v_dtype) = (dtype, dtype);
    (cfg.k_scales, cfg.v_scales) = (scales(k)?, scales(v)?);
    let mut cache = KvCache::new(backend, cfg)?;
    cache.shuffle_free_pages(seed);
    let mut seqs = Vec::with_capacity(cu.len() - 1);
    for w in cu.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        let id = cache.add_seq();
        if b > a {
            cache.append(backend, id, &rows(k, a, b), &rows(v, a, b))?;
        }
        seqs.push(id);
    }
    Ok((cache, seqs))
}

/// Rows `a..b` of a rank-3 view.
fn rows<'a>(t: &TensorView<'a>, a: usize, b: usize) -> TensorView<'a> {
    let mut r = t.clone();
    r.shape[0] = b - a;
    r.data = slice_from(&t.data, a * t.strides[0]);
    r
}

/// The data from element `at` on (a view of rows `a..` starts there).
fn slice_from<'a>(d: &flexkern::HostData<'a>, at: usize) -> flexkern::HostData<'a> {
    use flexkern::HostData;
    match *d {
        HostData::F32(s) => HostData::F32(&s[at.min(s.len())..]),
        HostData::F16(s) => HostData::F16(&s[at.min(s.len())..]),
        HostData::BF16(s) => HostData::BF16(&s[at.min(s.len())..]),
    }
}

/// `flexkern attn --page-size P [--kv-dtype T]`: the same call as `flexkern::attention(args)`
/// but through a paged (and optionally quantized) cache. `out` `[tokens, Hq, Dv]`, `lse`
/// `[tokens, Hq]` as in the contiguous path.
pub fn attention_paged<B: Backend>(
    backend: &B,
    args: &AttentionArgs,
    page_size: usize,
    kv_dtype: Option<DType>,
    seed: u64,
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    if args.q.rank() != 3 {
        bail!("--page-size needs Q as [tokens, Hq, D]");
    }
    let (cache, seqs) = page_kv(
        backend,
        &args.k,
        &args.v,
        args.cu_kv_lens,
        page_size,
        kv_dtype,
        seed,
    )?;
    let kv = cache.view(&seqs)?;
    let single = [0, args.q.shape[0] as u64];
    let cu_q = args.cu_q_lens.unwrap_or(&single);
    paged_attention(
        backend,
        &args.q,
        cu_q,
        &kv,
        args.scale,
        &args.variant,
        None,
        out,
        lse,
    )?;
    Ok(())
}

/// Medians of interleaved runs (contiguous, then paged, alternately, so load drift hits both).
#[derive(Clone, Copy, Debug)]
pub struct DecodeTimes {
    pub contiguous_ms: f64,
    pub paged_ms: f64,
}

/// Times one decode token (causal; `hq` / `hkv` heads of size `d`; `kv_len` keys) over
/// contiguous K/V in `act` (f32 or bf16) and over a shuffled paged cache of `page_size` storing
/// `kv_dtype` (default: `act`), `iters` interleaved pairs after one warm-up. For `flexkern bench`.
pub fn bench_paged_decode(
    (hq, hkv, d): (usize, usize, usize),
    kv_len: usize,
    page_size: usize,
    act: DType,
    kv_dtype: Option<DType>,
    iters: usize,
) -> Result<DecodeTimes> {
    use flexkern::mem::huge_vec;
    use half::bf16;
    use std::time::Instant;
    // Contiguous inputs on huge pages, as the paged cache's pool is.
    let gen = |n: usize, s: f32| -> Vec<f32> { huge_vec(n, |i| (i as f32 * s).sin()) };
    let (q, k, v) = (
        gen(hq * d, 0.37),
        gen(kv_len * hkv * d, 0.011),
        gen(kv_len * hkv * d, 0.023),
    );
    let to_bf = |x: &[f32]| -> Vec<bf16> { huge_vec(x.len(), |i| bf16::from_f32(x[i])) };
    let (qb, kb, vb) = (to_bf(&q), to_bf(&k), to_bf(&v));
    let (qs, ks) = ([1, hq, d], [kv_len, hkv, d]);
    let args = match act {
        DType::F32 => AttentionArgs::new(
            TensorView::contiguous(&q[..], &qs),
            TensorView::contiguous(&k[..], &ks),
            TensorView::contiguous(&v[..], &ks),
        ),
        DType::BF16 => AttentionArgs::new(
            TensorView::contiguous(&qb[..], &qs),
            TensorView::contiguous(&kb[..], &ks),
            TensorView::contiguous(&vb[..], &ks),
        ),
        other => bail!("activation dtype {} (f32 or bf16)", other.name()),
    }
    .variant(flexkern::Variant::full().mask(flexkern::builtins::causal()));
    let b = CpuBackend;
    let (cache, seqs) = page_kv(&b, &args.k, &args.v, None, page_size, kv_dtype, 1)?;
    let kv = cache.view(&seqs)?;
    // Both operands in backend buffers and both plans built once: only the kernels are timed.
    let pc = args.prepare()?;
    let plan_c = plan(&pc, &b.caps(), None)?;
    let pp = prepare(
        &args.q,
        &[0, 1],
        &kv.store.layout,
        &kv.tables,
        None,
        &args.variant,
    )?;
    let plan_p = plan(&pp, &b.caps(), None)?;
    let (qbuf, kbuf, vbuf) = (
        upload_data(&b, &args.q.data)?,
        upload_data(&b, &args.k.data)?,
        upload_data(&b, &args.v.data)?,
    );
    let tables = to_device(&b, &kv.tables.packed())?;
    let mut out = b.alloc(DType::F32, hq * d)?;
    let (mut tc, mut tp) = (Vec::new(), Vec::new());
    for i in 0..=iters {
        let t = Instant::now();
        let io = AttnIo {
            q: &qbuf,
            kv: KvBufs::Strided { k: &kbuf, v: &vbuf },
            out: &mut out,
            lse: None,
        };
        b.attention(&pc, &plan_c, io)?;
        let c = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let io = AttnIo {
            q: &qbuf,
            kv: paged_bufs(&kv.tables, &kv.store.k, &kv.store.v, &tables, 0),
            out: &mut out,
            lse: None,
        };
        b.attention(&pp, &plan_p, io)?;
        let p = t.elapsed().as_secs_f64() * 1e3;
        if i > 0 {
            // The first pair warms caches and thread pools.
            tc.push(c);
            tp.push(p);
        }
    }
    let med = |mut x: Vec<f64>| {
        x.sort_by(f64::total_cmp);
        x.get(x.len() / 2).copied().unwrap_or(f64::NAN)
    };
    Ok(DecodeTimes {
        contiguous_ms: med(tc),
        paged_ms: med(tp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexkern::builtins::causal;
    use flexkern::Variant;

    #[test]
    fn paged_cli_path_matches_the_contiguous_path() {
        let (hq, hkv, d) = (4, 2, 8);
        let n = 70;
        let gen =
            |m: usize, s: f32| -> Vec<f32> { (0..m).map(|i| (i as f32 * s).sin() * 0.9).collect() };
        let (q, k, v) = (
            gen(n * hq * d, 0.37),
            gen(n * hkv * d, 0.11),
            gen(n * hkv * d, 0.23),
        );
        let cu_q = [0u64, 30, 31, 70];
        let cu_kv = [0u64, 30, 40, 70];
        let args = AttentionArgs::new(
            TensorView::contiguous(&q[..], &[n, hq, d]),
            TensorView::contiguous(&k[..], &[n, hkv, d]),
            TensorView::contiguous(&v[..], &[n, hkv, d]),
        )
        .ragged(&cu_q, &cu_kv)
        .variant(Variant::full().mask(causal()));
        let mut want = vec![f32::NAN; n * hq * d];
        let backend = CpuBackend;
        flexkern::attention(&backend, &args, None, &mut want, None).unwrap();
        for (ps, dt, tol) in [
            (5, None, 1e-5),
            (16, Some("fp8e4m3"), 0.1),
            (1, Some("int8"), 0.02),
        ] {
            let mut got = vec![f32::NAN; n * hq * d];
            let dt = dt.map(|s| parse_kv_dtype(s).unwrap());
            attention_paged(&backend, &args, ps, dt, 3, &mut got, None).unwrap();
            let e = got
                .iter()
                .zip(&want)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(e <= tol, "page size {ps} {dt:?}: error {e}");
        }
        assert!(parse_kv_dtype("fp4").is_err());
        assert!(attention_paged(&backend, &args, 0, None, 0, &mut want, None).is_err());
        let t =
            bench_paged_decode((4, 2, 8), 100, 16, DType::BF16, Some(DType::Fp8E4M3), 1).unwrap();
        assert!(t.contiguous_ms >= 0.0 && t.paged_ms >= 0.0);
    }
}
