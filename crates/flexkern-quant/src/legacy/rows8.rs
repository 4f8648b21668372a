//! Q4_0, Q4_1 and Q8_0 in the 8-row interleaved layout (`crate::interleave`).
//!
//! Group layout: the eight f16 scales (and, for Q4_1, the eight f16 minimums), then the codes in
//! 32-byte chunks; chunk `j` holds bytes `4j .. 4j + 4` of each row in row order. For Q8_0 those
//! are elements `4j .. 4j + 4`; for the 4-bit formats the low nibbles are elements
//! `4j .. 4j + 4` and the high nibbles elements `16 + 4j .. 16 + 4j + 4`. So one broadcast
//! 32-bit word of the activation meets all eight rows in one `pmaddubsw`, and 16-bit lanes
//! `2r, 2r + 1` belong to row `r`.

use super::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};
use crate::interleave::{dot8_each, Dots, Interleave, ROWS};
use bytemuck::{Pod, Zeroable};
use half::f16;

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_0x8 {
    pub d: [f16; ROWS],
    pub qs: [u8; ROWS * QK / 2],
}

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_1x8 {
    pub d: [f16; ROWS],
    pub m: [f16; ROWS],
    pub qs: [u8; ROWS * QK / 2],
}

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_0x8 {
    pub d: [f16; ROWS],
    pub qs: [i8; ROWS * QK],
}

/// An activation block's scale as f32, and what the weights' offset or minimum multiplies:
/// `8 * sum(q)` for Q4_0 (codes are stored `+ 8`), Q8_1's `s` for Q4_1.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Prep {
    pub d: f32,
    pub off: i32,
    pub s: f32,
}

/// Interleaves the packed nibbles of eight rows' blocks (see the module docs).
fn pack_qs<T: Copy + Default, const L: usize, const G: usize>(rows: [&[T; L]; ROWS]) -> [T; G] {
    let mut qs = [T::default(); G];
    for (r, src) in rows.iter().enumerate() {
        for j in 0..L / 4 {
            qs[32 * j + 4 * r..][..4].copy_from_slice(&src[4 * j..4 * j + 4]);
        }
    }
    qs
}

fn unpack_qs<T: Copy + Default, const L: usize, const G: usize>(qs: &[T; G], r: usize) -> [T; L] {
    let mut out = [T::default(); L];
    for j in 0..L / 4 {
        out[4 * j..4 * j + 4].copy_from_slice(&qs[32 * j + 4 * r..][..4]);
    }
    out
}

/// `Interleave::dot8` through an AVX2 kernel taking `Runs`, else the portable path.
macro_rules! dot8_via {
    ($($kernel:tt)+) => {
        fn dot8<const S: usize, const R: usize>(
            w: [&[Self::Group]; S],
            next: [&[Self::Group]; S],
            a: [&[Self::Dot]; R],
            p: [&[Self::Prep]; R],
        ) -> Dots<S, R> {
            #[cfg(target_arch = "x86_64")]
            if crate::cpu::has_avx2() {
                // SAFETY: features checked at run time; `runs` checks the lengths.
                return unsafe { $($kernel)+(runs(w, next, a, p)) };
            }
            dot8_each::<Self, S, R>(w, a)
        }
    };
}

impl Interleave for BlockQ4_0 {
    type Group = BlockQ4_0x8;
    type Prep = Prep;

    fn pack(rows: &[Self; ROWS]) -> BlockQ4_0x8 {
        BlockQ4_0x8 {
            d: rows.map(|b| b.d),
            qs: pack_qs(std::array::from_fn(|r| &rows[r].qs)),
        }
    }

    fn unpack(g: &BlockQ4_0x8, r: usize) -> Self {
        BlockQ4_0 {
            d: g.d[r],
            qs: unpack_qs(&g.qs, r),
        }
    }

    fn prep(a: &BlockQ8_0) -> Prep {
        Prep {
            d: a.d.to_f32(),
            off: 8 * a.qs.iter().map(|&q| q as i32).sum::<i32>(),
            s: 0.0,
        }
    }

    dot8_via!(avx2::nibbles8::<_, _, S, R, false>);
}

impl Interleave for BlockQ4_1 {
    type Group = BlockQ4_1x8;
    type Prep = Prep;

    fn pack(rows: &[Self; ROWS]) -> BlockQ4_1x8 {
        BlockQ4_1x8 {
            d: rows.map(|b| b.d),
            m: rows.map(|b| b.m),
            qs: pack_qs(std::array::from_fn(|r| &rows[r].qs)),
        }
    }

    fn unpack(g: &BlockQ4_1x8, r: usize) -> Self {
        BlockQ4_1 {
            d: g.d[r],
            m: g.m[r],
            qs: unpack_qs(&g.qs, r),
        }
    }

    fn prep(a: &BlockQ8_1) -> Prep {
        Prep {
            d: a.d.to_f32(),
            off: 0,
            s: a.s.to_f32(),
        }
    }

    dot8_via!(avx2::nibbles8::<_, _, S, R, true>);
}

impl Interleave for BlockQ8_0 {
    type Group = BlockQ8_0x8;
    type Prep = Prep;
    // Twice the bytes per product of the 4-bit formats: a third run keeps DRAM busier.
    const STREAMS: usize = 3;

    fn pack(rows: &[Self; ROWS]) -> BlockQ8_0x8 {
        BlockQ8_0x8 {
            d: rows.map(|b| b.d),
            qs: pack_qs(std::array::from_fn(|r| &rows[r].qs)),
        }
    }

    fn unpack(g: &BlockQ8_0x8, r: usize) -> Self {
        BlockQ8_0 {
            d: g.d[r],
            qs: unpack_qs(&g.qs, r),
        }
    }

    fn prep(a: &BlockQ8_0) -> Prep {
        Prep {
            d: a.d.to_f32(),
            off: 0,
            s: 0.0,
        }
    }

    dot8_via!(avx2::bytes8::<_, _, S, R>);
}

/// The kernel's arguments, checked: every run, its successor, every activation row and its
/// preparation cover the same number of blocks.
pub(crate) struct Runs<'a, G, Y, const S: usize, const R: usize> {
    pub w: [&'a [G]; S],
    pub next: [&'a [G]; S],
    pub a: [&'a [Y]; R],
    pub p: [&'a [Prep]; R],
}

fn runs<'a, G, Y, const S: usize, const R: usize>(
    w: [&'a [G]; S],
    next: [&'a [G]; S],
    a: [&'a [Y]; R],
    p: [&'a [Prep]; R],
) -> Runs<'a, G, Y, S, R> {
    let nb = w[0].len();
    assert!(
        w.iter().chain(&next).all(|r| r.len() == nb)
            && a.iter().all(|a| a.len() == nb)
            && p.iter().all(|p| p.len() == nb)
    );
    Runs { w, next, a, p }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Dots, Runs, ROWS};
    use crate::simd::prefetch_span;
    use std::arch::x86_64::*;

    /// How far ahead of the group being read each stream prefetches.
    const AHEAD_BYTES: usize = 1024;

    /// Prefetches, for each stream, the block `ahead` groups past block `i`: later in its run,
    /// else early in the run read next.
    #[inline(always)]
    unsafe fn prefetch<const S: usize>(
        w: &[*const u8; S],
        next: &[*const u8; S],
        (i, nb, ahead, gb): (usize, usize, usize, usize),
    ) {
        for s in 0..S {
            let pf = if i + ahead < nb {
                w[s].add((i + ahead) * gb)
            } else {
                next[s].add((i + ahead - nb) * gb)
            };
            prefetch_span(pf as *const i8, gb);
        }
    }

    /// `acc + d * dy * isum` for the eight f16 row scales `d` at `g`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scaled(g: *const u8, dy: __m256, isum: __m256i, acc: __m256) -> __m256 {
        let d = _mm256_cvtph_ps(_mm_loadu_si128(g as *const __m128i));
        _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(isum), acc)
    }

    fn store<const S: usize, const R: usize>(acc: [[__m256; S]; R]) -> Dots<S, R> {
        acc.map(|acc| {
            acc.map(|a| {
                let mut o = [0.0f32; ROWS];
                // SAFETY: `o` holds 8 floats.
                unsafe { _mm256_storeu_ps(o.as_mut_ptr(), a) };
                o
            })
        })
    }

    /// Q4_0 (`MIN = false`) or Q4_1 (`MIN = true`) groups against Q8_0 / Q8_1 activation rows.
    /// Per activation block: each 32-byte chunk of codes split into nibbles once, then eight
    /// `pmaddubsw` per stream and activation row into one i16 vector (a lane sums 16 products
    /// of a 4-bit code and an int8 of magnitude <= 127: at most 30480, no overflow), one
    /// `pmaddwd` to the eight row sums, then the scales in f32.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn nibbles8<G, Y, const S: usize, const R: usize, const MIN: bool>(
        r: Runs<'_, G, Y, S, R>,
    ) -> Dots<S, R> {
        let nb = r.w[0].len();
        let gb = size_of::<G>();
        let (y_bytes, y_qs) = (size_of::<Y>(), if MIN { 4 } else { 2 });
        let qs_at = if MIN { 32 } else { 16 };
        let ahead = AHEAD_BYTES.div_ceil(gb).min(nb.saturating_sub(1));
        let m4 = _mm256_set1_epi8(0x0f);
        let ones = _mm256_set1_epi16(1);
        let y = r.a.map(|a| a.as_ptr() as *const u8);
        let w = r.w.map(|s| s.as_ptr() as *const u8);
        let next = r.next.map(|s| s.as_ptr() as *const u8);
        let mut acc = [[_mm256_setzero_ps(); S]; R];
        for i in 0..nb {
            prefetch(&w, &next, (i, nb, ahead, gb));
            let yq = y.map(|y| y.add(i * y_bytes + y_qs) as *const i32);
            let mut sum = [[_mm256_setzero_si256(); S]; R];
            for j in 0..4 {
                let lohi: [_; S] = std::array::from_fn(|s| {
                    let c = _mm256_loadu_si256(w[s].add(i * gb + qs_at + 32 * j) as *const __m256i);
                    let lo = _mm256_and_si256(c, m4);
                    (lo, _mm256_and_si256(_mm256_srli_epi16(c, 4), m4))
                });
                for (sum, yq) in sum.iter_mut().zip(&yq) {
                    let ylo = _mm256_set1_epi32(yq.add(j).read_unaligned());
                    let yhi = _mm256_set1_epi32(yq.add(4 + j).read_unaligned());
                    for (sum, &(lo, hi)) in sum.iter_mut().zip(&lohi) {
                        let p = _mm256_add_epi16(
                            _mm256_maddubs_epi16(lo, ylo),
                            _mm256_maddubs_epi16(hi, yhi),
                        );
                        *sum = _mm256_add_epi16(*sum, p);
                    }
                }
            }
            for ((acc, sum), p) in acc.iter_mut().zip(&sum).zip(&r.p) {
                let pr = p.get_unchecked(i);
                let dy = _mm256_set1_ps(pr.d);
                for s in 0..S {
                    let g = w[s].add(i * gb);
                    let mut isum = _mm256_madd_epi16(sum[s], ones);
                    if !MIN {
                        isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(pr.off));
                    }
                    acc[s] = scaled(g, dy, isum, acc[s]);
                    if MIN {
                        let m = _mm256_cvtph_ps(_mm_loadu_si128(g.add(16) as *const __m128i));
                        acc[s] = _mm256_fmadd_ps(m, _mm256_set1_ps(pr.s), acc[s]);
                    }
                }
            }
        }
        store(acc)
    }

    /// Q8_0 groups against Q8_0 activation rows: `pmaddubsw` on |w| (taken once per chunk) and
    /// y with w's sign, each widened at once (two signed products can fill an i16 lane).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn bytes8<G, Y, const S: usize, const R: usize>(
        r: Runs<'_, G, Y, S, R>,
    ) -> Dots<S, R> {
        let nb = r.w[0].len();
        let gb = size_of::<G>();
        let y_bytes = size_of::<Y>();
        let ahead = AHEAD_BYTES.div_ceil(gb).min(nb.saturating_sub(1));
        let ones = _mm256_set1_epi16(1);
        let y = r.a.map(|a| a.as_ptr() as *const u8);
        let w = r.w.map(|s| s.as_ptr() as *const u8);
        let next = r.next.map(|s| s.as_ptr() as *const u8);
        let mut acc = [[_mm256_setzero_ps(); S]; R];
        for i in 0..nb {
            prefetch(&w, &next, (i, nb, ahead, gb));
            let yq = y.map(|y| y.add(i * y_bytes + 2) as *const i32);
            let mut sum = [[_mm256_setzero_si256(); S]; R];
            for j in 0..8 {
                let c: [_; S] = std::array::from_fn(|s| {
                    _mm256_loadu_si256(w[s].add(i * gb + 16 + 32 * j) as *const __m256i)
                });
                let abs = c.map(|c| _mm256_sign_epi8(c, c));
                for (sum, yq) in sum.iter_mut().zip(&yq) {
                    let yb = _mm256_set1_epi32(yq.add(j).read_unaligned());
                    for s in 0..S {
                        let p = _mm256_maddubs_epi16(abs[s], _mm256_sign_epi8(yb, c[s]));
                        sum[s] = _mm256_add_epi32(sum[s], _mm256_madd_epi16(p, ones));
                    }
                }
            }
            for ((acc, sum), p) in acc.iter_mut().zip(&sum).zip(&r.p) {
                let dy = _mm256_set1_ps(p.get_unchecked(i).d);
                for s in 0..S {
                    acc[s] = scaled(w[s].add(i * gb), dy, sum[s], acc[s]);
                }
            }
        }
        store(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interleave::interleave;

    #[test]
    fn pack_then_unpack_is_the_identity() {
        let rows: [BlockQ4_1; ROWS] = std::array::from_fn(|r| BlockQ4_1 {
            d: f16::from_f32(r as f32),
            m: f16::from_f32(-(r as f32)),
            qs: std::array::from_fn(|i| (r * 16 + i) as u8),
        });
        let g = BlockQ4_1::pack(&rows);
        for (r, b) in rows.iter().enumerate() {
            assert_eq!(
                bytemuck::bytes_of(&BlockQ4_1::unpack(&g, r)),
                bytemuck::bytes_of(b)
            );
        }
        let w: Vec<BlockQ4_0> = (0..2 * ROWS + 1)
            .map(|i| BlockQ4_0 {
                d: f16::from_f32(i as f32),
                qs: [i as u8; 16],
            })
            .collect();
        let bytes = interleave(&w, 2 * ROWS + 1, 1);
        assert_eq!(bytes.len(), size_of_val(&w[..]));
    }
}
