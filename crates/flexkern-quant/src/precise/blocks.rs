//! Which precise-mode dot each block format runs: its AVX2 register kernel where one exists
//! (`precise_dots!`), its own dot for the float formats (their activation is f32 already),
//! else the trait's stack-buffer default. The K-quants' kernels are in `k_quants.rs`.

use super::{precise_dots, PreciseDot};
use crate::format::QuantBlock;
use crate::k_quants::BlockQ8K;
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::lut4::{BlockIQ4NL, BlockIQ4XS, BlockMXFP4};
use half::{bf16, f16};

macro_rules! register_kernels {
    ($($B:ty => $kernel:ident),* $(,)?) => {
        $(impl PreciseDot for $B {
            precise_dots!(super::avx2::$kernel);
        })*
    };
}

register_kernels!(
    BlockQ4_0 => q4_0,
    BlockQ4_1 => q4_1,
    BlockQ5_0 => q5_0,
    BlockQ5_1 => q5_1,
    BlockQ8_0 => q8_0,
    BlockQ8_1 => q8_1,
    BlockIQ4NL => iq4_nl,
    BlockIQ4XS => iq4_xs,
    BlockMXFP4 => mxfp4,
);

/// The activation is f32 already: precise mode is the default mode's dot.
macro_rules! same_as_default {
    ($($B:ty),*) => {
        $(impl PreciseDot for $B {
            fn dot_f32(w: &[Self], x: &[f32]) -> f32 {
                <Self as QuantBlock>::vec_dot(w, x)
            }

            fn dot_f32_rows(w: &[Self], x: &[f32], out: &mut [f32]) {
                <Self as QuantBlock>::vec_dot_rows(w, x, out)
            }
        })*
    };
}

same_as_default!(f32, f16, bf16);

impl PreciseDot for BlockQ8K {}
