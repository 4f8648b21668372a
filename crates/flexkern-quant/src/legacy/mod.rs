//! ggml's 32-element "legacy" formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the Q8_1 activation
//! format. Quantizers follow ggml's `quantize_row_<t>_ref` operation for operation (f32 math,
//! truncating casts, `roundf`), so the bytes match ggml and gguf-py bit for bit.
//!
//! Dots run against an activation quantized to Q8_0 (symmetric weights) or Q8_1 (weights with a
//! minimum, whose block sum `s` folds the offset in), as ggml does. Activations are quantized as
//! ggml's x86 SIMD `quantize_row_q8_0/1` does it (the path llama.cpp takes on CPUs), which
//! differs from the reference quantizer used for weights: `id = 127 / amax` rather than
//! `1 / (amax / 127)`, and rounding half to even rather than away from zero. That adds the activation's
//! Q8 rounding error: per block at most `amax(x)/254` per element. Measured on Gaussian W and x
//! (tests/formats.rs `integer_dot_error_is_small_against_exact_activation`): the rms relative
//! error of y against the exact f32 activation stays below 1% (about 0.3% for Q4_0/Q8_0, 0.6%
//! for Q4_1, where Q8_1's f16 block sum `s` adds to it).

use crate::cpu::has_avx2;
use crate::format::{Format, QuantBlock};
use bytemuck::{Pod, Zeroable};
use half::f16;

pub const QK: usize = 32;

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_0 {
    pub d: f16,
    pub qs: [u8; QK / 2],
}

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_1 {
    pub d: f16,
    pub m: f16,
    pub qs: [u8; QK / 2],
}

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5_0 {
    pub d: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5_1 {
    pub d: f16,
    pub m: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; QK],
}

/// Q8_1: Q8_0 plus `s = d * sum(qs)`, the block sum the minimum-offset formats need.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_1 {
    pub d: f16,
    pub s: f16,
    pub qs: [i8; QK],
}

const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);

/// The value of largest magnitude (first one on ties), as ggml picks it.
fn signed_absmax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter()
        .fold((f32::MAX, -f32::MAX), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

fn inv(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// The 5th bits of a Q5 block: bit j of `qh` belongs to element j.
fn high_bit(qh: u32, j: usize) -> u8 {
    ((qh >> j) & 1) as u8
}

use crate::rows4::rows_via_kernel;

impl QuantBlock for BlockQ4_0 {
    const FORMAT: Format = Format::Q4_0;
    const ELEMS: usize = QK;
    type Dot = BlockQ8_0;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(QK).zip(dst) {
            let d = signed_absmax(x) / -8.0;
            let id = inv(d);
            b.d = f16::from_f32(d);
            for j in 0..QK / 2 {
                let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
                let q1 = ((x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
                b.qs[j] = q0 | (q1 << 4);
            }
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
            let d = b.d.to_f32();
            for j in 0..QK / 2 {
                y[j] = ((b.qs[j] & 0xf) as i32 - 8) as f32 * d;
                y[j + QK / 2] = ((b.qs[j] >> 4) as i32 - 8) as f32 * d;
            }
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: features checked at run time.
            return unsafe { avx2::q4_0(w, a) };
        }
        w.iter()
            .zip(a)
            .map(|(b, y)| {
                let mut s = 0i32;
                for j in 0..QK / 2 {
                    s += ((b.qs[j] & 0xf) as i32 - 8) * y.qs[j] as i32;
                    s += ((b.qs[j] >> 4) as i32 - 8) * y.qs[j + QK / 2] as i32;
                }
                s as f32 * b.d.to_f32() * y.d.to_f32()
            })
            .sum()
    }

    rows_via_kernel!(avx2::q4_0_rows4);
}

impl QuantBlock for BlockQ4_1 {
    const FORMAT: Format = Format::Q4_1;
    const ELEMS: usize = QK;
    type Dot = BlockQ8_1;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(QK).zip(dst) {
            let (min, max) = min_max(x);
            let d = (max - min) / 15.0;
            let id = inv(d);
            b.d = f16::from_f32(d);
            b.m = f16::from_f32(min);
            for j in 0..QK / 2 {
                let q0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
                let q1 = (((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
                b.qs[j] = q0 | (q1 << 4);
            }
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
            let (d, m) = (b.d.to_f32(), b.m.to_f32());
            for j in 0..QK / 2 {
                y[j] = (b.qs[j] & 0xf) as f32 * d + m;
                y[j + QK / 2] = (b.qs[j] >> 4) as f32 * d + m;
            }
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8_1]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: features checked at run time.
            return unsafe { avx2::q4_1(w, a) };
        }
        w.iter()
            .zip(a)
            .map(|(b, y)| {
                let mut s = 0i32;
                for j in 0..QK / 2 {
                    s += (b.qs[j] & 0xf) as i32 * y.qs[j] as i32;
                    s += (b.qs[j] >> 4) as i32 * y.qs[j + QK / 2] as i32;
                }
                s as f32 * b.d.to_f32() * y.d.to_f32() + b.m.to_f32() * y.s.to_f32()
            })
            .sum()
    }

    rows_via_kernel!(avx2::q4_1_rows4);
}

impl QuantBlock for BlockQ5_0 {
    const FORMAT: Format = Format::Q5_0;
    const ELEMS: usize = QK;
    type Dot = BlockQ8_0;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(QK).zip(dst) {
            let d = signed_absmax(x) / -16.0;
            let id = inv(d);
            b.d = f16::from_f32(d);
            let mut qh = 0u32;
            for j in 0..QK / 2 {
                let q0 = ((x[j] * id + 16.5) as i8).min(31) as u8;
                let q1 = ((x[j + QK / 2] * id + 16.5) as i8).min(31) as u8;
                b.qs[j] = (q0 & 0xf) | ((q1 & 0xf) << 4);
                qh |= ((q0 as u32 >> 4) & 1) << j;
                qh |= ((q1 as u32 >> 4) & 1) << (j + QK / 2);
            }
            b.qh = qh.to_le_bytes();
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
            let d = b.d.to_f32();
            let qh = u32::from_le_bytes(b.qh);
            for j in 0..QK / 2 {
                let q0 = (b.qs[j] & 0xf) | (high_bit(qh, j) << 4);
                let q1 = (b.qs[j] >> 4) | (high_bit(qh, j + QK / 2) << 4);
                y[j] = (q0 as i32 - 16) as f32 * d;
                y[j + QK / 2] = (q1 as i32 - 16) as f32 * d;
            }
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: features checked at run time.
            return unsafe { avx2::q5_0(w, a) };
        }
        w.iter()
            .zip(a)
            .map(|(b, y)| {
                let qh = u32::from_le_bytes(b.qh);
                let mut s = 0i32;
                for j in 0..QK / 2 {
                    let q0 = (b.qs[j] & 0xf) | (high_bit(qh, j) << 4);
                    let q1 = (b.qs[j] >> 4) | (high_bit(qh, j + QK / 2) << 4);
                    s += (q0 as i32 - 16) * y.qs[j] as i32
                        + (q1 as i32 - 16) * y.qs[j + QK / 2] as i32;
                }
                s as f32 * b.d.to_f32() * y.d.to_f32()
            })
            .sum()
    }

    rows_via_kernel!(avx2::q5_0_rows4);
}

impl QuantBlock for BlockQ5_1 {
    const FORMAT: Format = Format::Q5_1;
    const ELEMS: usize = QK;
    type Dot = BlockQ8_1;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(QK).zip(dst) {
            let (min, max) = min_max(x);
            let d = (max - min) / 31.0;
            let id = inv(d);
            b.d = f16::from_f32(d);
            b.m = f16::from_f32(min);
            let mut qh = 0u32;
            for j in 0..QK / 2 {
                let q0 = (((x[j] - min) * id + 0.5) as u8).min(31);
                let q1 = (((x[j + QK / 2] - min) * id + 0.5) as u8).min(31);
                b.qs[j] = (q0 & 0xf) | ((q1 & 0xf) << 4);
                qh |= ((q0 as u32 >> 4) & 1) << j;
                qh |= ((q1 as u32 >> 4) & 1) << (j + QK / 2);
            }
            b.qh = qh.to_le_bytes();
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
            let (d, m) = (b.d.to_f32(), b.m.to_f32());
            let qh = u32::from_le_bytes(b.qh);
            for j in 0..QK / 2 {
                let q0 = (b.qs[j] & 0xf) | (high_bit(qh, j) << 4);
                let q1 = (b.qs[j] >> 4) | (high_bit(qh, j + QK / 2) << 4);
                y[j] = q0 as f32 * d + m;
                y[j + QK / 2] = q1 as f32 * d + m;
            }
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8_1]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: features checked at run time.
            return unsafe { avx2::q5_1(w, a) };
        }
        w.iter()
            .zip(a)
            .map(|(b, y)| {
                let qh = u32::from_le_bytes(b.qh);
                let mut s = 0i32;
                for j in 0..QK / 2 {
                    let q0 = (b.qs[j] & 0xf) | (high_bit(qh, j) << 4);
                    let q1 = (b.qs[j] >> 4) | (high_bit(qh, j + QK / 2) << 4);
                    s += q0 as i32 * y.qs[j] as i32 + q1 as i32 * y.qs[j + QK / 2] as i32;
                }
                s as f32 * b.d.to_f32() * y.d.to_f32() + b.m.to_f32() * y.s.to_f32()
            })
            .sum()
    }

    rows_via_kernel!(avx2::q5_1_rows4);
}

/// Shared by Q8_0 and Q8_1: `d = amax / 127`, `q = roundf(x / d)`; returns the sum of `q`.
fn quantize_q8(x: &[f32], qs: &mut [i8; QK]) -> (f32, i32) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = inv(d);
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = roundf_small(v * id) as i8;
        sum += *q as i32;
    }
    (d, sum)
}

/// ggml's x86 activation quantizer for one block: `d = amax / 127`, `q = round_half_even(x *
/// (127 / amax))`; returns `d` and the sum of `q`. The AVX2 and portable paths give identical
/// bytes.
fn quantize_q8_activation(x: &[f32], qs: &mut [i8; QK]) -> (f32, i32) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: features checked at run time; `x` holds QK elements.
        return unsafe { avx2::quantize_q8_activation(x, qs) };
    }
    quantize_q8_activation_scalar(x, qs)
}

fn quantize_q8_activation_scalar(x: &[f32], qs: &mut [i8; QK]) -> (f32, i32) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round_ties_even() as i8;
        sum += *q as i32;
    }
    (d, sum)
}

/// C's `roundf` (halves away from zero) for |x| < 2^31, without a libm call: the truncation and
/// the fraction `x - trunc(x)` are both exact in f32, so the result is bit-identical.
#[inline]
fn roundf_small(x: f32) -> f32 {
    let t = x as i32 as f32;
    let frac = x - t;
    if frac >= 0.5 {
        t + 1.0
    } else if frac <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

fn dot_i8(a: &[i8; QK], b: &[i8; QK]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}

impl QuantBlock for BlockQ8_0 {
    const FORMAT: Format = Format::Q8_0;
    const ELEMS: usize = QK;
    type Dot = BlockQ8_0;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(QK).zip(dst) {
            let (d, _) = quantize_q8(x, &mut b.qs);
            b.d = f16::from_f32(d);
        }
    }

    fn quantize_activation(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(QK).zip(dst) {
            let (d, _) = quantize_q8_activation(x, &mut b.qs);
            b.d = f16::from_f32(d);
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
            let d = b.d.to_f32();
            for (o, &q) in y.iter_mut().zip(&b.qs) {
                *o = q as f32 * d;
            }
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: features checked at run time.
            return unsafe { avx2::q8_0(w, a) };
        }
        w.iter()
            .zip(a)
            .map(|(b, y)| dot_i8(&b.qs, &y.qs) as f32 * b.d.to_f32() * y.d.to_f32())
            .sum()
    }

    rows_via_kernel!(avx2::q8_0_rows4);
}

impl QuantBlock for BlockQ8_1 {
    const FORMAT: Format = Format::Q8_1;
    const ELEMS: usize = QK;
    type Dot = BlockQ8_1;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(QK).zip(dst) {
            let (d, sum) = quantize_q8(x, &mut b.qs);
            b.d = f16::from_f32(d);
            b.s = f16::from_f32(sum as f32 * d);
        }
    }

    fn quantize_activation(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(QK).zip(dst) {
            let (d, sum) = quantize_q8_activation(x, &mut b.qs);
            b.d = f16::from_f32(d);
            b.s = f16::from_f32(sum as f32 * d);
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
            let d = b.d.to_f32();
            for (o, &q) in y.iter_mut().zip(&b.qs) {
                *o = q as f32 * d;
            }
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8_1]) -> f32 {
        w.iter()
            .zip(a)
            .map(|(b, y)| dot_i8(&b.qs, &y.qs) as f32 * b.d.to_f32() * y.d.to_f32())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundf_small_matches_round() {
        let mut v = vec![
            0.5f32,
            -0.5,
            1.5,
            -1.5,
            2.5,
            0.49999997,
            -0.49999997,
            126.5,
            -127.0,
            0.0,
            -0.0,
        ];
        v.extend((0..20000).map(|i| (i as f32 - 10000.0) * 0.01273));
        for x in v {
            assert_eq!(roundf_small(x), x.round(), "{x}");
        }
    }

    /// Extreme codes against extreme activations: the 4-row kernels keep partial sums in i16
    /// where the bounds allow, so the worst cases must come out exact (no wrap, no saturation).
    #[test]
    fn four_row_kernels_exact_at_extreme_codes() {
        fn check<B: QuantBlock>(w: &[B], a: &[B::Dot], exact: impl Fn(usize) -> f64) {
            let mut out = [f32::NAN; 5];
            B::vec_dot_rows(w, a, &mut out);
            for (r, &o) in out.iter().enumerate() {
                let e = exact(r);
                assert!(
                    (o as f64 - e).abs() <= 1e-6 * e.abs().max(1.0),
                    "row {r}: {o} vs {e}"
                );
            }
        }
        let one = f16::from_f32(1.0);
        let nb = 8;
        for yv in [127i8, -127] {
            let a0: Vec<BlockQ8_0> = (0..nb)
                .map(|_| BlockQ8_0 {
                    d: one,
                    qs: [yv; QK],
                })
                .collect();
            let a1: Vec<BlockQ8_1> = (0..nb)
                .map(|_| BlockQ8_1 {
                    d: one,
                    s: f16::from_f32(yv as f32 * 32.0),
                    qs: [yv; QK],
                })
                .collect();
            let y = yv as f64 * (QK * nb) as f64;
            for nib in [0u8, 15] {
                let qs = [nib | (nib << 4); QK / 2];
                let w: Vec<BlockQ4_0> = (0..5 * nb).map(|_| BlockQ4_0 { d: one, qs }).collect();
                check(&w, &a0, |_| (nib as f64 - 8.0) * y);
                let w: Vec<BlockQ4_1> = (0..5 * nb)
                    .map(|_| BlockQ4_1 { d: one, m: one, qs })
                    .collect();
                check(&w, &a1, |_| nib as f64 * y + y);
                for qh in [[0u8; 4], [0xff; 4]] {
                    let q = nib as f64 + if qh[0] != 0 { 16.0 } else { 0.0 };
                    let w: Vec<BlockQ5_0> =
                        (0..5 * nb).map(|_| BlockQ5_0 { d: one, qh, qs }).collect();
                    check(&w, &a0, |_| (q - 16.0) * y);
                    let w: Vec<BlockQ5_1> = (0..5 * nb)
                        .map(|_| BlockQ5_1 {
                            d: one,
                            m: one,
                            qh,
                            qs,
                        })
                        .collect();
                    check(&w, &a1, |_| q * y + y);
                }
            }
            for wv in [127i8, -127, -128] {
                let w: Vec<BlockQ8_0> = (0..5 * nb)
                    .map(|_| BlockQ8_0 {
                        d: one,
                        qs: [wv; QK],
                    })
                    .collect();
                check(&w, &a0, |_| wv as f64 * y);
            }
        }
    }

    /// The AVX2 activation quantizer and the portable one give the same bytes, ties included
    /// (values landing exactly on k + 0.5 round to even).
    #[test]
    fn activation_quantizer_paths_agree() {
        if !has_avx2() {
            eprintln!("SKIPPED: no AVX2 on this CPU");
            return;
        }
        let mut seed = 7u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0
        };
        let mut cases: Vec<[f32; QK]> = (0..2000).map(|_| std::array::from_fn(|_| rnd())).collect();
        // amax 127 makes id exactly 1: halves are exact ties.
        cases.push(std::array::from_fn(|i| {
            if i == 0 {
                127.0
            } else {
                i as f32 - 15.5
            }
        }));
        cases.push([0.0; QK]);
        let mut ties = 0;
        for x in &cases {
            let (mut a, mut b) = ([0i8; QK], [0i8; QK]);
            // SAFETY: AVX2 checked above.
            let ra = unsafe { avx2::quantize_q8_activation(x, &mut a) };
            let rb = quantize_q8_activation_scalar(x, &mut b);
            assert_eq!((ra, a), (rb, b), "{x:?}");
            ties += x.iter().filter(|v| v.fract().abs() == 0.5).count();
        }
        assert!(ties > 0);
        // Round half to even: 0.5 -> 0, 1.5 -> 2, -2.5 -> -2.
        let mut x = [0.0f32; QK];
        x[0] = 127.0;
        x[1] = 0.5;
        x[2] = 1.5;
        x[3] = -2.5;
        let mut q = [0i8; QK];
        quantize_q8_activation(&x, &mut q);
        assert_eq!(&q[..4], &[127, 0, 2, -2]);
    }

    #[test]
    fn block_sizes_match_format_table() {
        assert_eq!(size_of::<BlockQ4_0>(), Format::Q4_0.block_bytes());
        assert_eq!(size_of::<BlockQ8_1>(), Format::Q8_1.block_bytes());
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;
mod rows8;

pub use rows8::{BlockQ4_0x8, BlockQ4_1x8, BlockQ8_0x8};
