//! Element types: f32, f16, bf16 activations and the fp8 / int8 KV-cache encodings.

use half::{bf16, f16};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    /// OCP fp8 e4m3fn: 4 exponent bits, 3 mantissa bits, no infinities, max 448.
    Fp8E4M3,
    /// OCP fp8 e5m2: IEEE-like, max 57344.
    Fp8E5M2,
    /// Symmetric int8 with a separate scale.
    I8,
    /// Raw bytes.
    U8,
    /// Index arrays: page indices, page-table offsets, token ids, positions, KV slots.
    U32,
    /// 64-bit offsets.
    U64,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::U64 => 8,
            DType::F32 | DType::U32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Fp8E4M3 | DType::Fp8E5M2 | DType::I8 | DType::U8 => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::Fp8E4M3 => "fp8e4m3",
            DType::Fp8E5M2 => "fp8e5m2",
            DType::I8 => "int8",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }

    /// Floating-point types an activation or KV value can take (the rest are codes or indices).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    pub fn from_name(s: &str) -> Option<DType> {
        Some(match s {
            "f32" => DType::F32,
            "f16" => DType::F16,
            "bf16" => DType::BF16,
            "fp8e4m3" => DType::Fp8E4M3,
            "fp8e5m2" => DType::Fp8E5M2,
            "int8" | "i8" => DType::I8,
            "u8" => DType::U8,
            "u32" => DType::U32,
            "u64" => DType::U64,
            _ => return None,
        })
    }
}

/// A floating-point activation element that kernels widen to f32.
pub trait Element: Copy + Send + Sync + 'static {
    const DTYPE: DType;
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// fp8 e4m3fn to f32 (exact). 0x7f / 0xff are NaN.
pub fn fp8_e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xf) as i32;
    let m = (b & 0x7) as f32;
    if e == 0xf && (b & 0x7) == 0x7 {
        return f32::NAN;
    }
    if e == 0 {
        sign * m * (2.0f32).powi(-9) // subnormal: m/8 * 2^-6
    } else {
        sign * (1.0 + m / 8.0) * (2.0f32).powi(e - 7)
    }
}

/// fp8 e5m2 to f32 (exact): the top byte of an f16.
pub fn fp8_e5m2_to_f32(b: u8) -> f32 {
    f16::from_bits((b as u16) << 8).to_f32()
}

/// f32 to fp8 e4m3fn, round to nearest even, saturating to ±448 (NaN stays NaN).
pub fn f32_to_fp8_e4m3(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7f;
    }
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let a = x.abs().min(448.0);
    // Smallest normal is 2^-6; below it the step is 2^-9.
    let code = if a < (2.0f32).powi(-6) {
        round_half_even(a * 512.0) as u8 // in 0..=8; 8 is the first normal's code
    } else {
        let e = a.log2().floor() as i32;
        let e = e.clamp(-6, 8);
        let scale = (2.0f32).powi(e);
        let mut m = round_half_even((a / scale - 1.0) * 8.0) as i32;
        let mut e = e;
        if m == 8 {
            m = 0;
            e += 1;
        }
        (((e + 7) as u8) << 3) | m as u8
    };
    // 0x7f would be NaN: saturation keeps us at 0x7e (448).
    sign | code.min(0x7e)
}

/// f32 to fp8 e5m2, round to nearest even via f16, saturating to ±57344.
pub fn f32_to_fp8_e5m2(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7f;
    }
    let h = f16::from_f32(x.clamp(-57344.0, 57344.0)).to_bits();
    // Round the low 8 bits to nearest even.
    let low = h & 0xff;
    let mut hi = h >> 8;
    if low > 0x80 || (low == 0x80 && (hi & 1) == 1) {
        hi += 1;
    }
    // Rounding can carry into the infinity code; saturate to the max finite value.
    if hi & 0x7f == 0x7c {
        hi = (hi & 0x80) | 0x7b;
    }
    hi as u8
}

fn round_half_even(x: f32) -> f32 {
    x.round_ties_even()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_e4m3_round_trips_every_code() {
        for b in 0u8..=255 {
            let x = fp8_e4m3_to_f32(b);
            if x.is_nan() {
                continue;
            }
            let back = f32_to_fp8_e4m3(x);
            // +0 and -0 are distinct codes; both decode to zero.
            assert_eq!(fp8_e4m3_to_f32(back), x, "code {b:#x}");
        }
        assert_eq!(fp8_e4m3_to_f32(0x7e), 448.0);
        assert_eq!(f32_to_fp8_e4m3(1e9), 0x7e);
        assert_eq!(fp8_e4m3_to_f32(0x01), 2f32.powi(-9));
    }

    #[test]
    fn fp8_e5m2_round_trips_every_finite_code() {
        for b in 0u8..=255 {
            let x = fp8_e5m2_to_f32(b);
            if !x.is_finite() {
                continue;
            }
            assert_eq!(fp8_e5m2_to_f32(f32_to_fp8_e5m2(x)), x, "code {b:#x}");
        }
        assert_eq!(fp8_e5m2_to_f32(f32_to_fp8_e5m2(1e9)), 57344.0);
    }

    #[test]
    fn fp8_rounds_to_nearest() {
        for i in 0..2000 {
            let x = (i as f32 - 1000.0) * 0.37;
            let q = fp8_e4m3_to_f32(f32_to_fp8_e4m3(x));
            // Relative step of e4m3 is 2^-3: error at most half of it.
            assert!(
                (q - x).abs() <= x.abs() * 0.0625 + 2f32.powi(-10),
                "{x} -> {q}"
            );
        }
    }
}

/// An element type a backend buffer can hold, with its bytes (uploads and downloads move
/// `bytemuck` views of slices of these).
pub trait Scalar: bytemuck::Pod + Send + Sync + 'static {
    /// The dtype a buffer of these has (u8 buffers may also be tagged fp8).
    const DTYPE: DType;
}

macro_rules! scalar {
    ($($t:ty => $d:ident),*) => {$(impl Scalar for $t { const DTYPE: DType = DType::$d; })*};
}
scalar!(f32 => F32, f16 => F16, bf16 => BF16, i8 => I8, u8 => U8, u32 => U32, u64 => U64);
