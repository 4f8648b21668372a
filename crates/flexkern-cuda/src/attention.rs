//! Attention on the GPU: validation, kernel choice, the step buffer (plan + page tables +
//! variant parameters in one upload), the attention launch and the merge launch.

use crate::codegen::{self, ParamLayout};
use crate::error::{driver, invalid, Result};
use crate::plan::{
    mma_shape, mma_smem, plan_work, rows_per_block, MmaQuery, MmaShape, WorkPlan, TILE,
};
use crate::runtime::compile::KernelSource;
use crate::runtime::{Device, DeviceBuf};
use cudarc::driver::result::launch_kernel;
use flexkern::attention::problem::{SeqLens, MAX_HEAD_DIM};
use flexkern::variant::CompiledVariant;
use flexkern::DType;
use std::ffi::c_void;
use std::sync::Arc;

const COMMON: &str = include_str!("../kernels/fk_common.cuh");
const ATTENTION: &str = include_str!("../kernels/attention.cu");
const ATTENTION_ASYNC: &str = include_str!("../kernels/attention_async.cu");
const ATTENTION_MMA: &str = include_str!("../kernels/attention_mma.cu");
const ATTENTION_WGMMA: &str = include_str!("../kernels/attention_wgmma.cu");
/// Most partitions per row tile that the tensor-core kernel joins itself (its last block of
/// the row tile, serially); more go to the merge kernel (B1 x 128k: 49 partitions per row
/// tile took 15 % longer joined in-kernel on an H100).
const SELF_JOIN_PARTS: u32 = 4;
/// Threads of the merge kernel (`FK_MERGE_WARPS` warps).
const MERGE_THREADS: u32 = 256;

/// Warps per attention block: `FLEXKERN_CUDA_WARPS` (4 or 8) for tuning runs, else 4.
pub fn warps() -> usize {
    match std::env::var("FLEXKERN_CUDA_WARPS").ok().as_deref() {
        Some("8") => 8,
        _ => 4,
    }
}

/// Q: element (seq, token i, head h, d) at `seq_base[seq] + i * tok_stride + h * head_stride + d`.
pub struct QInput<'a> {
    pub buf: &'a DeviceBuf,
    pub dtype: DType,
    pub seq_base: &'a [usize],
    pub tok_stride: usize,
    pub head_stride: usize,
}

/// One strided K or V operand (same addressing as Q).
pub struct KvOperand<'a> {
    pub buf: &'a DeviceBuf,
    pub dtype: DType,
    pub seq_base: &'a [usize],
    pub tok_stride: usize,
    pub head_stride: usize,
}

pub enum KvInput<'a> {
    Strided {
        k: KvOperand<'a>,
        v: KvOperand<'a>,
    },
    /// Pools `[num_pages, page_size, Hkv, D]`; sequence s owns
    /// `page_indices[cu_pages[s]..cu_pages[s + 1]]`, the first of them logical page `first_page[s]`.
    Paged {
        k: &'a DeviceBuf,
        v: &'a DeviceBuf,
        k_dtype: DType,
        v_dtype: DType,
        page_size: usize,
        num_pages: usize,
        cu_pages: &'a [u32],
        first_page: &'a [u32],
        page_indices: &'a [u32],
        /// Page tables already on the device (the backend trait's U32 slices): then the host
        /// slices above are empty and unused.
        device_tables: Option<DeviceTables>,
    },
}

/// Device addresses of page tables: `cu_pages` (n + 1), `first_page` (n), `page_indices`.
#[derive(Clone, Copy, Debug)]
pub struct DeviceTables {
    pub cu_pages: u64,
    pub first_page: u64,
    pub page_indices: u64,
    pub page_indices_len: usize,
}

/// One attention call. `out` is f32 `[total_q, Hq, Dv]`, `lse` f32 `[total_q, Hq]`.
pub struct AttnCall<'a> {
    pub lens: &'a SeqLens,
    pub num_q_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    pub scale: f32,
    pub variant: &'a CompiledVariant,
    pub q: QInput<'a>,
    pub kv: KvInput<'a>,
    /// Per-kv-head dequantization scales (empty: 1.0).
    pub k_scales: &'a [f32],
    pub v_scales: &'a [f32],
    pub out: &'a DeviceBuf,
    pub lse: Option<&'a DeviceBuf>,
    pub deterministic: bool,
}

fn elem_code(arg: &'static str, d: DType, kv: bool) -> Result<u32> {
    Ok(match d {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        DType::Fp8E4M3 if kv => 3,
        DType::Fp8E5M2 if kv => 4,
        DType::I8 if kv => 5,
        other => {
            return Err(invalid(
                arg,
                format!("dtype {} is not supported here", other.name()),
            ))
        }
    })
}

/// Largest power-of-two element count of at most 16 bytes dividing every offset in `xs`.
fn vec_width(size: usize, xs: &[usize]) -> usize {
    let mut v = 16 / size;
    while v > 1 && xs.iter().any(|x| x % v != 0) {
        v /= 2;
    }
    v
}

/// The compiled-kernel choice: everything `#define`d into the template.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelConfig {
    pub qt: u32,
    pub kt: u32,
    pub vt: u32,
    pub dk: usize,
    pub dv: usize,
    pub vk: usize,
    pub vv: usize,
    pub rows: usize,
    pub paged: bool,
    /// Keys per shared-memory stage of the cp.async path (0: the register path).
    pub async_tile: usize,
    pub stages: usize,
    /// The tensor-core path's shape (it takes precedence over the two above).
    pub mma: Option<MmaShape>,
    /// log2 of a power-of-two page size (-1: strided, or pages of another size).
    pub page_shift: i32,
    pub nwarps: usize,
}

/// The cp.async pipeline's shape: `FLEXKERN_CUDA_ASYNC=tile,stages` (or `0` for the register
/// path) overrides the default (32 keys, 3 stages: the best of 32x3, 32x4, 32x6, 64x3, 64x4 on an
/// H100, PERFORMANCE.md) for tuning runs.
pub fn async_shape() -> (usize, usize) {
    match std::env::var("FLEXKERN_CUDA_ASYNC")
        .ok()
        .as_deref()
        .map(|s| {
            s.split(',')
                .map(|x| x.trim().parse::<usize>().unwrap_or(0))
                .collect::<Vec<_>>()
        }) {
        Some(v) if v.first() == Some(&0) => (0, 0),
        Some(v) if v.len() == 2 && [32, 64, 128].contains(&v[0]) && (2..=8).contains(&v[1]) => {
            (v[0], v[1])
        }
        _ => (32, 3),
    }
}

impl KernelConfig {
    /// Threads per block of the attention kernel.
    pub fn threads(&self) -> usize {
        self.mma
            .map_or(self.nwarps * 32, |m| m.threads(self.nwarps))
    }

    /// Dynamic shared memory of the cp.async kernel.
    pub fn stage_bytes(&self, kt: DType, vt: DType) -> usize {
        self.stages * self.async_tile * (self.dk * kt.size() + self.dv * vt.size())
    }

    /// `attn_paged_bf16_hd128_r4`-style module name (the cache file adds the hash).
    pub fn name(&self) -> String {
        const N: [&str; 6] = ["f32", "f16", "bf16", "e4m3", "e5m2", "i8"];
        let kv = if self.kt == self.vt {
            N[self.kt as usize].to_string()
        } else {
            format!("{}{}", N[self.kt as usize], N[self.vt as usize])
        };
        let hd = if self.dk == self.dv {
            format!("hd{}", self.dk)
        } else {
            format!("hd{}x{}", self.dk, self.dv)
        };
        let pages = if self.page_shift >= 0 {
            format!("{}", 1usize << self.page_shift)
        } else {
            String::new()
        };
        let pipe = if let Some(m) = &self.mma {
            format!(
                "_mma{}x{}x{}c{}l{}b{}{}",
                m.m_tiles,
                m.tile,
                m.stages,
                m.copy_threads,
                m.l2_prefetch,
                m.min_blocks,
                if m.wg {
                    format!("wg{}", m.wg_s)
                } else {
                    String::new()
                }
            )
        } else if self.async_tile > 0 {
            format!("_a{}x{}", self.async_tile, self.stages)
        } else {
            String::new()
        };
        format!(
            "attn_{}{pages}_q{}_{kv}_{hd}_r{}w{}{pipe}",
            if self.paged { "paged" } else { "strided" },
            N[self.qt as usize],
            self.rows,
            self.nwarps
        )
    }

    /// The full source: defines, shared helpers, the variant hooks, the kernel template.
    pub fn source(&self, hooks: &str, variant_hash: u64) -> KernelSource {
        let defines = format!(
            "#define FK_QT {}\n#define FK_KT {}\n#define FK_VT {}\n#define FK_DK {}\n#define FK_DV {}\n\
             #define FK_VK {}\n#define FK_VV {}\n#define FK_ROWS {}\n#define FK_PAGED {}\n\
             #define FK_TILE {TILE}\n#define FK_NWARPS {}\n#define FK_ASYNC {}\n\
             #define FK_ASYNC_TILE {}\n#define FK_STAGES {}\n#define FK_PAGE_SHIFT {}\n",
            self.qt, self.kt, self.vt, self.dk, self.dv, self.vk, self.vv, self.rows, self.paged as u8, self.nwarps,
            (self.async_tile > 0 && self.mma.is_none()) as u8, self.async_tile.max(32), self.stages.max(2), self.page_shift
        );
        let m = self.mma.unwrap_or(MmaShape {
            m_tiles: 1,
            tile: 64,
            stages: 2,
            copy_threads: 0,
            l2_prefetch: 0,
            min_blocks: 1,
            wg: false,
            wg_s: 0,
        });
        let defines = format!(
            "{defines}#define FK_MMA {}\n#define FK_MMA_MT {}\n#define FK_MMA_TILE {}\n#define FK_MMA_STAGES {}\n\
             #define FK_MMA_TPR {}\n#define FK_MMA_L2 {}\n#define FK_MMA_MINB {}\n#define FK_WGMMA {}\n#define FK_WG_S {}\n",
            self.mma.is_some() as u8, m.m_tiles, m.tile, m.stages, m.copy_threads, m.l2_prefetch, m.min_blocks,
            m.wg as u8, m.wg_s
        );
        let common = COMMON.replace("#pragma once", "");
        KernelSource {
            name: format!("{}_v{:04x}", self.name(), variant_hash as u16),
            source: format!(
                "{defines}{common}\n{hooks}\n{ATTENTION}\n{ATTENTION_ASYNC}\n{ATTENTION_MMA}\n{ATTENTION_WGMMA}"
            ),
        }
    }
}

/// The kernel parameter block (`FkArgs` in attention.cu; same order, all 8-byte fields).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FkArgs {
    q: u64,
    k: u64,
    v: u64,
    part_o: u64,
    part_lse: u64,
    out: u64,
    lse: u64,
    step: u64,
    off: [u64; 10],
    cu_pages: u64,
    first_page: u64,
    pages: u64,
    q_tok_stride: i64,
    q_head_stride: i64,
    k_tok_stride: i64,
    k_head_stride: i64,
    v_tok_stride: i64,
    v_head_stride: i64,
    page_size: i64,
    num_kv_heads: i64,
    group: i64,
    has_sinks: i64,
    has_lse: i64,
    num_pages: i64,
    pages_len: i64,
    scale: f32,
    pad: f32,
}

/// The step buffer under construction: sections aligned to 16 bytes.
#[derive(Default)]
struct Step {
    bytes: Vec<u8>,
}

impl Step {
    fn push<T: bytemuck::Pod>(&mut self, xs: &[T]) -> u64 {
        while !self.bytes.len().is_multiple_of(16) {
            self.bytes.push(0);
        }
        let at = self.bytes.len();
        self.bytes.extend_from_slice(bytemuck::cast_slice(xs));
        if xs.is_empty() {
            self.bytes.extend_from_slice(&[0u8; 16]);
        }
        at as u64
    }
}

fn check_fits(arg: &'static str, need_elems: usize, dtype: DType, buf: &DeviceBuf) -> Result<()> {
    let need = need_elems
        .checked_mul(dtype.size())
        .ok_or_else(|| invalid(arg, "size overflows"))?;
    if need > buf.bytes() {
        return Err(invalid(
            arg,
            format!("needs {need} bytes, the buffer holds {}", buf.bytes()),
        ));
    }
    Ok(())
}

/// End (exclusive, elements) of the last row any sequence reads through strided addressing.
fn strided_end(
    lens: &SeqLens,
    base: &[usize],
    tokens: impl Fn(usize) -> usize,
    tok: usize,
    head: usize,
    heads: usize,
    dim: usize,
) -> Result<usize> {
    let mut end = 0usize;
    for (s, &b) in base.iter().enumerate().take(lens.num_seqs()) {
        let n = tokens(s);
        if n == 0 {
            continue;
        }
        let e = b
            .checked_add((n - 1).saturating_mul(tok))
            .and_then(|x| x.checked_add((heads - 1).saturating_mul(head)))
            .and_then(|x| x.checked_add(dim))
            .ok_or_else(|| invalid("q", "offsets overflow"))?;
        end = end.max(e);
    }
    Ok(end)
}

/// Everything checked before any launch or allocation of size.
fn validate(c: &AttnCall) -> Result<()> {
    let (hq, hkv, dk, dv) = (c.num_q_heads, c.num_kv_heads, c.head_dim, c.head_dim_v);
    if hq == 0 || hkv == 0 || hq % hkv != 0 {
        return Err(invalid(
            "k",
            format!("{hq} query heads are not a positive multiple of {hkv} kv heads"),
        ));
    }
    for (arg, d) in [("k", dk), ("v", dv)] {
        if d == 0 || d > MAX_HEAD_DIM {
            return Err(invalid(
                arg,
                format!("head size {d} is outside 1..={MAX_HEAD_DIM}"),
            ));
        }
    }
    if !c.scale.is_finite() {
        return Err(invalid("scale", "must be finite"));
    }
    let n = c.lens.num_seqs();
    if c.q.seq_base.len() != n {
        return Err(invalid(
            "q",
            format!("{} sequence bases for {n} sequences", c.q.seq_base.len()),
        ));
    }
    for (arg, s) in [("k_scales", c.k_scales), ("v_scales", c.v_scales)] {
        if !s.is_empty() && s.len() != hkv {
            return Err(invalid(
                arg,
                format!("{} scales for {hkv} kv heads", s.len()),
            ));
        }
    }
    if let Some(s) = &c.variant.sinks {
        if s.len() != hq {
            return Err(invalid(
                "sinks",
                format!("{} sink logits for {hq} query heads", s.len()),
            ));
        }
    }
    let q_end = strided_end(
        c.lens,
        c.q.seq_base,
        |s| c.lens.q_len(s),
        c.q.tok_stride,
        c.q.head_stride,
        hq,
        dk,
    )?;
    check_fits("q", q_end, c.q.dtype, c.q.buf)?;
    let total_q = c.lens.total_q();
    check_fits("out", total_q * hq * dv, DType::F32, c.out)?;
    if let Some(l) = c.lse {
        check_fits("lse", total_q * hq, DType::F32, l)?;
    }
    match &c.kv {
        KvInput::Strided { k, v } => {
            for (arg, o, d) in [("k", k, dk), ("v", v, dv)] {
                if o.seq_base.len() != n {
                    return Err(invalid(
                        arg,
                        format!("{} sequence bases for {n} sequences", o.seq_base.len()),
                    ));
                }
                let end = strided_end(
                    c.lens,
                    o.seq_base,
                    |s| c.lens.kv_len(s),
                    o.tok_stride,
                    o.head_stride,
                    hkv,
                    d,
                )?;
                check_fits(arg, end, o.dtype, o.buf)?;
            }
        }
        KvInput::Paged {
            k,
            v,
            k_dtype,
            v_dtype,
            page_size,
            num_pages,
            cu_pages,
            first_page,
            page_indices,
            device_tables,
        } => {
            let ps = *page_size;
            if ps == 0 || ps > 256 {
                return Err(invalid("page_size", format!("{ps} is outside 1..=256")));
            }
            check_fits("k", num_pages * ps * hkv * dk, *k_dtype, k)?;
            check_fits("v", num_pages * ps * hkv * dv, *v_dtype, v)?;
            if let Some(t) = device_tables {
                // Entries are checked by the page-table manager that built them; the kernel
                // clamps every lookup into the tables and the pool.
                let any_kv = (0..n).any(|s| c.lens.kv_len(s) > 0);
                if any_kv && (t.page_indices_len == 0 || *num_pages == 0) {
                    return Err(invalid("page_indices", "no pages for a non-empty sequence"));
                }
                return Ok(());
            }
            flexkern::kv_cache::tables::check_readable(
                cu_pages,
                first_page,
                page_indices,
                n,
                |s| c.lens.kv_len(s) as u64,
                *num_pages,
                ps,
            )?;
        }
    }
    Ok(())
}

/// The last call's plan, kept for the next call that differs only in its buffers (the model's
/// layers within one step: same lengths, layout, variant and page tables, each layer its own
/// K/V): that call skips planning, code lookup and the step upload, as FlashInfer's plan-once,
/// run-per-layer does. Reuse is safe on the one stream: the step is read-only but for the
/// arrival counters, which the kernel resets.
#[derive(Default)]
pub struct PlanMemo {
    last: std::sync::Mutex<Option<(u64, Prepared)>>,
    /// Calls that reused the last plan.
    pub hits: std::sync::atomic::AtomicUsize,
}

/// `attention` through `memo`.
/// `FLEXKERN_CUDA_PLAN_MEMO=0` plans every call afresh (A/B runs).
pub fn attention_memo(dev: &Arc<Device>, c: &AttnCall, memo: &PlanMemo) -> Result<()> {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *OFF.get_or_init(|| std::env::var("FLEXKERN_CUDA_PLAN_MEMO").is_ok_and(|v| v == "0")) {
        return attention(dev, c);
    }
    validate(c)?;
    let hooks = codegen::generate(c.variant);
    let key = plan_key(c, &hooks);
    // The plan is taken out while in use, so the lock is never held across planning (other
    // threads' compiles must not queue behind it); a thread finding it out plans its own.
    let last = memo.last.lock().expect("plan memo lock").take();
    let p = match last {
        Some((k, mut p)) if k == key => {
            p.rebind(c);
            memo.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            p
        }
        _ => match prepare_with(dev, c, hooks)? {
            Some(p) => p,
            None => return Ok(()),
        },
    };
    let launched = p.launch();
    *memo.last.lock().expect("plan memo lock") = Some((key, p));
    launched
}

/// Everything a plan and its step buffer depend on: all of the call but its buffers' addresses.
fn plan_key(c: &AttnCall, hooks: &codegen::VariantCode) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let lens = c.lens;
    for s in 0..lens.num_seqs() {
        (lens.q_start(s), lens.q_len(s), lens.kv_len(s)).hash(&mut h);
    }
    (c.num_q_heads, c.num_kv_heads, c.head_dim, c.head_dim_v).hash(&mut h);
    c.scale.to_bits().hash(&mut h);
    hooks.key.hash(&mut h);
    hooks.params.ints.hash(&mut h);
    hooks
        .params
        .floats
        .iter()
        .for_each(|f| f.to_bits().hash(&mut h));
    for cd in &hooks.params.captures {
        match cd {
            codegen::CaptureData::Int(v) => v.hash(&mut h),
            codegen::CaptureData::Float(v) => v.iter().for_each(|f| f.to_bits().hash(&mut h)),
        }
    }
    if let Some(sk) = &c.variant.sinks {
        sk.iter().for_each(|f| f.to_bits().hash(&mut h));
    }
    (c.q.dtype, c.q.seq_base, c.q.tok_stride, c.q.head_stride).hash(&mut h);
    match &c.kv {
        KvInput::Strided { k, v } => {
            for o in [k, v] {
                (o.dtype, o.seq_base, o.tok_stride, o.head_stride).hash(&mut h);
            }
        }
        KvInput::Paged {
            k_dtype,
            v_dtype,
            page_size,
            num_pages,
            cu_pages,
            first_page,
            page_indices,
            device_tables,
            ..
        } => {
            (k_dtype, v_dtype, page_size, num_pages).hash(&mut h);
            (cu_pages, first_page, page_indices).hash(&mut h);
            device_tables.map(|t| t.page_indices_len).hash(&mut h);
        }
    }
    c.k_scales
        .iter()
        .chain(c.v_scales)
        .for_each(|f| f.to_bits().hash(&mut h));
    (c.lse.is_some(), c.deterministic).hash(&mut h);
    h.finish()
}

/// Runs one attention call on `dev`'s stream (asynchronous: synchronize before reading `out`).
pub fn attention(dev: &Arc<Device>, c: &AttnCall) -> Result<()> {
    match prepare(dev, c)? {
        Some(p) => p.launch(),
        None => Ok(()),
    }
}

/// A call whose plan is uploaded and workspace allocated: `launch` only queues its kernels
/// (attention, then the merge unless the attention kernel joins the partitions itself), so it
/// can be captured in a CUDA graph and replayed.
pub struct Prepared {
    dev: Arc<Device>,
    _module: Arc<crate::runtime::compile::Module>,
    f_attn: cudarc::driver::sys::CUfunction,
    f_merge: cudarc::driver::sys::CUfunction,
    /// The attention kernel joins the partitions itself (no merge launch).
    self_join: bool,
    args: FkArgs,
    smem_attn: u32,
    grid_attn: (u32, u32, u32),
    grid_merge: (u32, u32, u32),
    _bufs: [DeviceBuf; 3],
    pub config: KernelConfig,
    pub plan: WorkPlan,
}

// SAFETY: the function handles are context-global (any thread may launch them with the
// context current, as `launch` makes it); the rest is plain data and owned buffers.
unsafe impl Send for Prepared {}

impl Prepared {
    /// (registers per thread, local-memory bytes per thread) of the attention kernel: spills show
    /// as local memory.
    pub fn kernel_resources(&self) -> Result<(i32, i32)> {
        self.dev.bind()?;
        Ok((
            function_regs(self.f_attn)?,
            function_local_bytes(self.f_attn)?,
        ))
    }

    /// Points this plan at `c`'s buffers (a call with the same `plan_key`).
    fn rebind(&mut self, c: &AttnCall) {
        let a = &mut self.args;
        a.q = c.q.buf.ptr();
        a.out = c.out.ptr();
        a.lse = c.lse.map_or(0, |l| l.ptr());
        match &c.kv {
            KvInput::Strided { k, v } => (a.k, a.v) = (k.buf.ptr(), v.buf.ptr()),
            KvInput::Paged {
                k,
                v,
                device_tables,
                ..
            } => {
                (a.k, a.v) = (k.ptr(), v.ptr());
                if let Some(t) = device_tables {
                    (a.cu_pages, a.first_page, a.pages) =
                        (t.cu_pages, t.first_page, t.page_indices);
                }
            }
        }
    }

    pub fn launch(&self) -> Result<()> {
        let mut args = self.args;
        let threads = self.config.threads() as u32;
        launch(
            &self.dev,
            self.f_attn,
            self.grid_attn,
            threads,
            self.smem_attn,
            &mut args,
        )?;
        if self.self_join {
            return Ok(()); // the tensor-core kernel joined the partitions
        }
        launch(
            &self.dev,
            self.f_merge,
            self.grid_merge,
            MERGE_THREADS,
            0,
            &mut args,
        )
    }
}

/// Validates, plans, compiles (or finds) the module, and uploads the step buffer; `None` when
/// there is nothing to compute.
pub fn prepare(dev: &Arc<Device>, c: &AttnCall) -> Result<Option<Prepared>> {
    validate(c)?;
    prepare_with(dev, c, codegen::generate(c.variant))
}

fn prepare_with(
    dev: &Arc<Device>,
    c: &AttnCall,
    hooks: codegen::VariantCode,
) -> Result<Option<Prepared>> {
    let (hq, hkv, dk, dv) = (c.num_q_heads, c.num_kv_heads, c.head_dim, c.head_dim_v);
    let group = hq / hkv;
    let lens = c.lens;
    let n = lens.num_seqs();
    let max_q = (0..n).map(|s| lens.q_len(s)).max().unwrap_or(0);
    let (mut cfg, k_dtype, v_dtype) = config(c, 0)?;
    cfg.nwarps = warps();
    // The tensor-core path where it applies and its stages fit in shared memory.
    let mma = mma_shape(&MmaQuery {
        qt: cfg.qt,
        kt: cfg.kt,
        vt: cfg.vt,
        dk,
        dv,
        rows_aligned: cfg.vk * k_dtype.size() == 16 && cfg.vv * v_dtype.size() == 16,
        rows_adjacent: match &c.kv {
            KvInput::Strided { k, v } => k.tok_stride == dk && v.tok_stride == dv,
            KvInput::Paged { .. } => false,
        },
        q_rows: group * max_q.max(1),
        compute_capability: dev.props.compute_capability,
        warps: cfg.nwarps,
        k_size: k_dtype.size(),
        v_size: v_dtype.size(),
        smem_optin: dev.props.smem_per_block_optin,
        tuned: dev.tuned(),
    });
    let rows = mma.map_or_else(|| rows_per_block(group, max_q, dk.max(dv)), |(r, _)| r);
    cfg.rows = rows;
    cfg.mma = mma.map(|(_, m)| m);
    if cfg.mma.is_some_and(|m| m.wg) {
        cfg.nwarps = crate::plan::WG_WARPS;
    }
    if lens.total_q() == 0 {
        return Ok(None);
    }
    let (tile, stages) = if cfg.mma.is_some() {
        (0, 0)
    } else {
        async_shape()
    };
    // The cp.async path: whole 16-byte vectors, head sizes up to 256, and at most one row per
    // lane group after the score reduction (rows <= lanes per key).
    let lanes_per_key = (dk / cfg.vk.max(1)).next_power_of_two().min(32);
    if tile > 0
        && cfg.vk * k_dtype.size() == 16
        && cfg.vv * v_dtype.size() == 16
        && dk.max(dv) <= 256
        && rows <= lanes_per_key
        && tile % (cfg.nwarps * 32 / lanes_per_key) == 0
        && tile % (cfg.nwarps * 32 / (dv / cfg.vv.max(1)).next_power_of_two().min(32)) == 0
    {
        (cfg.async_tile, cfg.stages) = (tile, stages);
        // Leave room for the static shared memory (scores, running max / sum).
        let limit = dev
            .props
            .smem_per_block_optin
            .saturating_sub(rows * (tile + 3) * 4 + 1024);
        if cfg.stage_bytes(k_dtype, v_dtype) > limit {
            (cfg.async_tile, cfg.stages) = (0, 0);
        }
    }
    if cfg.async_tile == 0 && cfg.mma.is_none() {
        cfg.nwarps = 4; // the register path's tile of 128 keys assumes 4 warps
    }
    let (module, f_attn, per_sm, smem) = loop {
        let (module, f, per_sm, smem) = load_kernel(dev, &cfg, &hooks, k_dtype, v_dtype)?;
        match cfg.mma {
            // A variant whose hooks push the Hopper kernel's consumers past their registers:
            // 64-key tiles halve the score registers (checked once; the module is cached).
            Some(m) if m.wg && m.tile > 64 && function_local_bytes(f)? > 0 => {
                cfg.mma = Some(MmaShape { tile: 64, ..m });
            }
            _ => break (module, f, per_sm, smem),
        }
    };
    let smem_attn = smem as u32;
    let mut plan = plan_work(
        lens,
        group,
        hkv,
        rows,
        dev.props.sms * per_sm,
        c.deterministic,
    );
    crate::plan::classify_items(
        &mut plan,
        lens,
        group,
        hq,
        c.variant.mask.as_ref().map(|m| m.expr()),
        cfg.mma.map_or(TILE, |m| m.tile),
    );
    crate::plan::longest_first(&mut plan);
    if plan.items.is_empty() {
        return Ok(None);
    }
    let f_merge = module.function("fk_merge")?;

    // The step buffer: plan, per-sequence records, variant parameters and captures, scales,
    // sinks, page tables. One allocation, one upload.
    let mut step = Step::default();
    let mut args = FkArgs::default();
    args.off[0] = step.push(&plan.items);
    args.off[1] = step.push(&plan.tiles);
    let seqs = seq_records(c);
    args.off[2] = step.push(&seqs);
    let params_at = step.push(&vec![0u8; hooks.params.bytes()]);
    args.off[3] = params_at;
    let cap_at: Vec<u64> = hooks
        .params
        .captures
        .iter()
        .map(|cd| match cd {
            codegen::CaptureData::Int(v) => step.push(v),
            codegen::CaptureData::Float(v) => step.push(v),
        })
        .collect();
    let ones = vec![1f32; hkv];
    args.off[4] = step.push(if c.k_scales.is_empty() {
        &ones
    } else {
        c.k_scales
    });
    args.off[5] = step.push(if c.v_scales.is_empty() {
        &ones
    } else {
        c.v_scales
    });
    args.off[6] = step.push(c.variant.sinks.as_deref().map_or(&[][..], |s| s.as_slice()));
    args.off[9] = step.push(&plan.full);
    let max_parts = plan.tiles.iter().map(|t| t[3]).max().unwrap_or(0);
    let self_join = cfg.mma.is_some() && max_parts <= SELF_JOIN_PARTS;
    if self_join {
        // Each item's row tile and one zeroed arrival counter per (row tile, KV head): the
        // tensor-core kernel's last block of a row tile joins it.
        let mut item_tiles = vec![0u32; plan.items.len()];
        for (i, t) in plan.tiles.iter().enumerate() {
            item_tiles[t[2] as usize..(t[2] + t[3]) as usize].fill(i as u32);
        }
        args.off[7] = step.push(&item_tiles);
        args.off[8] = step.push(&vec![0u32; plan.tiles.len() * hkv]);
    }
    let mut host_tables = None;
    if let KvInput::Paged {
        cu_pages,
        first_page,
        page_indices,
        device_tables,
        num_pages,
        ..
    } = &c.kv
    {
        args.num_pages = *num_pages as i64;
        match device_tables {
            Some(t) => {
                (args.cu_pages, args.first_page, args.pages) =
                    (t.cu_pages, t.first_page, t.page_indices);
                args.pages_len = t.page_indices_len as i64;
            }
            None => {
                host_tables = Some((
                    step.push(cu_pages),
                    step.push(first_page),
                    step.push(page_indices),
                ));
                args.pages_len = page_indices.len() as i64;
            }
        }
    }
    let step_buf = dev.alloc(step.bytes.len())?;
    if let Some((a, b, d)) = host_tables {
        let base = step_buf.ptr();
        (args.cu_pages, args.first_page, args.pages) = (base + a, base + b, base + d);
    }
    let cap_ptrs: Vec<u64> = cap_at.iter().map(|&o| step_buf.ptr() + o).collect();
    write_params(
        &mut step.bytes,
        params_at as usize,
        &hooks.params,
        &cap_ptrs,
    );
    dev.write(&step_buf, 0, &step.bytes)?;

    let parts = plan.items.len() * hkv * rows;
    let part_o = dev.alloc(parts * dv * 4)?;
    let part_lse = dev.alloc(parts * 4)?;
    args.q = c.q.buf.ptr();
    args.part_o = part_o.ptr();
    args.part_lse = part_lse.ptr();
    args.out = c.out.ptr();
    args.lse = c.lse.map_or(0, |l| l.ptr());
    args.step = step_buf.ptr();
    args.q_tok_stride = c.q.tok_stride as i64;
    args.q_head_stride = c.q.head_stride as i64;
    args.num_kv_heads = hkv as i64;
    args.group = group as i64;
    args.has_sinks = c.variant.sinks.is_some() as i64;
    args.has_lse = c.lse.is_some() as i64;
    args.scale = c.scale;
    match &c.kv {
        KvInput::Strided { k, v } => {
            (args.k, args.v) = (k.buf.ptr(), v.buf.ptr());
            (args.k_tok_stride, args.k_head_stride) = (k.tok_stride as i64, k.head_stride as i64);
            (args.v_tok_stride, args.v_head_stride) = (v.tok_stride as i64, v.head_stride as i64);
        }
        KvInput::Paged {
            k, v, page_size, ..
        } => {
            (args.k, args.v) = (k.ptr(), v.ptr());
            args.page_size = *page_size as i64;
        }
    }
    let _ = (k_dtype, v_dtype);
    Ok(Some(Prepared {
        dev: dev.clone(),
        _module: module,
        f_attn,
        f_merge,
        self_join,
        args,
        smem_attn,
        grid_attn: (plan.items.len() as u32, hkv as u32, 1),
        grid_merge: (plan.tiles.len() as u32, hkv as u32, rows as u32),
        _bufs: [step_buf, part_o, part_lse],
        config: cfg,
        plan,
    }))
}

/// Compiles (or finds) `cfg`'s module and its attention kernel: (module, kernel, blocks per SM,
/// dynamic shared memory).
fn load_kernel(
    dev: &Arc<Device>,
    cfg: &KernelConfig,
    hooks: &codegen::VariantCode,
    k_dtype: DType,
    v_dtype: DType,
) -> Result<(
    Arc<crate::runtime::compile::Module>,
    cudarc::driver::sys::CUfunction,
    usize,
    usize,
)> {
    let module = dev.module_keyed(&format!("attention {cfg:?} {}", hooks.key), || {
        cfg.source(
            &hooks.source,
            flexkern::variant::lowered::fnv1a(hooks.key.as_bytes()),
        )
    })?;
    let (dk, dv) = (cfg.dk, cfg.dv);
    let dynamic = match &cfg.mma {
        Some(m) => Some((
            "fk_attention_mma",
            mma_smem(m, dk, dv, k_dtype.size(), v_dtype.size(), cfg.nwarps),
        )),
        None if cfg.async_tile > 0 => {
            Some(("fk_attention_async", cfg.stage_bytes(k_dtype, v_dtype)))
        }
        None => None,
    };
    let (name, smem) = dynamic.unwrap_or(("fk_attention", 0));
    dev.bind()?;
    let (f, per_sm) = module.kernel(name, cfg.threads() as u32, smem)?;
    if cfg.mma.is_some_and(|m| m.wg) {
        // setmaxnreg only moves registers within the block's launch allocation: the kernel's
        // budgets (40 x 128 + 232 x 256) need exactly 168 x 384, or the consumers would wait
        // for registers forever.
        let regs = function_regs(f)?;
        if regs != crate::plan::WG_LAUNCH_REGS {
            return Err(crate::error::invalid(
                "kernel",
                format!(
                    "{name} compiled to {regs} registers per thread, not the {} its register hand-over assumes (FLEXKERN_CUDA_WGMMA=0 runs the mma.sync kernel)",
                    crate::plan::WG_LAUNCH_REGS
                ),
            ));
        }
    }
    Ok((module, f, per_sm, smem))
}

/// Local memory per thread of a loaded kernel (spills show there).
fn function_local_bytes(f: cudarc::driver::sys::CUfunction) -> Result<i32> {
    use cudarc::driver::sys::CUfunction_attribute as A;
    // SAFETY: callers pass a handle of a module they hold loaded.
    unsafe {
        cudarc::driver::result::function::get_function_attribute(
            f,
            A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
        )
    }
    .map_err(|e| driver("cuFuncGetAttribute", e))
}

/// Registers per thread of a loaded kernel.
fn function_regs(f: cudarc::driver::sys::CUfunction) -> Result<i32> {
    use cudarc::driver::sys::CUfunction_attribute as A;
    // SAFETY: callers pass a handle of a module they hold loaded.
    unsafe {
        cudarc::driver::result::function::get_function_attribute(f, A::CU_FUNC_ATTRIBUTE_NUM_REGS)
    }
    .map_err(|e| driver("cuFuncGetAttribute", e))
}

fn launch(
    dev: &Device,
    f: cudarc::driver::sys::CUfunction,
    grid: (u32, u32, u32),
    threads: u32,
    smem: u32,
    args: &mut FkArgs,
) -> Result<()> {
    dev.bind()?;
    let mut params: [*mut c_void; 1] = [(args as *mut FkArgs).cast()];
    // SAFETY: `f` takes one `FkArgs` by value (same layout); every pointer in it was checked
    // against its buffer's size in `validate`, and the buffers outlive the stream's work.
    unsafe { launch_kernel(f, grid, (threads, 1, 1), smem, dev.stream(), &mut params) }
        .map_err(|e| driver("cuLaunchKernel", e))
}

fn config(c: &AttnCall, rows: usize) -> Result<(KernelConfig, DType, DType)> {
    let (dk, dv) = (c.head_dim, c.head_dim_v);
    let (kd, vd, paged, kx, vx): (DType, DType, bool, Vec<usize>, Vec<usize>) = match &c.kv {
        KvInput::Strided { k, v } => {
            let mut kx = vec![dk, k.tok_stride, k.head_stride];
            kx.extend_from_slice(k.seq_base);
            let mut vx = vec![dv, v.tok_stride, v.head_stride];
            vx.extend_from_slice(v.seq_base);
            (k.dtype, v.dtype, false, kx, vx)
        }
        KvInput::Paged {
            k_dtype, v_dtype, ..
        } => (*k_dtype, *v_dtype, true, vec![dk], vec![dv]),
    };
    let cfg = KernelConfig {
        qt: elem_code("q", c.q.dtype, false)?,
        kt: elem_code("k", kd, true)?,
        vt: elem_code("v", vd, true)?,
        dk,
        dv,
        vk: vec_width(kd.size(), &kx),
        vv: vec_width(vd.size(), &vx),
        rows,
        paged,
        async_tile: 0,
        stages: 0,
        mma: None,
        page_shift: match &c.kv {
            KvInput::Paged { page_size, .. } if page_size.is_power_of_two() => {
                page_size.trailing_zeros() as i32
            }
            _ => -1,
        },
        nwarps: 4,
    };
    Ok((cfg, kd, vd))
}

fn seq_records(c: &AttnCall) -> Vec<i64> {
    let lens = c.lens;
    let mut out = Vec::with_capacity(8 * lens.num_seqs());
    for s in 0..lens.num_seqs() {
        let (kb, vb) = match &c.kv {
            KvInput::Strided { k, v } => (k.seq_base[s], v.seq_base[s]),
            KvInput::Paged { .. } => (0, 0),
        };
        out.extend_from_slice(&[
            lens.q_start(s) as i64,
            lens.q_len(s) as i64,
            lens.kv_len(s) as i64,
            c.q.seq_base[s] as i64,
            kb as i64,
            vb as i64,
            lens.q_pos0(s),
            0,
        ]);
    }
    out
}

fn write_params(bytes: &mut [u8], at: usize, p: &ParamLayout, cap_ptrs: &[u64]) {
    let enc = p.encode(cap_ptrs);
    bytes[at..at + enc.len()].copy_from_slice(&enc);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_width_follows_alignment() {
        assert_eq!(vec_width(2, &[128, 1024, 128]), 8);
        assert_eq!(vec_width(4, &[128]), 4);
        assert_eq!(vec_width(1, &[128]), 16);
        assert_eq!(vec_width(2, &[80, 1280]), 8);
        assert_eq!(vec_width(2, &[1]), 1);
        assert_eq!(vec_width(4, &[6]), 2);
    }

    /// Compiles a spread of kernel configurations with NVRTC for sm_90a when libnvrtc is
    /// loadable (no GPU needed); says so and checks nothing more when it is not.
    #[test]
    fn kernels_compile_with_nvrtc() {
        if !crate::runtime::nvrtc_present() {
            eprintln!("kernels_compile_with_nvrtc: libnvrtc not found, compile check skipped");
            return;
        }
        use flexkern::builtins::*;
        let variants = [
            flexkern::Variant::full(),
            flexkern::Variant::full()
                .mask(causal())
                .mask(sliding_window(64)),
            flexkern::Variant::full()
                .mask(tree(vec![1, 3]))
                .score(softcap(20.0))
                .score(alibi(alibi_slopes(4))),
        ];
        let cfgs = [
            (2, 2, 2, 128, 128, 8, 8, 4, true),
            (0, 0, 0, 64, 64, 4, 4, 8, false),
            (1, 3, 3, 128, 128, 1, 16, 4, true),
            (2, 4, 5, 256, 256, 8, 16, 4, true),
            (0, 0, 0, 1, 1, 1, 1, 2, false),
            (2, 2, 2, 576, 512, 8, 8, 2, false),
            (0, 0, 0, 80, 80, 4, 4, 8, false),
            (1, 1, 1, 192, 128, 8, 8, 4, false),
        ];
        for (i, &(qt, kt, vt, dk, dv, vk, vv, rows, paged)) in cfgs.iter().enumerate() {
            let v = variants[i % variants.len()].compile().unwrap();
            let hooks = codegen::generate(&v);
            let sz = [4, 2, 2, 1, 1, 1];
            let fast =
                vk * sz[kt as usize] == 16 && vv * sz[vt as usize] == 16 && dk.max(dv) <= 256;
            let (async_tile, stages) = if fast { (32, 4) } else { (0, 0) };
            let k = KernelConfig {
                qt,
                kt,
                vt,
                dk,
                dv,
                vk,
                vv,
                rows,
                paged,
                async_tile,
                stages,
                mma: None,
                page_shift: if paged { 4 } else { -1 },
                nwarps: 4,
            };
            let src = k.source(&hooks.source, 0);
            let t = std::time::Instant::now();
            let bin = crate::runtime::compile::compile_for(&src, "sm_90a")
                .unwrap_or_else(|e| panic!("{}: {e}", src.name));
            eprintln!(
                "{}: {} bytes in {:.0} ms",
                src.name,
                bin.len(),
                t.elapsed().as_secs_f64() * 1e3
            );
            assert!(!bin.is_empty());
        }
        let kv = KernelSource {
            name: "kv_write".into(),
            source: format!(
                "{}\n{}",
                COMMON.replace("#pragma once", ""),
                include_str!("../kernels/kv_write.cu")
            ),
        };
        crate::runtime::compile::compile_for(&kv, "sm_90a").expect("kv_write compiles");
    }

    /// The tensor-core kernel compiles for sm_90a in the shapes the planner picks (decode with a
    /// key split, prefill with an m-tile per warp; 2-byte and 1-byte K/V; Dk != Dv; a head size
    /// of an odd number of k16 steps) without spills or a stack frame. Skipped without libnvrtc.
    #[test]
    fn tensor_core_kernels_compile_without_spills() {
        if !crate::runtime::nvrtc_present() {
            eprintln!("tensor_core_kernels_compile_without_spills: libnvrtc not found, skipped");
            return;
        }
        use flexkern::builtins::*;
        let variants = [
            flexkern::Variant::full(),
            flexkern::Variant::full()
                .mask(causal())
                .score(softcap(30.0)),
            flexkern::Variant::full()
                .mask(document((0..4096).map(|i| i / 700).collect()))
                .mask(causal())
                .score(alibi(alibi_slopes(8))),
        ];
        // (qt, kt, vt, dk, dv, q_rows, paged)
        let cases = [
            (2, 2, 2, 128, 128, 4, true),
            (1, 1, 1, 64, 64, 128, false),
            (2, 2, 2, 128, 128, 128, false),
            (2, 3, 3, 128, 128, 16, true),
            (1, 5, 4, 256, 256, 64, false),
            (1, 1, 1, 192, 128, 32, false),
            (2, 2, 2, 80, 80, 8, true),
            (2, 2, 2, 256, 256, 4, true),
            // The Hopper kernel: paged, Dk != Dv, f16.
            (2, 2, 2, 128, 128, 512, true),
            (2, 2, 2, 128, 64, 256, false),
            (1, 1, 1, 64, 128, 256, true),
        ];
        for (i, &(qt, kt, vt, dk, dv, q_rows, paged)) in cases.iter().enumerate() {
            let (rows, m) = mma_shape(&MmaQuery {
                qt,
                kt,
                vt,
                dk,
                dv,
                rows_aligned: true,
                rows_adjacent: !paged,
                q_rows,
                compute_capability: (9, 0),
                warps: 4,
                k_size: [4, 2, 2, 1, 1, 1][kt as usize],
                v_size: [4, 2, 2, 1, 1, 1][vt as usize],
                smem_optin: 227 * 1024,
                tuned: Default::default(),
            })
            .expect("the tensor-core path applies");
            let sz = [4, 2, 2, 1, 1, 1];
            let k = KernelConfig {
                qt,
                kt,
                vt,
                dk,
                dv,
                vk: 16 / sz[kt as usize],
                vv: 16 / sz[vt as usize],
                rows,
                paged,
                async_tile: 0,
                stages: 0,
                mma: Some(m),
                page_shift: if paged { 4 } else { -1 },
                nwarps: if m.wg { crate::plan::WG_WARPS } else { 4 },
            };
            assert_eq!(
                m.wg,
                q_rows > 64
                    && kt == qt
                    && vt == qt
                    && dk.max(dv) <= 128
                    && dk % 64 == 0
                    && dv % 64 == 0
            );
            // The Hopper kernel with every variant: 128-key tiles, or 64 where the hooks spill
            // (as `prepare` falls back); the others with one variant each.
            let picked: Vec<&flexkern::Variant> = if m.wg {
                variants.iter().collect()
            } else {
                vec![&variants[i % variants.len()]]
            };
            // Each of the Hopper kernel's Q modes.
            let modes: Vec<KernelConfig> = if m.wg {
                (0..3)
                    .map(|wg_s| KernelConfig {
                        mma: Some(MmaShape { wg_s, ..m }),
                        ..k.clone()
                    })
                    .collect()
            } else {
                vec![k.clone()]
            };
            for (v, k) in picked
                .iter()
                .flat_map(|v| modes.iter().map(move |k| (v, k)))
            {
                let m = k.mma.unwrap();
                let v = v.compile().unwrap();
                let hooks = codegen::generate(&v).source;
                let compile = |k: &KernelConfig| {
                    let src = k.source(&hooks, 0);
                    let (_, log) = crate::runtime::compile::compile_verbose(&src, "sm_90a")
                        .unwrap_or_else(|e| panic!("{}: {e}", src.name));
                    let (regs, spills, stack) = crate::runtime::compile::ptxas_resources(&log);
                    eprintln!(
                        "{}: {regs} registers, {spills} spill bytes, {stack} stack",
                        src.name
                    );
                    // ptxas serializes wgmma it cannot prove safe to pipeline, and says so.
                    assert!(!log.contains("serialized"), "{}: {log}", src.name);
                    (regs, spills + stack, src.name, log)
                };
                let (mut regs, mut spilled, mut name, mut log) = compile(k);
                if m.wg && spilled > 0 {
                    let narrow = KernelConfig {
                        mma: Some(MmaShape { tile: 64, ..m }),
                        ..k.clone()
                    };
                    (regs, spilled, name, log) = compile(&narrow);
                }
                assert_eq!(spilled, 0, "{name}: {log}");
                if m.wg {
                    assert_eq!(regs as i32, crate::plan::WG_LAUNCH_REGS, "{name}");
                }
            }
        }
    }

    #[test]
    fn module_names_are_readable() {
        let k = KernelConfig {
            qt: 2,
            kt: 2,
            vt: 2,
            dk: 128,
            dv: 128,
            vk: 8,
            vv: 8,
            rows: 4,
            paged: true,
            async_tile: 32,
            stages: 4,
            mma: None,
            page_shift: 4,
            nwarps: 4,
        };
        assert_eq!(k.name(), "attn_paged16_qbf16_bf16_hd128_r4w4_a32x4");
        let s = k.source("/*hooks*/", 0xabcd);
        assert!(s.name.ends_with("_vabcd"));
        assert!(s.source.contains("#define FK_DK 128") && s.source.contains("fk_attention"));
    }
}
