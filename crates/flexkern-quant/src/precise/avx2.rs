//! AVX2 kernels of precise mode: the 32-element legacy and table formats widen their codes
//! in registers (`kernel32!`), IQ4_XS per 32-element sub-block; the stack-buffer path for the
//! rest. `fma32` is shared with the K-quant kernels (`crate::k_quants::precise`).

use crate::format::QuantBlock;
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::lut4::{e8m0_half, BlockIQ4NL, BlockIQ4XS, BlockMXFP4, KVALUES_IQ4NL, KVALUES_MXFP4};
use crate::simd::{bits_to_bytes, h2f_x8, hsum_ps, nibbles_32};
use std::arch::x86_64::*;

/// The stack-buffer path: see `super::dot_by_blocks`. Compiled for AVX2 so the format's
/// `dequantize`, inlined here, is vectorized too.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_by_blocks<B: QuantBlock>(w: &[B], x: &[f32]) -> f32 {
    let per = (super::CHUNK / B::ELEMS).max(1);
    let mut buf = [0f32; super::CHUNK];
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut tail = 0.0f32;
    for (wc, xc) in w.chunks(per).zip(x.chunks(per * B::ELEMS)) {
        let n = (wc.len() * B::ELEMS).min(xc.len());
        B::dequantize(wc, &mut buf[..wc.len() * B::ELEMS]);
        let (bp, xp) = (buf.as_ptr(), xc.as_ptr());
        let mut i = 0;
        while i + 32 <= n {
            for (j, a) in acc.iter_mut().enumerate() {
                let o = i + 8 * j;
                *a = _mm256_fmadd_ps(_mm256_loadu_ps(bp.add(o)), _mm256_loadu_ps(xp.add(o)), *a);
            }
            i += 32;
        }
        while i + 8 <= n {
            acc[0] = _mm256_fmadd_ps(
                _mm256_loadu_ps(bp.add(i)),
                _mm256_loadu_ps(xp.add(i)),
                acc[0],
            );
            i += 8;
        }
        for j in i..n {
            tail += buf[j] * xc[j];
        }
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    hsum_ps(s) + tail
}

/// `acc[i] += (q * d[h] + m[h]) * x[8i .. 8i + 8]` for 32 codes `q` (i8, in element order),
/// `h = i / 2` (elements 0..16 take `d[0]`, `m[0]`; 16..32 `d[1]`, `m[1]`): the weights exist
/// only as f32 registers.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn fma32(
    q: __m256i,
    d: [__m256; 2],
    m: [__m256; 2],
    x: *const f32,
    acc: &mut [__m256; 4],
) {
    let lo = _mm256_castsi256_si128(q);
    let hi = _mm256_extracti128_si256::<1>(q);
    let parts = [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)];
    for (i, (p, a)) in parts.into_iter().zip(acc.iter_mut()).enumerate() {
        let w = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p)),
            d[i / 2],
            m[i / 2],
        );
        *a = _mm256_fmadd_ps(w, _mm256_loadu_ps(x.add(8 * i)), *a);
    }
}

/// `fma32` with one scale and offset for the whole block.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_block(q: __m256i, d: __m256, m: __m256, x: *const f32, acc: &mut [__m256; 4]) {
    fma32(q, [d, d], [m, m], x, acc)
}

/// The sum of the four accumulators' lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn hsum4(acc: [__m256; 4]) -> f32 {
    hsum_ps(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ))
}

/// The row loop every register kernel shares: rows of `x.len() / $elems` blocks of `w`, one
/// output each, `$block(b, x_ptr, &mut acc)` per block. Rows are read back to back, so the
/// block `PREFETCH_BYTES` ahead (within `w`) is hinted into L1 as each block is read.
macro_rules! row_loop {
    ($w:expr, $x:expr, $out:expr, $elems:expr, |$b:ident, $xp:ident, $acc:ident| $block:expr) => {{
        let (w, x, out) = ($w, $x, $out);
        let nb = x.len() / $elems;
        if nb == 0 || w.is_empty() {
            // No weights: empty dots.
            out.fill(0.0);
            return;
        }
        let rows = out.len().min(w.len() / nb);
        let ahead = crate::simd::PREFETCH_BYTES.div_ceil(std::mem::size_of_val(&w[0]).max(1));
        let last = w.len().saturating_sub(1);
        for (r, o) in out.iter_mut().enumerate().take(rows) {
            let mut $acc = [_mm256_setzero_ps(); 4];
            for i in 0..nb {
                let at = r * nb + i;
                _mm_prefetch::<_MM_HINT_T0>(w.as_ptr().add((at + ahead).min(last)) as *const i8);
                let $b = w.get_unchecked(at);
                let $xp = x.as_ptr().add($elems * i);
                $block;
            }
            *o = hsum4($acc);
        }
    }};
}
pub(crate) use row_loop;

/// One precise kernel per 32-element format, over rows: `codes` gives a block's 32 codes as
/// i8, `dm` its scale and offset as 8-lane vectors (`w = code * d + m`).
macro_rules! kernel32 {
    ($name:ident, $B:ty, |$b:ident| $codes:expr, $dm:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name(w: &[$B], x: &[f32], out: &mut [f32]) {
            row_loop!(w, x, out, 32, |$b, xp, acc| {
                let (d, m): (__m256, __m256) = $dm;
                fma_block($codes, d, m, xp, &mut acc)
            })
        }
    };
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn sym(d: half::f16) -> (__m256, __m256) {
    (h2f_x8(d), _mm256_setzero_ps())
}

/// The 5th bits of a Q5 block as 16 where set.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn high16(qh: [u8; 4]) -> __m256i {
    _mm256_and_si256(bits_to_bytes(u32::from_le_bytes(qh)), _mm256_set1_epi8(16))
}

/// `table[code]` for 32 nibble codes (ggml's layout).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn lookup(table: &[i8; 16], qs: &[u8; 16]) -> __m256i {
    let t = _mm_loadu_si128(table.as_ptr() as *const __m128i);
    _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nibbles_32(qs.as_ptr()))
}

kernel32!(
    q4_0,
    BlockQ4_0,
    |b| _mm256_sub_epi8(nibbles_32(b.qs.as_ptr()), _mm256_set1_epi8(8)),
    sym(b.d)
);
kernel32!(
    q4_1,
    BlockQ4_1,
    |b| nibbles_32(b.qs.as_ptr()),
    (h2f_x8(b.d), h2f_x8(b.m))
);
kernel32!(
    q5_0,
    BlockQ5_0,
    |b| _mm256_sub_epi8(
        _mm256_or_si256(nibbles_32(b.qs.as_ptr()), high16(b.qh)),
        _mm256_set1_epi8(16)
    ),
    sym(b.d)
);
kernel32!(
    q5_1,
    BlockQ5_1,
    |b| _mm256_or_si256(nibbles_32(b.qs.as_ptr()), high16(b.qh)),
    (h2f_x8(b.d), h2f_x8(b.m))
);
kernel32!(
    q8_0,
    BlockQ8_0,
    |b| _mm256_loadu_si256(b.qs.as_ptr() as *const __m256i),
    sym(b.d)
);
kernel32!(
    q8_1,
    BlockQ8_1,
    |b| _mm256_loadu_si256(b.qs.as_ptr() as *const __m256i),
    sym(b.d)
);
kernel32!(
    iq4_nl,
    BlockIQ4NL,
    |b| lookup(&KVALUES_IQ4NL, &b.qs),
    sym(b.d)
);
kernel32!(
    mxfp4,
    BlockMXFP4,
    |b| lookup(&KVALUES_MXFP4, &b.qs),
    (_mm256_set1_ps(e8m0_half(b.e)), _mm256_setzero_ps())
);

/// IQ4_XS: eight 32-element sub-blocks, each IQ4_NL's table lookup with its own scale.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn iq4_xs(w: &[BlockIQ4XS], x: &[f32], out: &mut [f32]) {
    let zero = _mm256_setzero_ps();
    row_loop!(w, x, out, 256, |b, xp, acc| {
        let d = b.d.to_f32();
        for ib in 0..8 {
            let qs: &[u8; 16] = b.qs[16 * ib..16 * ib + 16].try_into().unwrap();
            let ds = _mm256_set1_ps(d * b.sub_scale(ib) as f32);
            fma_block(
                lookup(&KVALUES_IQ4NL, qs),
                ds,
                zero,
                xp.add(32 * ib),
                &mut acc,
            );
        }
    })
}
