//! The block layouts the CUDA kernels read, generated from flexkern-quant's `#[repr(C)]` block
//! structs (sizes and field offsets), so they are written once: a change there changes the
//! header, and the `static_assert`s in it stop a kernel that no longer matches.
//!
//! Some formats lie planar in device memory (`planar`): their 18-, 34- and 210-byte blocks
//! leave the codes 2-byte aligned in the file, so a kernel needs eight 2-byte loads per block
//! where a planar copy needs one 16-byte load (ncu, H100: 116 instructions per Q4_0 block in
//! the streamed GEMV). Upload rearranges the bytes (`to_device`); the values, and so every
//! result, are the file's.

use flexkern_quant::k_quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use flexkern_quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0};
use flexkern_quant::lut4::{BlockIQ4NL, BlockIQ4XS, BlockMXFP4};
use flexkern_quant::Format;
use std::borrow::Cow;
use std::fmt::Write;
use std::mem::{offset_of, size_of};

/// (C name, format, size, [(field, offset)]).
type Entry = (&'static str, Format, usize, Vec<(&'static str, usize)>);

fn entries() -> Vec<Entry> {
    macro_rules! e {
        ($name:literal, $fmt:expr, $t:ty, [$($f:ident),*]) => {
            (
                $name,
                $fmt,
                size_of::<$t>(),
                vec![$((stringify!($f), offset_of!($t, $f))),*],
            )
        };
    }
    vec![
        e!("Q4_0", Format::Q4_0, BlockQ4_0, [d, qs]),
        e!("Q4_1", Format::Q4_1, BlockQ4_1, [d, m, qs]),
        e!("Q5_0", Format::Q5_0, BlockQ5_0, [d, qh, qs]),
        e!("Q5_1", Format::Q5_1, BlockQ5_1, [d, m, qh, qs]),
        e!("Q8_0", Format::Q8_0, BlockQ8_0, [d, qs]),
        e!("Q2_K", Format::Q2K, BlockQ2K, [scales, qs, d, dmin]),
        e!("Q3_K", Format::Q3K, BlockQ3K, [hmask, qs, scales, d]),
        e!("Q4_K", Format::Q4K, BlockQ4K, [d, dmin, scales, qs]),
        e!("Q5_K", Format::Q5K, BlockQ5K, [d, dmin, scales, qh, qs]),
        e!("Q6_K", Format::Q6K, BlockQ6K, [ql, qh, scales, d]),
        e!("IQ4_NL", Format::IQ4NL, BlockIQ4NL, [d, qs]),
        e!(
            "IQ4_XS",
            Format::IQ4XS,
            BlockIQ4XS,
            [d, scales_h, scales_l, qs]
        ),
        e!("MXFP4", Format::MXFP4, BlockMXFP4, [e, qs]),
    ]
}

/// A format the device keeps planar: each row's `bulk` fields of every block (the codes) laid
/// end to end, rows one after another, then every block's other bytes (`side`: its scale, in
/// field order) the same way after all rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planar {
    /// The bulk fields' offset and size in the file's block (consecutive fields).
    pub bulk_at: usize,
    pub bulk: usize,
    /// The block's other bytes.
    pub side: usize,
}

/// The formats kept planar and their first and last bulk field: those whose codes are not
/// 16-byte aligned in the file and whose GEMV is decode's hot path. Q6_K's bulk is its codes and
/// its 16 scale bytes (208 bytes, whole 16-byte words), leaving d alone in the side entry; its
/// codes are rearranged into units as well (`q6k_units`).
const PLANAR: [(Format, &str, &str); 3] = [
    (Format::Q4_0, "qs", "qs"),
    (Format::Q8_0, "qs", "qs"),
    (Format::Q6K, "ql", "scales"),
];

/// The planar split of `f`, if the device keeps it planar.
pub fn planar(f: Format) -> Option<Planar> {
    let (_, first, last) = PLANAR.iter().find(|(p, _, _)| *p == f)?;
    let (_, _, size, fields) = entries().into_iter().find(|e| e.1 == f)?;
    let at = |name: &str| fields.iter().find(|(n, _)| *n == name).map(|f| f.1);
    let (start, last_at) = (at(first)?, at(last)?);
    // The last field's end: the next field's offset, or the block's end.
    let end = fields
        .iter()
        .map(|&(_, o)| o)
        .filter(|&o| o > last_at)
        .min()
        .unwrap_or(size);
    Some(Planar {
        bulk_at: start,
        bulk: end - start,
        side: size - (end - start),
    })
}

/// Bytes per block the kernels step over in a row of `w`: the bulk of a planar format, an MLX
/// group's codes (its scale and bias lie apart), else the whole block.
pub fn device_block_bytes(f: Format) -> usize {
    if let Format::MlxAffine {
        bits, group_size, ..
    } = f
    {
        return group_size as usize * bits as usize / 8;
    }
    planar(f).map_or(f.block_bytes(), |p| p.bulk)
}

/// Where a `[n, k]` matrix's arrays lie in its device buffer (`FkMat`): rows of `row_bytes`
/// from the start; a planar format's side entries (one per block) or MLX's (scale, bias)
/// words (one per group), `groups` per row, at byte offset `s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub row_bytes: usize,
    pub s: usize,
    pub groups: usize,
}

/// The device geometry of a `[n, k]` matrix of `f` (`k` valid for `f`).
pub fn geometry(f: Format, n: usize, k: usize) -> Geometry {
    if let Format::MlxAffine {
        bits, group_size, ..
    } = f
    {
        let (wb, _) = flexkern_quant::mlx::array_bytes(bits, group_size as usize, n, k);
        return Geometry {
            row_bytes: k * bits as usize / 8,
            s: wb,
            groups: k / group_size as usize,
        };
    }
    let row_bytes = f.row_bytes(k).unwrap_or(0);
    match planar(f) {
        Some(p) => {
            let blocks = row_bytes / f.block_bytes();
            Geometry {
                row_bytes: blocks * p.bulk,
                s: n * blocks * p.bulk,
                groups: blocks,
            }
        }
        None => Geometry {
            row_bytes,
            s: 0,
            groups: 0,
        },
    }
}

/// The file's bytes of a matrix of `f` in the device layout: planar formats rearranged (bulk
/// fields first, then the side bytes), MLX's as `mlx_to_device` says, the rest as they are.
pub fn to_device(f: Format, bytes: &[u8]) -> Cow<'_, [u8]> {
    if let Format::MlxAffine {
        bits, group_size, ..
    } = f
    {
        return Cow::Owned(mlx_to_device(bits, group_size as usize, bytes));
    }
    let Some(p) = planar(f) else {
        return Cow::Borrowed(bytes);
    };
    let bb = f.block_bytes();
    let blocks = bytes.len() / bb;
    let mut out = vec![0u8; bytes.len()];
    let (bulk, side) = out.split_at_mut(blocks * p.bulk);
    for (i, blk) in bytes.chunks_exact(bb).enumerate() {
        let dst = &mut bulk[i * p.bulk..(i + 1) * p.bulk];
        dst.copy_from_slice(&blk[p.bulk_at..p.bulk_at + p.bulk]);
        if f == Format::Q6K {
            q6k_units(dst);
        }
        let s = &mut side[i * p.side..(i + 1) * p.side];
        s[..p.bulk_at].copy_from_slice(&blk[..p.bulk_at]);
        s[p.bulk_at..].copy_from_slice(&blk[p.bulk_at + p.bulk..]);
    }
    Cow::Owned(out)
}

/// Q6_K's codes (a block's 128 `ql` and 64 `qh` bytes at the start of `bulk`) rearranged into
/// eight units of 32 weights (`FkQ6KP` in quant_blocks.cuh), so that a unit's 24 bytes are two
/// aligned loads and its integer dot shifts no byte into place twice. In the file, weight
/// 32c + l of half h has its low four bits in `ql[64h + 32(c % 2) + l]` (the low nibble for
/// c < 2) and its high two at bit 2c of `qh[32h + l]`, so a unit read there loads 64 bytes.
/// Here unit u holds, for its weights j (0-31):
/// - the low four bits in byte 16u + j % 16, the low nibble for j < 16 and the high for the
///   rest (Q4_0's order);
/// - the high two bits in byte 128 + 8u + 4(j / 16) + j % 4, at bit 2((j % 16) / 4), so one
///   shift puts four weights' bits beside their low nibbles.
///
/// The 16 scale bytes after them stay where they are (unit u's two at 192 + 2u).
fn q6k_units(bulk: &mut [u8]) {
    let (ql, qh) = (&bulk[..128], &bulk[128..192]);
    let code = |e: usize| {
        let (h, c, l) = (e / 128, e % 128 / 32, e % 32);
        let lo = (ql[64 * h + 32 * (c % 2) + l] >> (4 * (c / 2))) & 15;
        let hi = (qh[32 * h + l] >> (2 * c)) & 3;
        (lo, hi)
    };
    let mut out = [0u8; 192];
    for u in 0..8 {
        for j in 0..32 {
            let (lo, hi) = code(32 * u + j);
            out[16 * u + j % 16] |= lo << (4 * (j / 16));
            out[128 + 8 * u + 4 * (j / 16) + j % 4] |= hi << (2 * (j % 16 / 4));
        }
    }
    bulk[..192].copy_from_slice(&out);
}

/// MLX's arrays (packed codes, then the groups' scales, then their biases) in the device layout
/// (`FkMlx` in quant_blocks.cuh): 4-bit units of 32 weights with weight j in the low nibble of
/// byte j and weight j + 16 in its high nibble (Q4_0's order: the integer dot needs no byte
/// permutes), other widths' codes as they are; then one 32-bit word per group, its scale's
/// 16 bits low and its bias's high (one load for both). The array sizes follow from the
/// length: every group takes `group * bits / 8` code bytes and 4 of scale and bias. A length
/// of partial groups (upload refuses it first) keeps its bytes.
fn mlx_to_device(bits: u8, group: usize, bytes: &[u8]) -> Vec<u8> {
    let per_group = group * bits as usize / 8;
    let groups = bytes.len() / (per_group + 4);
    let (codes, rest) = bytes.split_at(groups * per_group);
    if rest.len() != 4 * groups {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    if bits == 4 {
        for unit in codes.chunks_exact(16) {
            let nib = |j: usize| (unit[j / 2] >> (4 * (j % 2))) & 15;
            out.extend((0..16).map(|j| nib(j) | nib(j + 16) << 4));
        }
    } else {
        out.extend_from_slice(codes);
    }
    let (scales, biases) = rest.split_at(2 * groups);
    for (s, b) in scales.chunks_exact(2).zip(biases.chunks_exact(2)) {
        out.extend_from_slice(s);
        out.extend_from_slice(b);
    }
    out
}

/// `constexpr int FK_<FMT>_BYTES / _<FIELD>` for every block format, with size checks against
/// `Format::block_bytes` (the catalogue) in the generated text itself; for planar formats also
/// `FK_<FMT>P_BB` (bulk bytes per block), `_SB` (side bytes) and each field's offset in its
/// part: a bulk field's in the block's bulk, a side field's in the side entry.
pub fn header() -> String {
    let mut s = String::from("// Generated by flexkern-cuda quant/layout.rs from flexkern-quant's block structs.\n#pragma once\n");
    for (name, fmt, size, fields) in entries() {
        let _ = writeln!(s, "constexpr int FK_{name}_BYTES = {size};");
        let _ = writeln!(
            s,
            "static_assert(FK_{name}_BYTES == {}, \"{name}: block size differs from the format catalogue\");",
            fmt.block_bytes()
        );
        for (f, off) in &fields {
            let _ = writeln!(s, "constexpr int FK_{name}_{} = {off};", f.to_uppercase());
        }
        if let Some(p) = planar(fmt) {
            let _ = writeln!(
                s,
                "constexpr int FK_{name}P_BB = {};\nconstexpr int FK_{name}P_SB = {};",
                p.bulk, p.side
            );
            for (f, off) in &fields {
                let at = match *off {
                    o if o < p.bulk_at => o,
                    o if o < p.bulk_at + p.bulk => o - p.bulk_at,
                    o => o - p.bulk,
                };
                let _ = writeln!(s, "constexpr int FK_{name}P_{} = {at};", f.to_uppercase());
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_holds_every_block() {
        let h = super::header();
        assert!(h.contains("constexpr int FK_Q4_K_BYTES = 144;"));
        assert!(h.contains("constexpr int FK_Q4_K_QS = 16;"));
        assert!(h.contains("constexpr int FK_Q6_K_D = 208;"));
        assert!(h.contains("constexpr int FK_IQ4_XS_SCALES_L = 4;"));
        assert!(h.contains("constexpr int FK_MXFP4_BYTES = 17;"));
        assert!(h.contains("constexpr int FK_Q4_0P_BB = 16;"));
        assert!(h.contains("constexpr int FK_Q8_0P_BB = 32;"));
        assert!(h.contains("constexpr int FK_Q8_0P_SB = 2;"));
        assert!(h.contains("constexpr int FK_Q4_0P_D = 0;"));
        assert!(h.contains("constexpr int FK_Q4_0P_QS = 0;"));
        // Q6_K: codes and scales in the bulk, d alone in the side entry.
        for line in [
            "FK_Q6_KP_BB = 208;",
            "FK_Q6_KP_SB = 2;",
            "FK_Q6_KP_QH = 128;",
            "FK_Q6_KP_SCALES = 192;",
            "FK_Q6_KP_D = 0;",
        ] {
            assert!(h.contains(&format!("constexpr int {line}")), "{line}");
        }
    }

    #[test]
    fn planar_upload_moves_every_byte_once() {
        use flexkern_quant::Format;
        for (f, bulk_at) in [(Format::Q4_0, 2), (Format::Q8_0, 2), (Format::Q6K, 0)] {
            let p = super::planar(f).unwrap();
            assert_eq!((p.bulk_at, p.bulk + p.side), (bulk_at, f.block_bytes()));
            let (n, k) = (3, 3 * f.block_elems());
            let bytes: Vec<u8> = (0..f.tensor_bytes(n, k).unwrap())
                .map(|i| (i * 7 % 251) as u8)
                .collect();
            let dev = super::to_device(f, &bytes);
            let g = super::geometry(f, n, k);
            assert_eq!((g.row_bytes, g.groups), (3 * p.bulk, 3));
            assert_eq!(g.s, n * g.row_bytes);
            assert_eq!(dev.len(), bytes.len());
            let bb = f.block_bytes();
            for row in 0..n {
                for blk in 0..3 {
                    let file = &bytes[(row * 3 + blk) * bb..][..bb];
                    let codes = &dev[row * g.row_bytes + blk * p.bulk..][..p.bulk];
                    let side = &dev[g.s + (row * g.groups + blk) * p.side..][..p.side];
                    let end = p.bulk_at + p.bulk;
                    if f == Format::Q6K {
                        // The codes in units (checked weight by weight below), the scales kept.
                        assert_eq!(codes[192..], file[192..208], "{f} row {row} block {blk}");
                    } else {
                        assert_eq!(codes, &file[p.bulk_at..end], "{f} row {row} block {blk}");
                    }
                    assert_eq!(
                        side,
                        [&file[..p.bulk_at], &file[end..]].concat(),
                        "{f} row {row} block {blk}"
                    );
                }
            }
        }
        // A ragged length (upload refuses it first) rearranges the whole blocks, keeps the
        // length, and does not panic; so does a geometry for a k the format cannot hold.
        assert_eq!(super::to_device(Format::Q4_0, &[7u8; 27]).len(), 27);
        assert_eq!(super::geometry(Format::Q8_0, 2, 33).row_bytes, 0);
        // Q6_K (210-byte blocks, bulk at offset 0): one block and a ragged tail, and a k that
        // is not whole 256-blocks.
        let q6k = super::to_device(Format::Q6K, &[9u8; 210 + 100]);
        assert_eq!(q6k.len(), 310);
        assert_eq!(super::geometry(Format::Q6K, 2, 300).row_bytes, 0);
        let q4k = vec![5u8; flexkern_quant::Format::Q4K.tensor_bytes(1, 256).unwrap()];
        assert!(matches!(
            super::to_device(flexkern_quant::Format::Q4K, &q4k),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    /// Q6_K: every weight's six bits land where `FkQ6KP` reads them (`q6k_units`), against
    /// flexkern-quant's own dequantization of blocks with random codes and unit scales.
    #[test]
    fn q6k_upload_puts_every_weight_in_its_unit() {
        use flexkern_quant::Format;
        let f = Format::Q6K;
        let mut bytes: Vec<u8> = (0..2 * 210).map(|i| (i * 97 % 251) as u8).collect();
        for blk in bytes.chunks_exact_mut(210) {
            blk[192..208].fill(1); // every scale 1
            blk[208..210].copy_from_slice(&half::f16::ONE.to_bits().to_le_bytes());
        }
        let want = flexkern_quant::codec::dequantize(f, &bytes, 1, 512).unwrap();
        let dev = super::to_device(f, &bytes);
        for (e, &w) in want.iter().enumerate() {
            let (blk, u, j) = (e / 256, e % 256 / 32, e % 32);
            let b = &dev[208 * blk..][..208];
            let lo = (b[16 * u + j % 16] >> (4 * (j / 16))) & 15;
            let hi = (b[128 + 8 * u + 4 * (j / 16) + j % 4] >> (2 * (j % 16 / 4))) & 3;
            let q = (lo | hi << 4) as i32 - 32;
            assert_eq!(q as f32, w, "weight {e}");
        }
    }

    /// MLX: every weight's code lands where `FkMlx` reads it (4 bits in Q4_0's nibble order,
    /// other widths as packed), every group's scale and bias side by side after the codes.
    #[test]
    fn mlx_upload_moves_every_code_and_scale_once() {
        use flexkern_quant::{Format, MlxScale};
        for (bits, group) in [(4u8, 32u16), (4, 128), (8, 64), (3, 32), (6, 64)] {
            let f = Format::mlx(bits, group, MlxScale::BF16).unwrap();
            let (n, k) = (3, 4 * group as usize);
            let len = f.tensor_bytes(n, k).unwrap();
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let dev = super::to_device(f, &bytes);
            assert_eq!(dev.len(), len);
            let g = super::geometry(f, n, k);
            let (wb, sb) = flexkern_quant::mlx::array_bytes(bits, group as usize, n, k);
            assert_eq!((g.s, g.groups, wb + 2 * sb), (wb, k / group as usize, len));
            // Weight e of the file's bit stream and of the device's layout.
            let code = |b: &[u8], e: usize| {
                let bit = e * bits as usize;
                let two = b[bit / 8] as u32 | (*b.get(bit / 8 + 1).unwrap_or(&0) as u32) << 8;
                (two >> (bit % 8)) & ((1 << bits) - 1)
            };
            for e in 0..n * k {
                let want = code(&bytes, e);
                let got = if bits == 4 {
                    let (unit, j) = (e / 32, e % 32);
                    (dev[16 * unit + j % 16] >> (4 * (j / 16))) as u32 & 15
                } else {
                    code(&dev, e)
                };
                assert_eq!(got, want, "{f} weight {e}");
            }
            for i in 0..n * g.groups {
                let pair = &dev[g.s + 4 * i..][..4];
                assert_eq!(pair[..2], bytes[wb + 2 * i..][..2], "{f} scale {i}");
                assert_eq!(pair[2..], bytes[wb + sb + 2 * i..][..2], "{f} bias {i}");
            }
        }
        // A length of partial groups keeps its bytes (upload refuses it first).
        let f = Format::mlx(4, 64, MlxScale::F16).unwrap();
        assert_eq!(super::to_device(f, &[3u8; 37]).as_ref(), &[3u8; 37]);
    }
}
