//! Layouts, hand-built blocks, the error of the quantizers, and both dot paths against the f64
//! dot of the dequantized operands.

use super::*;
use crate::format::QuantBlock;
use crate::k_quants::BlockQ8K;
use crate::legacy::BlockQ8_0;
use bytemuck::Zeroable;
use half::f16;

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            let v = (s >> 16 & 0xffffff) as f32 / (1u64 << 24) as f32;
            (u - 0.5) * 3.0 + (v - 0.5)
        })
        .collect()
}

fn quantize<B: QuantBlock>(x: &[f32]) -> Vec<B> {
    let mut b = vec![B::zeroed(); x.len() / B::ELEMS];
    B::quantize_ref(x, &mut b);
    b
}

fn act<D: QuantBlock>(x: &[f32]) -> Vec<D> {
    let mut b = vec![D::zeroed(); x.len() / D::ELEMS];
    D::quantize_activation(x, &mut b);
    b
}

fn dequantize<B: QuantBlock>(b: &[B]) -> Vec<f32> {
    let mut y = vec![f32::NAN; b.len() * B::ELEMS];
    B::dequantize(b, &mut y);
    y
}

#[test]
fn hand_built_blocks_decode() {
    let mut qs = [0u8; 16];
    for j in 0..16 {
        qs[j] = j as u8 | ((15 - j as u8) << 4);
    }
    let nl = BlockIQ4NL {
        d: f16::from_f32(0.5),
        qs,
    };
    let y = dequantize(&[nl]);
    for j in 0..16 {
        assert_eq!(y[j], 0.5 * KVALUES_IQ4NL[j] as f32);
        assert_eq!(y[j + 16], 0.5 * KVALUES_IQ4NL[15 - j] as f32);
    }
    // e = 128: scale 2^0 for the doubled e2m1 values, i.e. e2m1 times 2^1.
    let mx = BlockMXFP4 { e: 128, qs };
    let y = dequantize(&[mx]);
    assert_eq!(&y[..8], &[0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]);
    assert_eq!(y[16], -12.0);
    // IQ4_XS: sub-block ib has ls = 32 + ib - 4 (so scales -4..3), super-scale 0.25.
    let mut xs = BlockIQ4XS::zeroed();
    xs.d = f16::from_f32(0.25);
    for ib in 0..8 {
        let ls = (28 + ib) as u8;
        xs.scales_l[ib / 2] |= (ls & 0xf) << (4 * (ib % 2));
        xs.scales_h |= ((ls >> 4) as u16) << (2 * ib);
        xs.qs[16 * ib..16 * ib + 16].copy_from_slice(&qs);
    }
    let y = dequantize(&[xs]);
    for ib in 0..8 {
        assert_eq!(xs.sub_scale(ib), ib as i32 - 4);
        let dl = 0.25 * (ib as f32 - 4.0);
        assert_eq!(y[32 * ib + 3], dl * KVALUES_IQ4NL[3] as f32);
        assert_eq!(y[32 * ib + 19], dl * KVALUES_IQ4NL[12] as f32);
    }
}

/// ggml test-quantize-fns' data and its bound on `sqrt(sum d^2) / n` (0.002 for 4-bit formats);
/// the IQ4 fits must also beat a plain absmax scale on random data.
#[test]
fn round_trip_error() {
    let n = 4096;
    let src: Vec<f32> = (0..n)
        .map(|i| 0.1 + 2.0 * ((i as f32) + 0.1).cos())
        .collect();
    fn err(a: &[f32], b: &[f32]) -> f64 {
        let s: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
        s.sqrt() / a.len() as f64
    }
    let e_nl = err(&src, &dequantize(&quantize::<BlockIQ4NL>(&src)));
    let e_xs = err(&src, &dequantize(&quantize::<BlockIQ4XS>(&src)));
    let e_mx = err(&src, &dequantize(&quantize::<BlockMXFP4>(&src)));
    assert!(
        e_nl < 0.002 && e_xs < 0.002 && e_mx < 0.004,
        "{e_nl} {e_xs} {e_mx}"
    );
    let x = data(8192, 3);
    let q4 = err(&x, &dequantize(&quantize::<crate::legacy::BlockQ4_0>(&x)));
    let nl = err(&x, &dequantize(&quantize::<BlockIQ4NL>(&x)));
    let xs = err(&x, &dequantize(&quantize::<BlockIQ4XS>(&x)));
    assert!(nl < q4 && xs < q4, "iq4_nl {nl} iq4_xs {xs} q4_0 {q4}");
}

#[test]
fn quantize_is_exact_on_representable_blocks() {
    // Values on the MXFP4 grid at scale 2^-3 (e = 125): quantize must give them back.
    let x: Vec<f32> = (0..64)
        .map(|j| KVALUES_MXFP4[(j * 7 + 3) % 16] as f32 * 0.125)
        .map(|v| if v == 0.0 { 1.5 } else { v })
        .collect();
    let b = quantize::<BlockMXFP4>(&x);
    assert_eq!(dequantize(&b), x);
    // IQ4_NL: the table itself times a power of two round-trips.
    let x: Vec<f32> = (0..32)
        .map(|j| KVALUES_IQ4NL[j % 16] as f32 / 64.0)
        .collect();
    assert_eq!(dequantize(&quantize::<BlockIQ4NL>(&x)), x);
}

/// Both paths against the f64 dot of the dequantized weights and activation: the integer sums
/// are exact, so what remains is f32 rounding of per-block products and the running sum.
#[test]
fn dots_match_f64_on_both_paths() {
    fn check<B: QuantBlock>(nb: usize, seed: u64) {
        let k = nb * B::ELEMS;
        let w = quantize::<B>(&data(5 * k, seed));
        let a = act::<B::Dot>(&data(k, seed + 1));
        let wd = dequantize(&w);
        let ad = dequantize(&a);
        let mut want = [0.0f64; 5];
        let mut tol = [0.0f64; 5];
        for r in 0..5 {
            for j in 0..k {
                let p = wd[r * k + j] as f64 * ad[j] as f64;
                want[r] += p;
                tol[r] += p.abs();
            }
            tol[r] = tol[r] * (nb as f64 + 8.0) * f32::EPSILON as f64 + 1e-30;
        }
        for force in [false, true] {
            crate::cpu::set_force_scalar(force);
            let mut out = [f32::NAN; 5];
            B::vec_dot_rows(&w, &a, &mut out);
            for r in 0..5 {
                let one = B::vec_dot(&w[r * nb..(r + 1) * nb], &a);
                for (what, v) in [("rows", out[r]), ("one", one)] {
                    assert!(
                        (v as f64 - want[r]).abs() <= tol[r],
                        "{:?} {what} scalar={force} row {r}: {v} vs {}",
                        B::FORMAT,
                        want[r]
                    );
                }
            }
        }
        crate::cpu::set_force_scalar(false);
    }
    for nb in [1, 2, 3, 8, 33] {
        check::<BlockIQ4NL>(nb, nb as u64);
        check::<BlockMXFP4>(nb, 100 + nb as u64);
        check::<BlockIQ4XS>(nb.div_ceil(4), 200 + nb as u64);
    }
}

/// Extreme codes against extreme activations (Q8 activations never hold -128): no overflow or
/// saturation in the integer sums.
#[test]
fn extreme_codes_are_exact() {
    let one = f16::from_f32(1.0);
    for (code, yv) in [(0u8, 127i8), (0, -127), (15, 127), (15, -127), (7, -127)] {
        let qs = [code | (code << 4); 16];
        let a: Vec<BlockQ8_0> = (0..4)
            .map(|_| BlockQ8_0 {
                d: one,
                qs: [yv; 32],
            })
            .collect();
        let w: Vec<BlockIQ4NL> = (0..16).map(|_| BlockIQ4NL { d: one, qs }).collect();
        let mut out = [0.0; 4];
        BlockIQ4NL::vec_dot_rows(&w, &a, &mut out);
        let want = KVALUES_IQ4NL[code as usize] as f32 * yv as f32 * 128.0;
        assert_eq!(out, [want; 4], "code {code} y {yv}");
        let mut xs = BlockIQ4XS::zeroed();
        xs.d = one;
        xs.qs = [code | (code << 4); 128];
        xs.scales_l = [0; 4]; // ls = 0: scale -32
        let a8 = BlockQ8K {
            d: 1.0,
            qs: [yv; 256],
            bsums: [yv as i16 * 16; 16],
        };
        let got = BlockIQ4XS::vec_dot(&[xs], &[a8]);
        assert_eq!(
            got,
            -32.0 * KVALUES_IQ4NL[code as usize] as f32 * yv as f32 * 256.0
        );
    }
}
