//! Run-time format -> block type. Every generic entry point goes through `with_block!`, so a new
//! format is wired in one place.

/// `with_block!(format, |B| expr_using_B, mlx => expr)`: evaluates the first expression with the
/// type alias `B` bound to the format's block type, or the second for MLX affine.
macro_rules! with_block {
    ($fmt:expr, |$B:ident| $body:expr, mlx => $mlx:expr) => {{
        use $crate::format::Format as F;
        match $fmt {
            F::F32 => {
                type $B = f32;
                $body
            }
            F::F16 => {
                type $B = half::f16;
                $body
            }
            F::BF16 => {
                type $B = half::bf16;
                $body
            }
            F::Q4_0 => {
                type $B = $crate::legacy::BlockQ4_0;
                $body
            }
            F::Q4_1 => {
                type $B = $crate::legacy::BlockQ4_1;
                $body
            }
            F::Q5_0 => {
                type $B = $crate::legacy::BlockQ5_0;
                $body
            }
            F::Q5_1 => {
                type $B = $crate::legacy::BlockQ5_1;
                $body
            }
            F::Q8_0 => {
                type $B = $crate::legacy::BlockQ8_0;
                $body
            }
            F::Q8_1 => {
                type $B = $crate::legacy::BlockQ8_1;
                $body
            }
            F::Q2K => {
                type $B = $crate::k_quants::BlockQ2K;
                $body
            }
            F::Q3K => {
                type $B = $crate::k_quants::BlockQ3K;
                $body
            }
            F::Q4K => {
                type $B = $crate::k_quants::BlockQ4K;
                $body
            }
            F::Q5K => {
                type $B = $crate::k_quants::BlockQ5K;
                $body
            }
            F::Q6K => {
                type $B = $crate::k_quants::BlockQ6K;
                $body
            }
            F::Q8K => {
                type $B = $crate::k_quants::BlockQ8K;
                $body
            }
            F::IQ4NL => {
                type $B = $crate::lut4::BlockIQ4NL;
                $body
            }
            F::IQ4XS => {
                type $B = $crate::lut4::BlockIQ4XS;
                $body
            }
            F::MXFP4 => {
                type $B = $crate::lut4::BlockMXFP4;
                $body
            }
            F::MlxAffine { .. } => $mlx,
        }
    }};
}

pub(crate) use with_block;

/// `with_interleaved!(format, |B| expr, else => expr)`: the first expression with `B` bound to
/// the block type of a format that has an 8-row interleaved layout (`crate::interleave`), else
/// the second.
macro_rules! with_interleaved {
    ($fmt:expr, |$B:ident| $body:expr, else => $other:expr) => {{
        use $crate::format::Format as F;
        match $fmt {
            F::Q4_0 => {
                type $B = $crate::legacy::BlockQ4_0;
                $body
            }
            F::Q4_1 => {
                type $B = $crate::legacy::BlockQ4_1;
                $body
            }
            F::Q8_0 => {
                type $B = $crate::legacy::BlockQ8_0;
                $body
            }
            F::Q4K => {
                type $B = $crate::k_quants::BlockQ4K;
                $body
            }
            F::Q6K => {
                type $B = $crate::k_quants::BlockQ6K;
                $body
            }
            _ => $other,
        }
    }};
}

pub(crate) use with_interleaved;
