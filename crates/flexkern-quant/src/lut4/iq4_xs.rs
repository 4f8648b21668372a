//! IQ4_XS: 256 weights in eight sub-blocks of 32, an f16 super-scale and a 6-bit scale per
//! sub-block, 4-bit codes into `KVALUES_IQ4NL` (4.25 bits per weight).

use super::{dequantize_block, pack_codes, search, KVALUES_IQ4NL as V};
use crate::format::{Format, QuantBlock};
use crate::k_quants::{BlockQ8K, QK_K};
use bytemuck::{Pod, Zeroable};
use half::f16;

/// ggml's `block_iq4_xs`: sub-block `ib` has scale `d * (ls - 32)` with the 6-bit `ls` split
/// into a low nibble (`scales_l`, two per byte) and 2 high bits (`scales_h`, two bits each);
/// its codes are `qs[16 ib .. 16 ib + 16]` (low nibbles: elements 0..16, high: 16..32).
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIQ4XS {
    pub d: f16,
    pub scales_h: u16,
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockIQ4XS>() == 136);

impl BlockIQ4XS {
    /// The 6-bit scale of sub-block `ib`, minus 32.
    #[inline]
    pub fn sub_scale(&self, ib: usize) -> i32 {
        let lo = (self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
        let hi = ((self.scales_h >> (2 * ib)) & 3) as u8;
        (lo | (hi << 4)) as i32 - 32
    }

    fn codes(&self, ib: usize) -> &[u8; 16] {
        self.qs[16 * ib..16 * ib + 16].try_into().unwrap()
    }

    fn dot_block_scalar(&self, y: &BlockQ8K) -> f32 {
        let mut isum = 0i32;
        for ib in 0..8 {
            let s = super::dot_block_scalar(&V, self.codes(ib), &y.qs[32 * ib..32 * ib + 32]);
            isum += self.sub_scale(ib) * s;
        }
        (self.d.to_f32() * y.d) * isum as f32
    }
}

impl QuantBlock for BlockIQ4XS {
    const FORMAT: Format = Format::IQ4XS;
    const ELEMS: usize = QK_K;
    type Dot = BlockQ8K;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        let (mut ls, mut l) = ([0u8; 8], [0u8; QK_K]);
        for (x, b) in src.chunks_exact(QK_K).zip(dst) {
            let d = search::quantize_xs(x, &mut ls, &mut l);
            b.d = f16::from_f32(d);
            b.scales_h = 0;
            b.scales_l = [0; 4];
            for ib in 0..8 {
                b.scales_l[ib / 2] |= (ls[ib] & 0xf) << (4 * (ib % 2));
                b.scales_h |= ((ls[ib] >> 4) as u16) << (2 * ib);
                let qs: &mut [u8; 16] = (&mut b.qs[16 * ib..16 * ib + 16]).try_into().unwrap();
                pack_codes(&l[32 * ib..32 * ib + 32], qs);
            }
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
            let d = b.d.to_f32();
            for (ib, yb) in y.chunks_exact_mut(32).enumerate() {
                dequantize_block(&V, b.codes(ib), d * b.sub_scale(ib) as f32, yb);
            }
        }
    }

    fn vec_dot(w: &[Self], a: &[BlockQ8K]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_avx2() {
            // SAFETY: features checked at run time.
            return unsafe { super::avx2::iq4_xs(w, a) };
        }
        w.iter().zip(a).map(|(b, y)| b.dot_block_scalar(y)).sum()
    }

    crate::rows4::rows_via_kernel!(super::avx2::iq4_xs_rows4);
}
