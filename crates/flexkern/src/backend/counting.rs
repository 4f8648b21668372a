//! `Counting<B>`: a backend that runs everything on `B` and counts host↔device traffic
//! (uploads and downloads, calls and bytes). Tests use it to prove how much a caller moves,
//! e.g. that a model's decode step makes one upload and one download. `Counting::recording`
//! also claims to record graphs (the ops still run) and counts the recordings and replays
//! asked of it, declining each replay, so a test sees which steps a caller would replay.

use super::tensor_ops::{GraphId, Norm, Rope, RopeKv, TensorOps};
use super::{AttnIo, Backend, Pages, Slice};
use crate::attention::plan::Plan;
use crate::attention::problem::Problem;
use crate::device::Caps;
use crate::dtype::DType;
use crate::error::Result;
use flexkern_quant::QuantMatrix;
use std::sync::atomic::{AtomicU64, Ordering};

/// Transfers so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    pub uploads: u64,
    pub upload_bytes: u64,
    pub downloads: u64,
    pub download_bytes: u64,
}

#[derive(Debug, Default)]
pub struct Counting<B> {
    pub inner: B,
    uploads: AtomicU64,
    upload_bytes: AtomicU64,
    downloads: AtomicU64,
    download_bytes: AtomicU64,
    /// `recording`: graph recordings begun and replays asked for.
    records: Option<(AtomicU64, AtomicU64)>,
}

impl<B> Counting<B> {
    pub fn new(inner: B) -> Self {
        Counting {
            inner,
            uploads: AtomicU64::new(0),
            upload_bytes: AtomicU64::new(0),
            downloads: AtomicU64::new(0),
            download_bytes: AtomicU64::new(0),
            records: None,
        }
    }

    /// As `new`, answering `record_begin` with true (the ops queued then still run) and
    /// declining every `replay` (the caller then runs its step eagerly), counting both.
    pub fn recording(inner: B) -> Self {
        Counting {
            records: Some((AtomicU64::new(0), AtomicU64::new(0))),
            ..Counting::new(inner)
        }
    }

    /// (recordings begun, replays asked for) under `recording`.
    pub fn graphs(&self) -> (u64, u64) {
        self.records.as_ref().map_or((0, 0), |(r, p)| {
            (r.load(Ordering::Relaxed), p.load(Ordering::Relaxed))
        })
    }

    pub fn transfers(&self) -> Transfers {
        Transfers {
            uploads: self.uploads.load(Ordering::Relaxed),
            upload_bytes: self.upload_bytes.load(Ordering::Relaxed),
            downloads: self.downloads.load(Ordering::Relaxed),
            download_bytes: self.download_bytes.load(Ordering::Relaxed),
        }
    }
}

impl<B: Backend> Backend for Counting<B> {
    type Buffer = B::Buffer;

    fn caps(&self) -> Caps {
        self.inner.caps()
    }
    fn alloc(&self, dtype: DType, len: usize) -> Result<B::Buffer> {
        self.inner.alloc(dtype, len)
    }
    fn upload(&self, dst: &mut B::Buffer, at: usize, src: &[u8]) -> Result<()> {
        self.uploads.fetch_add(1, Ordering::Relaxed);
        self.upload_bytes
            .fetch_add(src.len() as u64, Ordering::Relaxed);
        self.inner.upload(dst, at, src)
    }
    fn download(&self, src: &B::Buffer, at: usize, dst: &mut [u8]) -> Result<()> {
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.download_bytes
            .fetch_add(dst.len() as u64, Ordering::Relaxed);
        self.inner.download(src, at, dst)
    }
    fn copy(
        &self,
        src: &B::Buffer,
        src_at: usize,
        dst: &mut B::Buffer,
        dst_at: usize,
        len: usize,
    ) -> Result<()> {
        self.inner.copy(src, src_at, dst, dst_at, len)
    }
    fn copy_within(
        &self,
        buf: &mut B::Buffer,
        src_at: usize,
        dst_at: usize,
        len: usize,
    ) -> Result<()> {
        self.inner.copy_within(buf, src_at, dst_at, len)
    }
    fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }
    fn attention(&self, p: &Problem, plan: &Plan, io: AttnIo<'_, B::Buffer>) -> Result<()> {
        self.inner.attention(p, plan, io)
    }
    fn kv_write(
        &self,
        pages: Pages<'_, B::Buffer>,
        slots: Slice<'_, B::Buffer>,
        k: &B::Buffer,
        v: &B::Buffer,
    ) -> Result<()> {
        self.inner.kv_write(pages, slots, k, v)
    }
}

impl<B: TensorOps> TensorOps for Counting<B> {
    type Weight<'w>
        = B::Weight<'w>
    where
        Self: 'w;

    fn prepare_weight<'w>(&self, w: QuantMatrix<'w>) -> Result<B::Weight<'w>> {
        self.inner.prepare_weight(w)
    }
    fn weight_shape(w: &B::Weight<'_>) -> (usize, usize) {
        B::weight_shape(w)
    }
    fn matmul(&self, w: &B::Weight<'_>, x: &B::Buffer, m: usize, y: &mut B::Buffer) -> Result<()> {
        self.inner.matmul(w, x, m, y)
    }
    fn matmul_add(
        &self,
        w: &B::Weight<'_>,
        x: &B::Buffer,
        m: usize,
        acc: &mut B::Buffer,
        scratch: &mut B::Buffer,
    ) -> Result<()> {
        self.inner.matmul_add(w, x, m, acc, scratch)
    }
    fn matmul_many(
        &self,
        ws: &[&B::Weight<'_>],
        x: &B::Buffer,
        m: usize,
        ys: &mut [&mut B::Buffer],
    ) -> Result<()> {
        self.inner.matmul_many(ws, x, m, ys)
    }
    fn swiglu(
        &self,
        gate: &B::Weight<'_>,
        up: &B::Weight<'_>,
        x: &B::Buffer,
        m: usize,
        out: &mut B::Buffer,
    ) -> Result<()> {
        self.inner.swiglu(gate, up, x, m, out)
    }
    fn embedding(
        &self,
        table: &B::Weight<'_>,
        ids: Slice<'_, B::Buffer>,
        out: &mut B::Buffer,
    ) -> Result<()> {
        self.inner.embedding(table, ids, out)
    }
    fn rms_norm(
        &self,
        x: &B::Buffer,
        rows: usize,
        weight: &B::Buffer,
        eps: f32,
        out: &mut B::Buffer,
    ) -> Result<()> {
        self.inner.rms_norm(x, rows, weight, eps, out)
    }
    fn rope(
        &self,
        x: &mut B::Buffer,
        heads: usize,
        head_dim: usize,
        positions: Slice<'_, B::Buffer>,
        rope: &Rope,
        inv_freq: &B::Buffer,
    ) -> Result<()> {
        self.inner
            .rope(x, heads, head_dim, positions, rope, inv_freq)
    }
    fn add(&self, acc: &mut B::Buffer, x: &B::Buffer, len: usize) -> Result<()> {
        self.inner.add(acc, x, len)
    }
    fn add_bias(&self, x: &mut B::Buffer, rows: usize, bias: &B::Buffer) -> Result<()> {
        self.inner.add_bias(x, rows, bias)
    }
    fn norm_matmul_many(
        &self,
        norm: Norm<'_, B::Buffer>,
        ws: &[&B::Weight<'_>],
        x: &B::Buffer,
        m: usize,
        h: &mut B::Buffer,
        ys: &mut [&mut B::Buffer],
    ) -> Result<()> {
        self.inner.norm_matmul_many(norm, ws, x, m, h, ys)
    }
    fn norm_swiglu(
        &self,
        norm: Norm<'_, B::Buffer>,
        gate: &B::Weight<'_>,
        up: &B::Weight<'_>,
        x: &B::Buffer,
        m: usize,
        h: &mut B::Buffer,
        out: &mut B::Buffer,
    ) -> Result<()> {
        self.inner.norm_swiglu(norm, gate, up, x, m, h, out)
    }
    fn rope_kv_write(
        &self,
        q: &mut B::Buffer,
        q16: Option<&mut B::Buffer>,
        k: &mut B::Buffer,
        v: &B::Buffer,
        at: RopeKv<'_, B::Buffer>,
    ) -> Result<()> {
        self.inner.rope_kv_write(q, q16, k, v, at)
    }
    fn largest(&self, x: &B::Buffer, n: usize, k: usize) -> Result<Option<Vec<(u32, f32)>>> {
        self.inner.largest(x, n, k)
    }
    fn record_begin(&self) -> Result<bool> {
        match &self.records {
            Some((r, _)) => {
                r.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            None => self.inner.record_begin(),
        }
    }
    fn record_end(&self) -> Result<GraphId> {
        match &self.records {
            Some((r, _)) => Ok(GraphId(r.load(Ordering::Relaxed))),
            None => self.inner.record_end(),
        }
    }
    fn replay(&self, id: GraphId, attn: (&Problem, &Plan, AttnIo<'_, B::Buffer>)) -> Result<bool> {
        match &self.records {
            Some((_, p)) => {
                p.fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            None => self.inner.replay(id, attn),
        }
    }
    fn graph_free(&self, id: GraphId) {
        self.inner.graph_free(id)
    }
}
