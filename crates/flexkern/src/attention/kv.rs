//! Where keys and values come from. Kernels read KV rows through `KvSource`, so contiguous,
//! strided, paged and quantized caches share one kernel path; mods always see logical positions.

use super::problem::{Layout, SeqLens};
use crate::tensor::HostData;
use half::{bf16, f16};

/// One K or V row of one head (`dim` elements), as stored.
#[derive(Clone, Copy, Debug)]
pub enum KvRow<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
    /// fp8 e4m3fn codes; value = decode(code) * scale.
    Fp8E4M3(&'a [u8], f32),
    /// fp8 e5m2 codes; value = decode(code) * scale.
    Fp8E5M2(&'a [u8], f32),
    /// int8; value = code * scale.
    I8(&'a [i8], f32),
}

impl KvRow<'_> {
    pub fn len(&self) -> usize {
        match self {
            KvRow::F32(s) => s.len(),
            KvRow::F16(s) => s.len(),
            KvRow::BF16(s) => s.len(),
            KvRow::Fp8E4M3(s, _) | KvRow::Fp8E5M2(s, _) => s.len(),
            KvRow::I8(s, _) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Address and size in bytes of the stored row.
    #[inline]
    pub fn bytes(&self) -> (*const u8, usize) {
        match *self {
            KvRow::F32(s) => (s.as_ptr().cast(), s.len() * 4),
            KvRow::F16(s) => (s.as_ptr().cast(), s.len() * 2),
            KvRow::BF16(s) => (s.as_ptr().cast(), s.len() * 2),
            KvRow::Fp8E4M3(s, _) | KvRow::Fp8E5M2(s, _) => (s.as_ptr(), s.len()),
            KvRow::I8(s, _) => (s.as_ptr().cast(), s.len()),
        }
    }

    /// Widens the row into `dst` (same length).
    #[inline]
    pub fn to_f32(&self, dst: &mut [f32]) {
        match *self {
            KvRow::F32(s) => dst.copy_from_slice(s),
            KvRow::F16(s) => {
                for (d, x) in dst.iter_mut().zip(s) {
                    *d = x.to_f32();
                }
            }
            KvRow::BF16(s) => {
                for (d, x) in dst.iter_mut().zip(s) {
                    *d = x.to_f32();
                }
            }
            KvRow::Fp8E4M3(s, scale) => {
                let lut = crate::kv_quant_lut::e4m3();
                for (d, &x) in dst.iter_mut().zip(s) {
                    *d = lut[x as usize] * scale;
                }
            }
            KvRow::Fp8E5M2(s, scale) => {
                let lut = crate::kv_quant_lut::e5m2();
                for (d, &x) in dst.iter_mut().zip(s) {
                    *d = lut[x as usize] * scale;
                }
            }
            KvRow::I8(s, scale) => {
                for (d, &x) in dst.iter_mut().zip(s) {
                    *d = x as f32 * scale;
                }
            }
        }
    }
}

/// The rows of every kv head at positions `pos..pos + len` stored at fixed strides (elements):
/// row (head `h`, `pos + i`) starts `h * head_stride + i * pos_stride` after `first`'s start.
#[derive(Clone, Copy, Debug)]
pub struct KvRun<'a> {
    /// From the row of (head 0, `pos`) through the last row of the run; a quantized run carries
    /// head 0's scale (each head's is the one `k_row` / `v_row` gives at `pos`).
    pub first: KvRow<'a>,
    pub head_stride: usize,
    pub pos_stride: usize,
    pub len: usize,
}

/// Read access to the keys and values of every sequence of a batch.
pub trait KvSource: Sync {
    fn num_kv_heads(&self) -> usize;
    fn head_dim(&self) -> usize;
    fn head_dim_v(&self) -> usize;
    /// KV length of sequence `seq`.
    fn kv_len(&self, seq: usize) -> usize;
    /// Key row at logical position `pos < kv_len(seq)` of kv head `head`.
    fn k_row(&self, seq: usize, head: usize, pos: usize) -> KvRow<'_>;
    /// Value row at logical position `pos < kv_len(seq)` of kv head `head`.
    fn v_row(&self, seq: usize, head: usize, pos: usize) -> KvRow<'_>;
    /// Key rows of positions `pos..pos + n` at fixed strides, `1 <= n <= max`, with each head's
    /// scale constant along them, so kernels look rows up once per run instead of per row.
    /// `None` (the default): read rows one by one.
    fn k_run(&self, seq: usize, pos: usize, max: usize) -> Option<KvRun<'_>> {
        let _ = (seq, pos, max);
        None
    }
    /// As `k_run`, for values.
    fn v_run(&self, seq: usize, pos: usize, max: usize) -> Option<KvRun<'_>> {
        let _ = (seq, pos, max);
        None
    }
}

/// One strided operand bound to its data.
#[derive(Clone, Copy, Debug)]
pub struct Bound<'a> {
    pub layout: &'a Layout,
    pub data: HostData<'a>,
}

impl Bound<'_> {
    #[inline(always)]
    fn offset(&self, seq: usize, tok: usize, head: usize) -> usize {
        self.layout.offset(seq, tok, head)
    }
}

/// K and V as strided host tensors (contiguous, ragged or batch-major).
#[derive(Clone, Copy, Debug)]
pub struct StridedKv<'a> {
    pub k: Bound<'a>,
    pub v: Bound<'a>,
    pub lens: &'a SeqLens,
}

fn row<'a>(o: &Bound<'a>, seq: usize, head: usize, pos: usize) -> KvRow<'a> {
    let at = o.offset(seq, pos, head);
    let dim = o.layout.dim;
    match o.data {
        HostData::F32(s) => KvRow::F32(&s[at..at + dim]),
        HostData::F16(s) => KvRow::F16(&s[at..at + dim]),
        HostData::BF16(s) => KvRow::BF16(&s[at..at + dim]),
    }
}

/// A sequence's rows from `pos` on, up to `max` positions (never past its length).
fn run<'a>(o: &Bound<'a>, len: usize, seq: usize, pos: usize, max: usize) -> Option<KvRun<'a>> {
    let n = max.min(len.checked_sub(pos)?);
    if n == 0 {
        return None;
    }
    let l = o.layout;
    let (at, end) = (
        o.offset(seq, pos, 0),
        o.offset(seq, pos + n - 1, l.heads - 1) + l.dim,
    );
    let first = match o.data {
        HostData::F32(s) => KvRow::F32(&s[at..end]),
        HostData::F16(s) => KvRow::F16(&s[at..end]),
        HostData::BF16(s) => KvRow::BF16(&s[at..end]),
    };
    Some(KvRun {
        first,
        head_stride: l.head_stride,
        pos_stride: l.tok_stride,
        len: n,
    })
}

impl KvSource for StridedKv<'_> {
    fn num_kv_heads(&self) -> usize {
        self.k.layout.heads
    }
    fn head_dim(&self) -> usize {
        self.k.layout.dim
    }
    fn head_dim_v(&self) -> usize {
        self.v.layout.dim
    }
    fn kv_len(&self, seq: usize) -> usize {
        self.lens.kv_len(seq)
    }
    #[inline]
    fn k_row(&self, seq: usize, head: usize, pos: usize) -> KvRow<'_> {
        row(&self.k, seq, head, pos)
    }
    #[inline]
    fn v_row(&self, seq: usize, head: usize, pos: usize) -> KvRow<'_> {
        row(&self.v, seq, head, pos)
    }
    fn k_run(&self, seq: usize, pos: usize, max: usize) -> Option<KvRun<'_>> {
        run(&self.k, self.lens.kv_len(seq), seq, pos, max)
    }
    fn v_run(&self, seq: usize, pos: usize, max: usize) -> Option<KvRun<'_>> {
        run(&self.v, self.lens.kv_len(seq), seq, pos, max)
    }
}
