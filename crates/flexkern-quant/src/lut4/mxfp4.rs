//! MXFP4 (OCP microscaling): 32 e2m1 weights sharing one e8m0 power-of-two scale.

use super::{dequantize_block, dot_block_scalar, e8m0_half, pack_codes, KVALUES_MXFP4 as V};
use crate::cpu::has_avx2;
use crate::format::{Format, QuantBlock};
use crate::legacy::BlockQ8_0;
use bytemuck::{Pod, Zeroable};

/// ggml's `block_mxfp4`: `x[j] = V[code j] * 2^(e - 128)` (`V` is e2m1 doubled).
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockMXFP4 {
    pub e: u8,
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockMXFP4>() == 17);

/// The shared exponent ggml and gguf-py pick: `floor(log2(amax)) - 2 + 127`, so the largest
/// magnitude lands in the top binade of e2m1 (4..6), 0 for an all-zero block. `log2f` is taken
/// as the correctly rounded f32 of the f64 logarithm (what glibc and numpy return), so a value
/// just below a power of two whose f32 log rounds up to the integer gets the upper exponent, as
/// in ggml. Blocks below 2^-125 clamp to the smallest scale instead of wrapping the u8.
fn shared_exponent(amax: f32) -> u8 {
    if amax <= 0.0 {
        return 0;
    }
    let l = ((amax as f64).log2() as f32).floor();
    (l - 2.0 + 127.0).clamp(0.0, 255.0) as u8
}

/// ggml's `best_index_mxfp4`: the first code with the smallest `|V[i] * d - x|`.
fn best_index(x: f32, d: f32) -> u8 {
    let mut best = 0u8;
    let mut best_err = (V[0] as f32 * d - x).abs();
    for i in 1..16u8 {
        let err = (V[i as usize] as f32 * d - x).abs();
        if err < best_err {
            best = i;
            best_err = err;
        }
    }
    best
}

impl QuantBlock for BlockMXFP4 {
    const FORMAT: Format = Format::MXFP4;
    const ELEMS: usize = 32;
    type Dot = BlockQ8_0;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        for (x, b) in src.chunks_exact(32).zip(dst) {
            let amax = x
                .iter()
                .fold(0.0f32, |m, v| if m < v.abs() { v.abs() } else { m });
            b.e = shared_exponent(amax);
            let d = e8m0_half(b.e);
            let l: [u8; 32] = std::array::from_fn(|j| best_index(x[j], d));
            pack_codes(&l, &mut b.qs);
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(32)) {
            dequantize_block(&V, &b.qs, e8m0_half(b.e), y);
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: features checked at run time.
            return unsafe { super::avx2::mxfp4(w, a) };
        }
        w.iter()
            .zip(a)
            .map(|(b, y)| {
                dot_block_scalar(&V, &b.qs, &y.qs) as f32 * (e8m0_half(b.e) * y.d.to_f32())
            })
            .sum()
    }

    crate::rows4::rows_via_kernel!(super::avx2::mxfp4_rows4);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_exponent_puts_amax_in_the_top_binade() {
        assert_eq!(shared_exponent(0.0), 0);
        assert_eq!(shared_exponent(1.0), 125);
        assert_eq!(shared_exponent(6.0), 127);
        assert_eq!(shared_exponent(3.99), 126);
        assert_eq!(shared_exponent(f32::from_bits(4.0f32.to_bits() - 1)), 126);
        // The f32 logarithm of 2^16 - 2^-8 rounds up to 16: gguf-py gets the upper exponent too.
        assert_eq!(
            shared_exponent(f32::from_bits(65536.0f32.to_bits() - 1)),
            141
        );
        assert_eq!(shared_exponent(1e-40), 0);
        assert_eq!(shared_exponent(f32::MAX), 253); // log2 rounds up to 128 in f32
    }

    #[test]
    fn e8m0_half_matches_powers_of_two() {
        for e in 0..=254u8 {
            assert_eq!(e8m0_half(e) as f64, 2f64.powi(e as i32 - 128), "e = {e}");
        }
    }
}
