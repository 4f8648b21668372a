//! flexkern's `Backend` trait on the GPU: buffers in device memory (the caching allocator),
//! stream-ordered copies, attention through this crate's planner and kernels, and KV page
//! writes that quantize on the device.

use crate::attention::{self, AttnCall, DeviceTables, KvInput, KvOperand, PagedKv, QInput};
use crate::error::CudaError;
use crate::runtime::compile::KernelSource;
use crate::runtime::{Device, DeviceBuf};
use flexkern::attention::plan::Plan;
use flexkern::attention::problem::{KvLayout, Problem};
use flexkern::backend::{check_range, elements_of, AttnIo, Backend, Buffer, KvBufs, Pages, Slice};
use flexkern::device::{Caps, DeviceKind, TilePolicy};
use flexkern::error::Result;
use flexkern::DType;
use std::ffi::c_void;
use std::sync::Arc;

const KV_WRITE: &str = include_str!("../kernels/kv_write.cu");

/// GPU 0 (or another ordinal) behind the `Backend` trait.
pub struct CudaBackend {
    pub dev: Arc<Device>,
    /// The last attention plan: the model's layers of one step share it.
    pub(crate) attn_plan: attention::PlanMemo,
    /// Per-op host and GPU time (`FLEXKERN_CUDA_PROFILE=1`), printed on drop.
    pub(crate) prof: crate::runtime::profile::Profile,
    /// Recorded step graphs (`graphs.rs`).
    pub(crate) graphs: std::sync::Mutex<crate::graphs::Graphs>,
    /// KV scales on the device by value: a step's KV writes upload nothing (and so can be
    /// recorded in a graph).
    kv_scales: std::sync::Mutex<Vec<(Vec<u32>, Arc<DeviceBuf>)>>,
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if let Some(r) = self.prof.report() {
            eprint!("{r}");
        }
    }
}

impl CudaBackend {
    /// Opens device `ordinal`; `CudaError::NoDevice` without a driver or GPU.
    pub fn new(ordinal: usize) -> crate::Result<CudaBackend> {
        Ok(CudaBackend::on(Device::open(ordinal)?))
    }

    /// The backend on an open device.
    pub fn on(dev: Arc<Device>) -> CudaBackend {
        CudaBackend {
            dev,
            attn_plan: attention::PlanMemo::default(),
            prof: crate::runtime::profile::Profile::from_env(),
            graphs: Default::default(),
            kv_scales: Default::default(),
        }
    }
}

/// A checked KV write: slot pointer and count, the stores, their codes and scales (K's heads,
/// then V's, on the device).
pub(crate) struct KvWriteArgs {
    pub slots: u64,
    pub m: usize,
    pub k: u64,
    pub v: u64,
    pub codes: (i32, i32),
    pub scales: Arc<DeviceBuf>,
    heads: usize,
    module: Arc<crate::runtime::compile::Module>,
}

impl KvWriteArgs {
    pub fn v_scales(&self) -> u64 {
        self.scales.ptr() + (self.heads * 4) as u64
    }
    pub fn function(&self, name: &str) -> Result<cudarc::driver::sys::CUfunction> {
        self.module.function(name).map_err(err)
    }
}

impl CudaBackend {
    /// `scales` on the device, uploaded once per distinct value (a few per cache: one per
    /// layer for quantized stores).
    fn kv_scales(&self, scales: &[f32]) -> Result<Arc<DeviceBuf>> {
        let key: Vec<u32> = scales.iter().map(|f| f.to_bits()).collect();
        let mut c = self.kv_scales.lock().expect("kv scales lock");
        if let Some((_, b)) = c.iter().find(|(k, _)| *k == key) {
            return Ok(b.clone());
        }
        if c.len() >= 256 {
            c.clear();
        }
        let b = Arc::new(self.dev.upload(scales).map_err(err)?);
        c.push((key, b.clone()));
        Ok(b)
    }

    /// `kv_write`'s checks (before anything is launched): u32 slots inside the pool (read on
    /// the host, from the mirror where there is one), f32 K/V rows enough for them, KV
    /// dtypes. `None`: nothing to write.
    pub(crate) fn kv_write_args(
        &self,
        pages: &Pages<'_, CudaBuffer>,
        slots: &Slice<'_, CudaBuffer>,
        k: &CudaBuffer,
        v: &CudaBuffer,
    ) -> Result<Option<KvWriteArgs>> {
        let l = pages.layout;
        if slots.buf.dtype != DType::U32 || k.dtype != DType::F32 || v.dtype != DType::F32 {
            return Err(flexkern::Error::InvalidArgument {
                arg: "slots",
                msg: "expected u32 slots and f32 K/V rows".into(),
            });
        }
        check_range("slots", slots.start, slots.len, slots.buf.len)?;
        let m = slots.len;
        let (kr, vr) = (l.num_kv_heads * l.head_dim, l.num_kv_heads * l.head_dim_v);
        if k.len < m * kr || v.len < m * vr {
            return Err(flexkern::Error::Mismatch {
                a: "k",
                b: "slots",
                msg: format!("{m} slots need {} K and {} V elements", m * kr, m * vr),
            });
        }
        // The slots are checked against the pool on the host (a small download), so a bad
        // entry is a typed error and nothing is written.
        let host = match slots.buf.mirrored_u32(slots.start, m) {
            Some(h) => h,
            None => {
                let mut bytes = vec![0u8; m * 4];
                self.download(slots.buf, slots.start, &mut bytes)?;
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect()
            }
        };
        let cap = (l.num_pages * l.page_size) as u32;
        if let Some(i) = host.iter().position(|&s| s >= cap) {
            return Err(flexkern::Error::InvalidArgument {
                arg: "slots",
                msg: format!("entry {i} is outside the {cap} slots"),
            });
        }
        if m == 0 {
            return Ok(None);
        }
        let code = |d: &CudaBuffer| {
            kv_code(d.dtype).ok_or_else(|| flexkern::Error::InvalidArgument {
                arg: "pages",
                msg: format!("{} is not a KV dtype", d.dtype.name()),
            })
        };
        let codes = (code(pages.k)?, code(pages.v)?);
        let module = self
            .dev
            .module_keyed("kv_write", || KernelSource {
                name: "kv_write".into(),
                source: format!(
                    "{}\n{}\n{KV_WRITE}",
                    crate::headers::text(&[crate::headers::COMMON]),
                    crate::headers::kv_store()
                ),
            })
            .map_err(err)?;
        // Scales: ones for unscaled stores (the kernels read them only for fp8 / int8).
        let mut sc = [l.k_scales.as_slice(), l.v_scales.as_slice()].concat();
        if sc.len() != 2 * l.num_kv_heads {
            sc = vec![1.0; 2 * l.num_kv_heads];
        }
        Ok(Some(KvWriteArgs {
            slots: slots.buf.ptr_at(slots.start),
            m,
            k: pages.k.buf.ptr(),
            v: pages.v.buf.ptr(),
            codes,
            scales: self.kv_scales(&sc)?,
            heads: l.num_kv_heads,
            module,
        }))
    }
}

/// `len` elements of `dtype` in device memory.
pub struct CudaBuffer {
    buf: DeviceBuf,
    dtype: DType,
    len: usize,
    /// Small index buffers (U32) keep a host copy of their bytes: no kernel writes U32 buffers
    /// (only `alloc`, `upload`, `copy` and `copy_within` do, and they keep it in step), so
    /// token ids and KV slots are checked on the host without a download, that is, without a
    /// stream sync per layer.
    mirror: Option<Vec<u8>>,
}

/// U32 buffers up to this many bytes keep a host mirror.
const MIRROR_MAX: usize = 1 << 20;

impl CudaBuffer {
    pub fn device_buf(&self) -> &DeviceBuf {
        &self.buf
    }
    /// `len` u32 values from element `at`, from the host mirror (None: no mirror).
    pub(crate) fn mirrored_u32(&self, at: usize, len: usize) -> Option<Vec<u32>> {
        let m = self.mirror.as_ref()?;
        let bytes = m.get(at * 4..(at + len) * 4)?;
        Some(
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
        )
    }
    pub(crate) fn ptr_at(&self, at: usize) -> u64 {
        self.buf.ptr() + (at * self.dtype.size()) as u64
    }
}

impl Buffer for CudaBuffer {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn len(&self) -> usize {
        self.len
    }
}

fn err(e: CudaError) -> flexkern::Error {
    e.into()
}

fn kv_code(d: DType) -> Option<i32> {
    Some(match d {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        DType::Fp8E4M3 => 3,
        DType::Fp8E5M2 => 4,
        DType::I8 => 5,
        DType::U8 | DType::U32 | DType::U64 => return None,
    })
}

impl Backend for CudaBackend {
    type Buffer = CudaBuffer;

    fn caps(&self) -> Caps {
        let p = &self.dev.props;
        Caps {
            name: format!("cuda: {}", p.name),
            kind: DeviceKind::Gpu {
                sms: p.sms,
                compute_capability: p.compute_capability,
                smem_per_block: p.smem_per_block_optin,
                smem_per_sm: p.smem_per_sm,
                l2_bytes: p.l2_bytes,
            },
            workers: p.sms,
            // The shared planner's view of this device; the kernels' own split-KV work list
            // comes from `crate::plan` (rows per block, partitions per SM count).
            tiles: TilePolicy {
                fuse_kv_heads: false,
                parts_per_worker: 8,
                decode_kv_block: crate::plan::TILE,
                ..TilePolicy::cpu()
            },
        }
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<CudaBuffer> {
        let bytes =
            len.checked_mul(dtype.size())
                .ok_or_else(|| flexkern::Error::InvalidArgument {
                    arg: "len",
                    msg: "size overflows".into(),
                })?;
        let buf = self.dev.alloc(bytes.max(1)).map_err(err)?;
        self.dev.memset(&buf, 0, bytes, 0).map_err(err)?;
        let mirror = (dtype == DType::U32 && bytes <= MIRROR_MAX).then(|| vec![0u8; bytes]);
        Ok(CudaBuffer {
            buf,
            dtype,
            len,
            mirror,
        })
    }

    fn upload(&self, dst: &mut CudaBuffer, at: usize, src: &[u8]) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "upload");
        let n = elements_of("src", src.len(), dst.dtype)?;
        check_range("dst", at, n, dst.len)?;
        let es = dst.dtype.size();
        if let Some(m) = dst.mirror.as_mut() {
            m[at * es..at * es + src.len()].copy_from_slice(src);
        }
        self.dev.write(&dst.buf, at * es, src).map_err(err)
    }

    fn download(&self, src: &CudaBuffer, at: usize, dst: &mut [u8]) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "download");
        let n = elements_of("dst", dst.len(), src.dtype)?;
        check_range("src", at, n, src.len)?;
        self.dev
            .read(&src.buf, at * src.dtype.size(), dst)
            .map_err(err)
    }

    fn copy(
        &self,
        src: &CudaBuffer,
        src_at: usize,
        dst: &mut CudaBuffer,
        dst_at: usize,
        len: usize,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "copy");
        if src.dtype != dst.dtype {
            return Err(flexkern::Error::Mismatch {
                a: "src",
                b: "dst",
                msg: "dtypes differ".into(),
            });
        }
        check_range("src", src_at, len, src.len)?;
        check_range("dst", dst_at, len, dst.len)?;
        let es = src.dtype.size();
        match (src.mirror.as_ref(), dst.mirror.as_mut()) {
            (Some(s), Some(d)) => d[dst_at * es..(dst_at + len) * es]
                .copy_from_slice(&s[src_at * es..(src_at + len) * es]),
            (None, Some(_)) => dst.mirror = None,
            _ => {}
        }
        self.dev
            .copy_at(&src.buf, src_at * es, &dst.buf, dst_at * es, len * es)
            .map_err(err)
    }

    fn copy_within(
        &self,
        buf: &mut CudaBuffer,
        src_at: usize,
        dst_at: usize,
        len: usize,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "copy_within");
        check_range("src", src_at, len, buf.len)?;
        check_range("dst", dst_at, len, buf.len)?;
        let es = buf.dtype.size();
        if let Some(m) = buf.mirror.as_mut() {
            m.copy_within(src_at * es..(src_at + len) * es, dst_at * es);
        }
        // Overlapping ranges go through a scratch block (cuMemcpy does not promise memmove).
        let tmp = self.dev.alloc((len * es).max(1)).map_err(err)?;
        self.dev
            .copy_at(&buf.buf, src_at * es, &tmp, 0, len * es)
            .map_err(err)?;
        self.dev
            .copy_at(&tmp, 0, &buf.buf, dst_at * es, len * es)
            .map_err(err)
    }

    fn synchronize(&self) -> Result<()> {
        self.dev.synchronize().map_err(err)
    }

    fn attention(&self, p: &Problem, _plan: &Plan, io: AttnIo<'_, CudaBuffer>) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "attention");
        let call = attn_call(p, &io)?;
        if self.dev.capturing() {
            self.graphs.lock().expect("graphs lock").note_attention();
        }
        attention::attention_memo(&self.dev, &call, &self.attn_plan).map_err(err)
    }

    fn kv_write(
        &self,
        pages: Pages<'_, CudaBuffer>,
        slots: Slice<'_, CudaBuffer>,
        k: &CudaBuffer,
        v: &CudaBuffer,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "kv_write");
        let Some(w) = self.kv_write_args(&pages, &slots, k, v)? else {
            return Ok(());
        };
        let dev = &self.dev;
        let f = w.function("fk_kv_write")?;
        let l = pages.layout;
        for (is_v, src_buf) in [(false, k), (true, v)] {
            let dim = if is_v { l.head_dim_v } else { l.head_dim };
            let (mut sp, mut m64, mut s, mut d, mut code, mut heads, mut dim, mut sc) = (
                w.slots,
                w.m as u64,
                src_buf.buf.ptr(),
                if is_v { w.v } else { w.k },
                if is_v { w.codes.1 } else { w.codes.0 },
                l.num_kv_heads as i32,
                dim as i32,
                if is_v { w.v_scales() } else { w.scales.ptr() },
            );
            let mut params: [*mut c_void; 8] = [
                (&mut sp as *mut u64).cast(),
                (&mut m64 as *mut u64).cast(),
                (&mut s as *mut u64).cast(),
                (&mut d as *mut u64).cast(),
                (&mut code as *mut i32).cast(),
                (&mut heads as *mut i32).cast(),
                (&mut dim as *mut i32).cast(),
                (&mut sc as *mut u64).cast(),
            ];
            let n = w.m * l.num_kv_heads * dim as usize;
            dev.bind().map_err(err)?;
            // SAFETY: fk_kv_write(const u32*, u64, const float*, u8*, int, int, int, const float*)
            // writes slot rows inside the store (slots checked) from `m` rows of `src`.
            unsafe {
                crate::runtime::launch(
                    f,
                    ((n.div_ceil(256)).clamp(1, 65535) as u32, 256, 0),
                    dev.stream(),
                    &mut params,
                    dev.pdl(),
                )
            }
            .map_err(err)?;
        }
        // Scales are in stream order behind the kernels; the pool keeps the block alive.
        Ok(())
    }
}

/// The crate's attention call for the trait's problem and buffers (checked like the CPU's).
pub(crate) fn attn_call<'a>(
    p: &'a Problem,
    io: &'a AttnIo<'_, CudaBuffer>,
) -> Result<AttnCall<'a>> {
    let q = QInput {
        buf: &io.q.buf,
        dtype: p.q.dtype,
        seq_base: &p.q.seq_base,
        tok_stride: p.q.tok_stride,
        head_stride: p.q.head_stride,
    };
    let (kv, ks, vs) = match (&p.kv, &io.kv) {
        (KvLayout::Strided { k, v }, KvBufs::Strided { k: kb, v: vb }) => {
            let ((kb, kl), (vb, vl)) = ((kb, k), (vb, v));
            (
                KvInput::Strided {
                    k: KvOperand {
                        buf: &kb.buf,
                        dtype: kl.dtype,
                        seq_base: &kl.seq_base,
                        tok_stride: kl.tok_stride,
                        head_stride: kl.head_stride,
                    },
                    v: KvOperand {
                        buf: &vb.buf,
                        dtype: vl.dtype,
                        seq_base: &vl.seq_base,
                        tok_stride: vl.tok_stride,
                        head_stride: vl.head_stride,
                    },
                },
                &[][..],
                &[][..],
            )
        }
        (
            KvLayout::Paged(l),
            KvBufs::Paged {
                k,
                v,
                cu_pages,
                first_page,
                page_indices,
            },
        ) => {
            for (arg, sl) in [
                ("cu_pages", cu_pages),
                ("first_page", first_page),
                ("page_indices", page_indices),
            ] {
                if sl.buf.dtype != DType::U32 {
                    return Err(flexkern::Error::InvalidArgument {
                        arg,
                        msg: "expected a u32 buffer".into(),
                    });
                }
                check_range(arg, sl.start, sl.len, sl.buf.len)?;
            }
            let n = p.lens.num_seqs();
            if cu_pages.len != n + 1 || first_page.len != n {
                return Err(flexkern::Error::InvalidArgument {
                    arg: "cu_pages",
                    msg: format!(
                        "{} / {} entries for {n} sequences",
                        cu_pages.len, first_page.len
                    ),
                });
            }
            let t = DeviceTables {
                cu_pages: cu_pages.buf.ptr_at(cu_pages.start),
                first_page: first_page.buf.ptr_at(first_page.start),
                page_indices: page_indices.buf.ptr_at(page_indices.start),
                page_indices_len: page_indices.len,
            };
            (
                KvInput::Paged(PagedKv {
                    k: &k.buf,
                    v: &v.buf,
                    k_dtype: l.k_dtype,
                    v_dtype: l.v_dtype,
                    page_size: l.page_size,
                    num_pages: l.num_pages,
                    cu_pages: &[],
                    first_page: &[],
                    page_indices: &[],
                    device_tables: Some(t),
                }),
                l.k_scales.as_slice(),
                l.v_scales.as_slice(),
            )
        }
        _ => {
            return Err(flexkern::Error::InvalidArgument {
                arg: "kv",
                msg: "buffers do not match the problem's KV layout".into(),
            })
        }
    };
    Ok(AttnCall {
        lens: &p.lens,
        num_q_heads: p.num_q_heads,
        num_kv_heads: p.num_kv_heads,
        head_dim: p.head_dim,
        head_dim_v: p.head_dim_v,
        scale: p.scale,
        variant: &p.variant,
        q,
        kv,
        k_scales: ks,
        v_scales: vs,
        out: &io.out.buf,
        lse: io.lse.as_ref().map(|l| &l.buf),
        deterministic: false,
    })
}
