//! IQ4_NL: 32 weights, one f16 scale, 4-bit codes into `KVALUES_IQ4NL`.

use super::{dequantize_block, dot_block_scalar, pack_codes, search, KVALUES_IQ4NL as V};
use crate::cpu::has_avx2;
use crate::format::{Format, QuantBlock};
use crate::legacy::BlockQ8_0;
use bytemuck::{Pod, Zeroable};
use half::f16;

/// ggml's `block_iq4_nl`: `x[j] = d * V[code j]`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIQ4NL {
    pub d: f16,
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockIQ4NL>() == 18);

impl QuantBlock for BlockIQ4NL {
    const FORMAT: Format = Format::IQ4NL;
    const ELEMS: usize = 32;
    type Dot = BlockQ8_0;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        let mut l = [0u8; 32];
        for (x, b) in src.chunks_exact(32).zip(dst) {
            let d = search::quantize_nl(x, &mut l);
            b.d = f16::from_f32(d);
            pack_codes(&l, &mut b.qs);
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(32)) {
            dequantize_block(&V, &b.qs, b.d.to_f32(), y);
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8_0]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: features checked at run time.
            return unsafe { super::avx2::iq4_nl(w, a) };
        }
        w.iter()
            .zip(a)
            .map(|(b, y)| dot_block_scalar(&V, &b.qs, &y.qs) as f32 * (b.d.to_f32() * y.d.to_f32()))
            .sum()
    }

    crate::rows4::rows_via_kernel!(super::avx2::iq4_nl_rows4);
}
