//! Q4_K and Q6_K in the 8-row interleaved layout (`crate::interleave`).
//!
//! A group holds block `i` of eight rows in the bytes of eight blocks, re-encoded so one 32-byte
//! load holds four weights of each of the eight rows (bytes `4r .. 4r + 4` belong to row `r`), so
//! one broadcast 32-bit word of the activation meets all eight rows in one `pmaddubsw`. Unlike
//! the legacy groups, a row's four bytes mix two sub-blocks: bytes `4r, 4r + 1` hold two weights
//! of sub-block `2p`, bytes `4r + 2, 4r + 3` two weights of sub-block `2p + 1`. So 16-bit lane
//! `2r` of a product sums sub-block `2p` of row `r` and lane `2r + 1` sub-block `2p + 1`, and one
//! `pmaddwd` with the 16 scales `(sc[r][2p], sc[r][2p + 1])` (stored in that order, loaded with
//! one widening load) applies both sub-blocks' scales and leaves one i32 per row. The activation
//! words are gathered in the same order once per call (`PrepQ4K`, `Prep`).
//!
//! * `BlockQ4Kx8`: the eight `d`, the eight `dmin`, then 64 bytes `sm[16p + 2r + h]` = 6-bit
//!   scale of row `r` sub-block `2p + h` with the top 2 bits of its 6-bit min in bits 6..7, then
//!   32 bytes of the mins' low nibbles (`mlo[16q + 2r + h]`: low nibble for pair `2q`, high
//!   nibble for pair `2q + 1`), then the nibbles: pair `p` (sub-blocks `2p`, `2p + 1`, elements
//!   `64p .. 64p + 64`) takes 256 bytes, eight loads `t`; in load `t` row `r` byte `k` holds, in
//!   its low nibble, element `4t + k % 2` of sub-block `2p + k / 2` and, in its high nibble,
//!   element `4t + 2 + k % 2`.
//! * `BlockQ6Kx8`: the eight `d`, then 128 i8 scales `sc[16p + 2r + h]` (row `r`, sub-block of
//!   16 `2p + h`), then the unsigned 6-bit codes (q + 32): pair `p` (elements `32p .. 32p + 32`)
//!   takes 192 bytes, eight code vectors `t` in which row `r` byte `k` is element `2t + k % 2`
//!   of sub-block `2p + k / 2`. Code vectors `4u .. 4u + 3` are stored as three 32-byte vectors
//!   `V0, V1, V2` (low 6 bits), and vector `4u + 3` is spread over their top 2 bits (bits 0..1 in
//!   `V0`, 2..3 in `V1`, 4..5 in `V2`).

use super::{unpack_scale_min_k4, BlockQ4K, BlockQ6K, BlockQ8K, QK_K};
use crate::interleave::{dot8_each, Dots, Interleave, ROWS};
use bytemuck::{Pod, Zeroable};
use half::f16;

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4Kx8 {
    pub d: [f16; ROWS],
    pub dmin: [f16; ROWS],
    pub sm: [u8; 64],
    pub mlo: [u8; 32],
    pub qs: [u8; ROWS * QK_K / 2],
}

#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ6Kx8 {
    pub d: [f16; ROWS],
    pub sc: [i8; 128],
    /// `q[2p + u]`: vectors `V0, V1, V2` of code vectors `4u .. 4u + 4` of pair `p`.
    pub q: [[u8; 96]; 16],
}

const _: () = assert!(size_of::<BlockQ4Kx8>() == ROWS * size_of::<BlockQ4K>());
const _: () = assert!(size_of::<BlockQ6Kx8>() == ROWS * size_of::<BlockQ6K>());

/// One activation block as the Q6_K kernel reads it: its 256 int8 values as 64 words in the
/// order the kernel broadcasts them, the sums of its 16-element sub-blocks (which the codes'
/// offset of 32 meets) and its scale.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Prep {
    pub w: [i32; 64],
    /// Pairs of i16 sums (low half: sub-block `2p`, high half: `2p + 1`).
    pub s: [i32; 8],
    pub d: f32,
}

/// One activation block as the Q4_K kernel reads it: as `Prep`, but each word already broadcast
/// to 32 bytes, so `pmaddubsw` reads it as a memory operand (a `vpbroadcastd` per word is two
/// micro-ops on Zen 1; this measured about 5% faster, for 2.3 KB per activation block), and
/// `s[p]` pairs the sums of 32-element sub-blocks `2p`, `2p + 1` (which the mins meet). The
/// batched kernel (several activation rows) reads the same words unbroadcast (`c`): four rows'
/// broadcast words would overflow L1 and the kernel would wait on L2.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
pub struct PrepQ4K {
    pub w: [[i32; 8]; 64],
    pub c: [i32; 64],
    pub s: [i32; 8],
    pub d: f32,
}

fn word(a: &BlockQ8K, e: [usize; 4]) -> i32 {
    i32::from_le_bytes(e.map(|i| a.qs[i] as u8))
}

fn pair(lo: i32, hi: i32) -> i32 {
    (lo as i16 as u16 as u32 | (hi as i16 as u16 as u32) << 16) as i32
}

// ---- Q4_K ----

/// The 4-bit code of element `e` of a Q4_K block.
fn q4k_code(b: &BlockQ4K, e: usize) -> u8 {
    let byte = b.qs[32 * (e / 64) + e % 32];
    if e % 64 < 32 {
        byte & 0xF
    } else {
        byte >> 4
    }
}

/// Byte `k` of row `r` in load `t` of pair `p`: (low nibble element, high nibble element).
fn q4k_elems(p: usize, t: usize, k: usize) -> (usize, usize) {
    let base = 32 * (2 * p + k / 2) + 4 * t + k % 2;
    (base, base + 2)
}

impl Interleave for BlockQ4K {
    type Group = BlockQ4Kx8;
    type Prep = PrepQ4K;

    fn pack(rows: &[Self; ROWS]) -> BlockQ4Kx8 {
        let mut g = BlockQ4Kx8::zeroed();
        for (r, b) in rows.iter().enumerate() {
            g.d[r] = b.d;
            g.dmin[r] = b.dmin;
            let (sc, m) = unpack_scale_min_k4(&b.scales);
            for j in 0..8 {
                let (p, h) = (j / 2, j % 2);
                g.sm[16 * p + 2 * r + h] = sc[j] | (m[j] >> 4) << 6;
                g.mlo[16 * (p / 2) + 2 * r + h] |= (m[j] & 0xF) << (4 * (p % 2));
            }
            for p in 0..4 {
                for t in 0..8 {
                    for k in 0..4 {
                        let (lo, hi) = q4k_elems(p, t, k);
                        g.qs[256 * p + 32 * t + 4 * r + k] = q4k_code(b, lo) | q4k_code(b, hi) << 4;
                    }
                }
            }
        }
        g
    }

    fn unpack(g: &BlockQ4Kx8, r: usize) -> Self {
        let mut sc = [0u8; 8];
        let mut m = [0u8; 8];
        for j in 0..8 {
            let (p, h) = (j / 2, j % 2);
            let s = g.sm[16 * p + 2 * r + h];
            sc[j] = s & 0x3F;
            m[j] = (s >> 6) << 4 | (g.mlo[16 * (p / 2) + 2 * r + h] >> (4 * (p % 2))) & 0xF;
        }
        let mut codes = [0u8; QK_K];
        for p in 0..4 {
            for t in 0..8 {
                for k in 0..4 {
                    let (lo, hi) = q4k_elems(p, t, k);
                    let byte = g.qs[256 * p + 32 * t + 4 * r + k];
                    codes[lo] = byte & 0xF;
                    codes[hi] = byte >> 4;
                }
            }
        }
        let mut qs = [0u8; QK_K / 2];
        for (i, q) in qs.iter_mut().enumerate() {
            let base = 64 * (i / 32) + i % 32;
            *q = codes[base] | codes[base + 32] << 4;
        }
        BlockQ4K {
            d: g.d[r],
            dmin: g.dmin[r],
            scales: super::pack_scale_min_k4(&sc, &m),
            qs,
        }
    }

    fn prep(a: &BlockQ8K) -> PrepQ4K {
        let mut w = [[0i32; 8]; 64];
        for p in 0..4 {
            for t in 0..8 {
                for hi in 0..2 {
                    let e = std::array::from_fn(|k| q4k_elems(p, t, k).0 + 2 * hi);
                    w[16 * p + 2 * t + hi] = [word(a, e); 8];
                }
            }
        }
        let sub = |j: usize| a.bsums[2 * j] as i32 + a.bsums[2 * j + 1] as i32;
        let mut s = [0i32; 8];
        for p in 0..4 {
            s[p] = pair(sub(2 * p), sub(2 * p + 1));
        }
        PrepQ4K {
            c: w.map(|v| v[0]),
            w,
            s,
            d: a.d,
        }
    }

    fn dot8<const S: usize, const R: usize>(
        w: [&[BlockQ4Kx8]; S],
        next: [&[BlockQ4Kx8]; S],
        a: [&[BlockQ8K]; R],
        p: [&[PrepQ4K]; R],
    ) -> Dots<S, R> {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_avx2() {
            check(&w, &next, &a, &p);
            // SAFETY: features checked at run time, lengths just above.
            return unsafe { avx2::q4k8::<S, R>(w, next, p) };
        }
        let _ = (next, p);
        dot8_each::<Self, S, R>(w, a)
    }
}

// ---- Q6_K ----

/// Row `r`'s byte `k` of code vector `t` of pair `p`: this element of the block.
fn q6k_elem(p: usize, t: usize, k: usize) -> usize {
    16 * (2 * p + k / 2) + 2 * t + k % 2
}

/// The unsigned 6-bit codes (q + 32) of a Q6_K block, in element order.
fn q6k_codes(b: &BlockQ6K) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for h in 0..2 {
        let (ql, qh) = (&b.ql[64 * h..], &b.qh[32 * h..]);
        let out = &mut q[128 * h..];
        for i in 0..32 {
            out[i] = (ql[i] & 0xF) | (qh[i] & 3) << 4;
            out[i + 32] = (ql[i + 32] & 0xF) | ((qh[i] >> 2) & 3) << 4;
            out[i + 64] = (ql[i] >> 4) | ((qh[i] >> 4) & 3) << 4;
            out[i + 96] = (ql[i + 32] >> 4) | ((qh[i] >> 6) & 3) << 4;
        }
    }
    q
}

impl Interleave for BlockQ6K {
    type Group = BlockQ6Kx8;
    type Prep = Prep;

    fn pack(rows: &[Self; ROWS]) -> BlockQ6Kx8 {
        let mut g = BlockQ6Kx8::zeroed();
        for (r, b) in rows.iter().enumerate() {
            g.d[r] = b.d;
            for j in 0..16 {
                g.sc[16 * (j / 2) + 2 * r + j % 2] = b.scales[j];
            }
            let codes = q6k_codes(b);
            let gq: &mut [u8] = bytemuck::cast_slice_mut(&mut g.q);
            for p in 0..8 {
                for t in 0..8 {
                    let (u, c) = (t / 4, t % 4);
                    for k in 0..4 {
                        let x = codes[q6k_elem(p, t, k)];
                        let at = 192 * p + 96 * u + 4 * r + k;
                        if c < 3 {
                            gq[at + 32 * c] |= x;
                        } else {
                            for v in 0..3 {
                                gq[at + 32 * v] |= ((x >> (2 * v)) & 3) << 6;
                            }
                        }
                    }
                }
            }
        }
        g
    }

    fn unpack(g: &BlockQ6Kx8, r: usize) -> Self {
        let mut codes = [0u8; QK_K];
        let gq: &[u8] = bytemuck::cast_slice(&g.q);
        for p in 0..8 {
            for t in 0..8 {
                let (u, c) = (t / 4, t % 4);
                for k in 0..4 {
                    let at = 192 * p + 96 * u + 4 * r + k;
                    codes[q6k_elem(p, t, k)] = if c < 3 {
                        gq[at + 32 * c] & 0x3F
                    } else {
                        (0..3).map(|v| (gq[at + 32 * v] >> 6) << (2 * v)).sum()
                    };
                }
            }
        }
        let mut b = BlockQ6K::zeroed();
        b.d = g.d[r];
        for j in 0..16 {
            b.scales[j] = g.sc[16 * (j / 2) + 2 * r + j % 2];
        }
        for h in 0..2 {
            let q = &codes[128 * h..];
            for i in 0..32 {
                b.ql[64 * h + i] = (q[i] & 0xF) | (q[i + 64] & 0xF) << 4;
                b.ql[64 * h + i + 32] = (q[i + 32] & 0xF) | (q[i + 96] & 0xF) << 4;
                b.qh[32 * h + i] = q[i] >> 4
                    | (q[i + 32] >> 4) << 2
                    | (q[i + 64] >> 4) << 4
                    | (q[i + 96] >> 4) << 6;
            }
        }
        b
    }

    fn prep(a: &BlockQ8K) -> Prep {
        let mut w = [0i32; 64];
        for p in 0..8 {
            for t in 0..8 {
                w[8 * p + t] = word(a, std::array::from_fn(|k| q6k_elem(p, t, k)));
            }
        }
        let s = std::array::from_fn(|p| pair(a.bsums[2 * p] as i32, a.bsums[2 * p + 1] as i32));
        Prep { w, s, d: a.d }
    }

    fn dot8<const S: usize, const R: usize>(
        w: [&[BlockQ6Kx8]; S],
        next: [&[BlockQ6Kx8]; S],
        a: [&[BlockQ8K]; R],
        p: [&[Prep]; R],
    ) -> Dots<S, R> {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_avx2() {
            check(&w, &next, &a, &p);
            // SAFETY: features checked at run time, lengths just above.
            return unsafe { avx2::q6k8::<S, R>(w, next, p) };
        }
        let _ = (next, p);
        dot8_each::<Self, S, R>(w, a)
    }
}

/// Every run, its successor, every activation row and its preparation cover the same blocks.
#[cfg(target_arch = "x86_64")]
fn check<G, P, const S: usize, const R: usize>(
    w: &[&[G]; S],
    next: &[&[G]; S],
    a: &[&[BlockQ8K]; R],
    p: &[&[P]; R],
) {
    let nb = w[0].len();
    assert!(
        w.iter().chain(next).all(|r| r.len() == nb)
            && a.iter().all(|a| a.len() == nb)
            && p.iter().all(|p| p.len() == nb)
    );
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BlockQ4Kx8, BlockQ6Kx8, Dots, Prep, PrepQ4K, ROWS};
    use crate::simd::prefetch_span;
    use std::arch::x86_64::*;

    /// How many groups ahead of the one being read each stream prefetches: one group (1.1 KiB
    /// of Q4_K, 1.6 KiB of Q6_K) measured 2-8 % faster than two on Zen 3, and none or four
    /// slower (PERFORMANCE.md).
    const AHEAD: usize = 1;

    /// For each stream, the group `ahead` groups after group `i` (in `next` past the end of the
    /// run; the current group if even `next` is too short).
    #[inline(always)]
    unsafe fn ahead_of<G, const S: usize>(
        w: &[*const u8; S],
        next: &[*const u8; S],
        i: usize,
        nb: usize,
        ahead: usize,
    ) -> [*const u8; S] {
        let gb = size_of::<G>();
        let j = i + ahead;
        std::array::from_fn(|s| {
            if j < nb {
                w[s].add(j * gb)
            } else if j - nb < nb {
                next[s].add((j - nb) * gb)
            } else {
                w[s].add(i * gb)
            }
        })
    }

    /// Prefetches part `q` of `parts` of each stream's group at `pf` (the last part reaches
    /// into the group's last cache line, wherever the group starts).
    #[inline(always)]
    unsafe fn prefetch<G, const S: usize>(pf: &[*const u8; S], q: usize, parts: usize) {
        let len = size_of::<G>().div_ceil(parts);
        let span = if q + 1 == parts { len + 63 } else { len };
        for p in pf {
            prefetch_span(p.add(q * len) as *const i8, span);
        }
    }

    #[inline(always)]
    unsafe fn ld16(p: *const u8) -> __m128i {
        _mm_loadu_si128(p as *const __m128i)
    }

    #[inline(always)]
    unsafe fn ld32(p: *const u8) -> __m256i {
        _mm256_loadu_si256(p as *const __m256i)
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

    /// Q4_K groups against Q8_K activation rows. Per pair of sub-blocks: eight loads per
    /// stream, each split into nibbles once, then two `pmaddubsw` per activation row into two
    /// i16 vectors of eight products' pairs (a lane sums 16 products of a 4-bit code and an
    /// int8: at most 30720, no overflow), two `pmaddwd` with the pair's scales to i32 per row;
    /// the mins through one `pmaddwd` against the activation's sub-block sums; per super-block
    /// two conversions and two FMAs.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn q4k8<const S: usize, const R: usize>(
        w: [&[BlockQ4Kx8]; S],
        next: [&[BlockQ4Kx8]; S],
        p: [&[PrepQ4K]; R],
    ) -> Dots<S, R> {
        let nb = w[0].len();
        let gb = size_of::<BlockQ4Kx8>();
        let m4 = _mm256_set1_epi8(0x0f);
        let m3f = _mm256_set1_epi16(0x3f);
        let m30 = _mm256_set1_epi16(0x30);
        let m0f = _mm256_set1_epi16(0x0f);
        let wp = w.map(|s| s.as_ptr() as *const u8);
        let np = next.map(|s| s.as_ptr() as *const u8);
        let mut acc = [[_mm256_setzero_ps(); S]; R];
        for i in 0..nb {
            let pr = p.map(|p| p.get_unchecked(i));
            let (y, c) = (pr.map(|pr| pr.w.as_ptr()), pr.map(|pr| pr.c.as_ptr()));
            let g = wp.map(|b| b.add(i * gb));
            let pf = ahead_of::<BlockQ4Kx8, S>(&wp, &np, i, nb, AHEAD);
            let mut isum = [[_mm256_setzero_si256(); S]; R];
            let mut imin = [[_mm256_setzero_si256(); S]; R];
            for q in 0..4 {
                prefetch::<BlockQ4Kx8, S>(&pf, q, 4);
                let mut a = [[[_mm256_setzero_si256(); 2]; S]; R];
                for t in 0..8 {
                    let lohi: [_; S] = std::array::from_fn(|s| {
                        let v = ld32(g[s].add(128 + 256 * q + 32 * t));
                        let lo = _mm256_and_si256(v, m4);
                        (lo, _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4))
                    });
                    for (j, a) in a.iter_mut().enumerate() {
                        let at = 16 * q + 2 * t;
                        let (ylo, yhi) = if R == 1 {
                            let y = y[j];
                            (
                                _mm256_load_si256(y.add(at) as *const __m256i),
                                _mm256_load_si256(y.add(at + 1) as *const __m256i),
                            )
                        } else {
                            let c = c[j];
                            (
                                _mm256_set1_epi32(*c.add(at)),
                                _mm256_set1_epi32(*c.add(at + 1)),
                            )
                        };
                        for (a, &(lo, hi)) in a.iter_mut().zip(&lohi) {
                            let x = _mm256_add_epi16(
                                _mm256_maddubs_epi16(lo, ylo),
                                _mm256_maddubs_epi16(hi, yhi),
                            );
                            a[t / 4] = _mm256_add_epi16(a[t / 4], x);
                        }
                    }
                }
                for s in 0..S {
                    let sm = _mm256_cvtepu8_epi16(ld16(g[s].add(32 + 16 * q)));
                    let sc = _mm256_and_si256(sm, m3f);
                    let nib = _mm256_cvtepu8_epi16(ld16(g[s].add(96 + 16 * (q / 2))));
                    let lo = if q % 2 == 0 {
                        _mm256_and_si256(nib, m0f)
                    } else {
                        _mm256_srli_epi16::<4>(nib)
                    };
                    let m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<2>(sm), m30), lo);
                    for j in 0..R {
                        let dot = _mm256_add_epi32(
                            _mm256_madd_epi16(a[j][s][0], sc),
                            _mm256_madd_epi16(a[j][s][1], sc),
                        );
                        isum[j][s] = _mm256_add_epi32(isum[j][s], dot);
                        let bs = _mm256_set1_epi32(pr[j].s[q]);
                        imin[j][s] = _mm256_add_epi32(imin[j][s], _mm256_madd_epi16(m, bs));
                    }
                }
            }
            for j in 0..R {
                let dy = _mm256_set1_ps(pr[j].d);
                for s in 0..S {
                    let d = _mm256_mul_ps(_mm256_cvtph_ps(ld16(g[s])), dy);
                    let dm = _mm256_mul_ps(_mm256_cvtph_ps(ld16(g[s].add(16))), dy);
                    acc[j][s] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[j][s]), acc[j][s]);
                    acc[j][s] = _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(imin[j][s]), acc[j][s]);
                }
            }
        }
        store(acc)
    }

    /// Q6_K groups against Q8_K activation rows. Per pair of sub-blocks of 16: the 6-bit codes
    /// of eight vectors from six loads per stream (decoded once for all activation rows),
    /// `pmaddubsw` against the words (two summed per i16 vector: a lane sums 4 products of a
    /// code < 64 and an int8, at most 32256), one `pmaddwd` per two with the pair's i8 scales;
    /// the `- 32` enters once per pair through the activation's sums.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn q6k8<const S: usize, const R: usize>(
        w: [&[BlockQ6Kx8]; S],
        next: [&[BlockQ6Kx8]; S],
        p: [&[Prep]; R],
    ) -> Dots<S, R> {
        let nb = w[0].len();
        let gb = size_of::<BlockQ6Kx8>();
        let m3f = _mm256_set1_epi8(0x3f);
        let m03 = _mm256_set1_epi8(0x03);
        let m0c = _mm256_set1_epi8(0x0c);
        let m30 = _mm256_set1_epi8(0x30);
        let wp = w.map(|s| s.as_ptr() as *const u8);
        let np = next.map(|s| s.as_ptr() as *const u8);
        let mut acc = [[_mm256_setzero_ps(); S]; R];
        for i in 0..nb {
            let pr = p.map(|p| p.get_unchecked(i));
            let g = wp.map(|b| b.add(i * gb));
            let pf = ahead_of::<BlockQ6Kx8, S>(&wp, &np, i, nb, AHEAD);
            let mut isum = [[_mm256_setzero_si256(); S]; R];
            let mut corr = [[_mm256_setzero_si256(); S]; R];
            for q in 0..8 {
                prefetch::<BlockQ6Kx8, S>(&pf, q, 8);
                let sc: [__m256i; S] =
                    std::array::from_fn(|s| _mm256_cvtepi8_epi16(ld16(g[s].add(16 + 16 * q))));
                for u in 0..2 {
                    // The four code vectors of each stream, decoded once.
                    let codes: [[__m256i; 4]; S] = std::array::from_fn(|s| {
                        let base = g[s].add(144 + 192 * q + 96 * u);
                        let v0 = ld32(base);
                        let v1 = ld32(base.add(32));
                        let v2 = ld32(base.add(64));
                        let x3 = _mm256_or_si256(
                            _mm256_or_si256(
                                _mm256_and_si256(_mm256_srli_epi16::<6>(v0), m03),
                                _mm256_and_si256(_mm256_srli_epi16::<4>(v1), m0c),
                            ),
                            _mm256_and_si256(_mm256_srli_epi16::<2>(v2), m30),
                        );
                        [
                            _mm256_and_si256(v0, m3f),
                            _mm256_and_si256(v1, m3f),
                            _mm256_and_si256(v2, m3f),
                            x3,
                        ]
                    });
                    for (isum, pr) in isum.iter_mut().zip(&pr) {
                        let y = pr.w.as_ptr();
                        let ys: [__m256i; 4] =
                            std::array::from_fn(|c| _mm256_set1_epi32(*y.add(8 * q + 4 * u + c)));
                        for s in 0..S {
                            let x = &codes[s];
                            let a = _mm256_add_epi16(
                                _mm256_maddubs_epi16(x[0], ys[0]),
                                _mm256_maddubs_epi16(x[1], ys[1]),
                            );
                            let b = _mm256_add_epi16(
                                _mm256_maddubs_epi16(x[2], ys[2]),
                                _mm256_maddubs_epi16(x[3], ys[3]),
                            );
                            let dot = _mm256_add_epi32(
                                _mm256_madd_epi16(a, sc[s]),
                                _mm256_madd_epi16(b, sc[s]),
                            );
                            isum[s] = _mm256_add_epi32(isum[s], dot);
                        }
                    }
                }
                for (corr, pr) in corr.iter_mut().zip(&pr) {
                    let bs = _mm256_set1_epi32(pr.s[q]);
                    for s in 0..S {
                        corr[s] = _mm256_add_epi32(corr[s], _mm256_madd_epi16(sc[s], bs));
                    }
                }
            }
            for j in 0..R {
                let dy = _mm256_set1_ps(pr[j].d);
                for s in 0..S {
                    let isum = _mm256_sub_epi32(isum[j][s], _mm256_slli_epi32::<5>(corr[j][s]));
                    let d = _mm256_mul_ps(_mm256_cvtph_ps(ld16(g[s])), dy);
                    acc[j][s] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[j][s]);
                }
            }
        }
        store(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;
    use crate::format::QuantBlock;
    use crate::interleave::interleave;

    fn round_trip<B: Interleave>(blocks: &[B]) {
        for rows in blocks.chunks_exact(ROWS) {
            let rows: [B; ROWS] = rows.try_into().unwrap();
            let g = B::pack(&rows);
            for (r, b) in rows.iter().enumerate() {
                assert_eq!(
                    bytemuck::bytes_of(&B::unpack(&g, r)),
                    bytemuck::bytes_of(b),
                    "row {r}"
                );
            }
        }
        let n = blocks.len();
        assert_eq!(interleave(blocks, n, 1).len(), size_of_val(blocks));
    }

    /// Random bytes (every bit pattern of the scales, mins and codes) survive pack and unpack.
    #[test]
    fn q4_k_pack_then_unpack_is_the_identity() {
        round_trip(&random_blocks::<BlockQ4K>(4 * ROWS + 3, &[0, 2], 7));
    }

    #[test]
    fn q6_k_pack_then_unpack_is_the_identity() {
        round_trip(&random_blocks::<BlockQ6K>(4 * ROWS + 3, &[208], 7));
    }

    /// The kernels against each row's own `vec_dot`, on random bytes (extreme codes, scales and
    /// mins included) and one and two streams.
    fn dots_match<B: Interleave<Dot = BlockQ8K>>(blocks: &[B], nb: usize) {
        let k = nb * QK_K;
        let x = random_data(Dist::Normal, k, 1.0, 9);
        let a = q8k(&x);
        let p: Vec<_> = a.iter().map(B::prep).collect();
        let groups: Vec<B::Group> = (0..2)
            .flat_map(|g| {
                let blocks = &blocks;
                (0..nb).map(move |i| {
                    B::pack(&std::array::from_fn(|r| blocks[(g * ROWS + r) * nb + i]))
                })
            })
            .collect();
        let (g0, g1) = groups.split_at(nb);
        let [one] = B::dot8([g0], [g1], [&a[..]], [&p[..]]);
        let [two] = B::dot8([g0, g1], [g1, g1], [&a[..]], [&p[..]]);
        assert_eq!(one[0], two[0]);
        for (h, row) in two.iter().enumerate() {
            for (r, &v) in row.iter().enumerate() {
                let w = &blocks[(h * ROWS + r) * nb..][..nb];
                let want = B::vec_dot(w, &a);
                assert!(
                    (v - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "group {h} row {r}: {v} vs {want}"
                );
            }
        }
    }

    #[test]
    fn q4_k_kernel_matches_rows() {
        let nb = 3;
        dots_match(&random_blocks::<BlockQ4K>(2 * ROWS * nb, &[0, 2], 11), nb);
        let mut w = vec![BlockQ4K::zeroed(); 2 * ROWS * nb];
        BlockQ4K::quantize_ref(&random_data(Dist::Normal, w.len() * QK_K, 0.3, 3), &mut w);
        dots_match(&w, nb);
    }

    #[test]
    fn q6_k_kernel_matches_rows() {
        let nb = 3;
        dots_match(&random_blocks::<BlockQ6K>(2 * ROWS * nb, &[208], 11), nb);
        let mut w = vec![BlockQ6K::zeroed(); 2 * ROWS * nb];
        BlockQ6K::quantize_ref(&random_data(Dist::Normal, w.len() * QK_K, 0.3, 3), &mut w);
        dots_match(&w, nb);
    }
}
