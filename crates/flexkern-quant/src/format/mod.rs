//! The format catalogue (names, sizes, parsing: `kind.rs` holds the plain enums so errors can
//! name a format) and the contract every block format implements (`block.rs`).
//!
//! A block format (ggml's "type traits") supplies block decode and block dot; the generic
//! GEMV driver (`crate::gemv`) supplies threading and tiling. Block structs are `#[repr(C)]`,
//! `Pod`, and byte-identical to ggml's, so a GGUF tensor is a `&[Block]` without conversion.

use crate::error::{invalid, QuantError, Result};

mod block;
pub(crate) mod kind;

pub use block::QuantBlock;
pub use kind::{Format, MlxScale};

/// MLX widths whose GEMV runs on an int8-quantized activation (the others: f32 only).
pub(crate) fn mlx_int8_bits(bits: u8) -> bool {
    matches!(bits, 4 | 8)
}

/// Names accepted by [`Format::from_name`] for the fixed formats, with the format.
const NAMED: [(&str, Format); 18] = [
    ("f32", Format::F32),
    ("f16", Format::F16),
    ("bf16", Format::BF16),
    ("q4_0", Format::Q4_0),
    ("q4_1", Format::Q4_1),
    ("q5_0", Format::Q5_0),
    ("q5_1", Format::Q5_1),
    ("q8_0", Format::Q8_0),
    ("q8_1", Format::Q8_1),
    ("q2_k", Format::Q2K),
    ("q3_k", Format::Q3K),
    ("q4_k", Format::Q4K),
    ("q5_k", Format::Q5K),
    ("q6_k", Format::Q6K),
    ("q8_k", Format::Q8K),
    ("iq4_nl", Format::IQ4NL),
    ("iq4_xs", Format::IQ4XS),
    ("mxfp4", Format::MXFP4),
];

/// MLX bit widths and group sizes flexkern supports.
pub const MLX_BITS: [u8; 6] = [2, 3, 4, 5, 6, 8];
pub const MLX_GROUPS: [u16; 3] = [32, 64, 128];

impl Format {
    /// The largest |w| `quantize` stores faithfully; `None`: any finite f32. Past it a format's
    /// scales (or mins, or its values for F16 / BF16) would round to ±Inf or its arithmetic
    /// overflow, writing inf, NaN or zero blocks, so `quantize` refuses it with
    /// `QuantError::OutOfRange`. Block formats hold f16 scales and mins: f16's 65504.
    pub fn max_abs_weight(&self) -> Option<f32> {
        match self {
            Format::F32 => None,
            Format::BF16 => Some(half::bf16::MAX.to_f32()),
            // (max - min) / bins must stay finite in f32.
            Format::MlxAffine {
                scales: MlxScale::BF16,
                ..
            } => Some(1e38),
            _ => Some(half::f16::MAX.to_f32()),
        }
    }

    /// Every fixed (non-MLX) format, for tests and benchmarks.
    pub fn all_fixed() -> impl Iterator<Item = Format> {
        NAMED.iter().map(|&(_, f)| f)
    }

    /// Parse `q4_0`, `Q4_K`, `bf16`, `mlx:BITS:GROUP` or `mlx:BITS:GROUP:bf16` (scales default f16).
    pub fn from_name(name: &str) -> Result<Format> {
        let lower = name.trim().to_ascii_lowercase();
        if let Some(&(_, f)) = NAMED.iter().find(|(n, _)| *n == lower) {
            return Ok(f);
        }
        let unknown = || QuantError::UnknownFormat(name.to_string());
        let rest = lower.strip_prefix("mlx:").ok_or_else(unknown)?;
        let parts: Vec<&str> = rest.split(':').collect();
        if parts.len() < 2 || parts.len() > 3 {
            return Err(unknown());
        }
        let bits: u8 = parts[0].parse().map_err(|_| unknown())?;
        let group_size: u16 = parts[1].parse().map_err(|_| unknown())?;
        let scales = match parts.get(2) {
            None | Some(&"f16") => MlxScale::F16,
            Some(&"bf16") => MlxScale::BF16,
            Some(_) => return Err(unknown()),
        };
        Format::mlx(bits, group_size, scales)
    }

    /// A validated MLX affine format.
    pub fn mlx(bits: u8, group_size: u16, scales: MlxScale) -> Result<Format> {
        if !MLX_BITS.contains(&bits) {
            return Err(invalid(
                "bits",
                format!("MLX bits must be one of {MLX_BITS:?}, got {bits}"),
            ));
        }
        if !MLX_GROUPS.contains(&group_size) {
            return Err(invalid(
                "group_size",
                format!("MLX group size must be one of {MLX_GROUPS:?}, got {group_size}"),
            ));
        }
        Ok(Format::MlxAffine {
            bits,
            group_size,
            scales,
        })
    }

    /// The canonical name; `from_name(f.name()) == f`.
    pub fn name(&self) -> String {
        match *self {
            Format::MlxAffine {
                bits,
                group_size,
                scales: MlxScale::F16,
            } => {
                format!("mlx:{bits}:{group_size}")
            }
            Format::MlxAffine {
                bits,
                group_size,
                scales: MlxScale::BF16,
            } => {
                format!("mlx:{bits}:{group_size}:bf16")
            }
            f => NAMED
                .iter()
                .find(|(_, g)| *g == f)
                .map(|(n, _)| n.to_string())
                .unwrap_or_default(),
        }
    }

    /// ggml's `ggml_type` id; `None` for MLX.
    pub fn ggml_type(&self) -> Option<u32> {
        Some(match self {
            Format::F32 => 0,
            Format::F16 => 1,
            Format::Q4_0 => 2,
            Format::Q4_1 => 3,
            Format::Q5_0 => 6,
            Format::Q5_1 => 7,
            Format::Q8_0 => 8,
            Format::Q8_1 => 9,
            Format::Q2K => 10,
            Format::Q3K => 11,
            Format::Q4K => 12,
            Format::Q5K => 13,
            Format::Q6K => 14,
            Format::Q8K => 15,
            Format::IQ4NL => 20,
            Format::IQ4XS => 23,
            Format::BF16 => 30,
            Format::MXFP4 => 39,
            Format::MlxAffine { .. } => return None,
        })
    }

    pub fn from_ggml_type(id: u32) -> Option<Format> {
        NAMED
            .iter()
            .map(|&(_, f)| f)
            .find(|f| f.ggml_type() == Some(id))
    }

    /// Elements per block: ggml's QK, 1 for plain floats, the group size for MLX.
    pub fn block_elems(&self) -> usize {
        match *self {
            Format::F32 | Format::F16 | Format::BF16 => 1,
            Format::Q4_0
            | Format::Q4_1
            | Format::Q5_0
            | Format::Q5_1
            | Format::Q8_0
            | Format::Q8_1
            | Format::IQ4NL
            | Format::MXFP4 => 32,
            Format::Q2K
            | Format::Q3K
            | Format::Q4K
            | Format::Q5K
            | Format::Q6K
            | Format::Q8K
            | Format::IQ4XS => 256,
            Format::MlxAffine { group_size, .. } => group_size as usize,
        }
    }

    /// Bytes per block (ggml's type size). For MLX: packed weights plus one scale and one bias.
    pub fn block_bytes(&self) -> usize {
        match *self {
            Format::F32 => 4,
            Format::F16 | Format::BF16 => 2,
            Format::Q4_0 => 18,
            Format::Q4_1 => 20,
            Format::Q5_0 => 22,
            Format::Q5_1 => 24,
            Format::Q8_0 => 34,
            Format::Q8_1 => 36,
            Format::Q2K => 84,
            Format::Q3K => 110,
            Format::Q4K => 144,
            Format::Q5K => 176,
            Format::Q6K => 210,
            Format::Q8K => 292,
            Format::IQ4NL => 18,
            Format::IQ4XS => 136,
            Format::MXFP4 => 17,
            Format::MlxAffine {
                bits, group_size, ..
            } => group_size as usize * bits as usize / 8 + 4,
        }
    }

    /// Checks that `k` is a positive multiple of the block size; returns the blocks per row.
    pub fn blocks_per_row(&self, k: usize) -> Result<usize> {
        let qk = self.block_elems();
        if k == 0 || !k.is_multiple_of(qk) {
            return Err(invalid(
                "k",
                format!(
                    "{} needs K to be a positive multiple of {qk}, got {k}",
                    self.name()
                ),
            ));
        }
        Ok(k / qk)
    }

    /// Bytes one row of `k` weights occupies (for MLX: weights + scales + biases of one row).
    pub fn row_bytes(&self, k: usize) -> Result<usize> {
        let nb = self.blocks_per_row(k)?;
        nb.checked_mul(self.block_bytes())
            .ok_or_else(|| invalid("k", format!("K={k} overflows")))
    }

    /// Bytes an `[n, k]` tensor occupies, with overflow checked.
    pub fn tensor_bytes(&self, n: usize, k: usize) -> Result<usize> {
        self.row_bytes(k)?
            .checked_mul(n)
            .ok_or_else(|| invalid("n", format!("[{n}, {k}] overflows usize")))
    }

    /// The activation block type's format that the integer dot product runs against, if any.
    pub fn dot_format(&self) -> Option<Format> {
        match self {
            Format::Q4_0 | Format::Q5_0 | Format::Q8_0 | Format::IQ4NL | Format::MXFP4 => {
                Some(Format::Q8_0)
            }
            Format::Q4_1 | Format::Q5_1 | Format::Q8_1 => Some(Format::Q8_1),
            Format::Q2K
            | Format::Q3K
            | Format::Q4K
            | Format::Q5K
            | Format::Q6K
            | Format::Q8K
            | Format::IQ4XS => Some(Format::Q8K),
            Format::MlxAffine { bits, .. } if mlx_int8_bits(*bits) => Some(Format::Q8_0),
            _ => None,
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = QuantError;
    fn from_str(s: &str) -> Result<Format> {
        Format::from_name(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::all_fixed() {
            assert_eq!(Format::from_name(&f.name()).unwrap(), f);
            assert_eq!(Format::from_ggml_type(f.ggml_type().unwrap()), Some(f));
        }
        for bits in MLX_BITS {
            for g in MLX_GROUPS {
                for s in [MlxScale::F16, MlxScale::BF16] {
                    let f = Format::mlx(bits, g, s).unwrap();
                    assert_eq!(Format::from_name(&f.name()).unwrap(), f);
                    assert_eq!(f.ggml_type(), None);
                }
            }
        }
        assert_eq!(Format::from_name("Q4_K").unwrap(), Format::Q4K);
        assert_eq!(Format::from_ggml_type(30), Some(Format::BF16));
        assert_eq!(Format::from_ggml_type(4), None);
        // gguf-py's GGMLQuantizationType ids.
        assert_eq!(Format::from_ggml_type(20), Some(Format::IQ4NL));
        assert_eq!(Format::from_ggml_type(23), Some(Format::IQ4XS));
        assert_eq!(Format::from_ggml_type(39), Some(Format::MXFP4));
        assert_eq!(Format::from_name("IQ4_XS").unwrap().block_bytes(), 136);
    }

    #[test]
    fn bad_names_are_typed_errors() {
        for bad in [
            "q4",
            "",
            "mlx",
            "mlx:7:64",
            "mlx:4:48",
            "mlx:4:64:f32",
            "mlx:x:64",
            "mlx:4:64:f16:1",
        ] {
            assert!(Format::from_name(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            Format::from_name("q9_9"),
            Err(QuantError::UnknownFormat(_))
        ));
    }

    #[test]
    fn sizes_and_checked_arithmetic() {
        assert_eq!(Format::Q4_0.row_bytes(4096).unwrap(), 128 * 18);
        assert_eq!(Format::Q4K.tensor_bytes(2, 512).unwrap(), 2 * 2 * 144);
        assert_eq!(Format::F16.row_bytes(7).unwrap(), 14);
        assert!(Format::Q4_0.row_bytes(33).is_err());
        assert!(Format::Q4_0.row_bytes(0).is_err());
        assert!(Format::F32.tensor_bytes(usize::MAX, 2).is_err());
        let m = Format::from_name("mlx:3:32").unwrap();
        assert_eq!(m.row_bytes(64).unwrap(), 2 * (12 + 4));
    }
}
