//! Attention on the GPU: the call, planning, the step buffer (plan + page tables + variant
//! parameters in one upload), the attention launch and the merge launch. The kernel choice and
//! its source are in `kernel.rs`, the checks before any launch in `validate.rs`, plan reuse
//! across a step's layers in `memo.rs`.

use crate::codegen::{self, ParamLayout};
use crate::device_struct::device_struct;
use crate::error::{driver, invalid, Result};
use crate::plan::{
    choose_groups, mma_shape, page_window, plan_work, rows_per_block, two_groups, MmaQuery,
    MmaShape, WorkPlan, TILE,
};
use crate::runtime::{Device, DeviceBuf};
use cudarc::driver::sys::CUtensorMap;
use flexkern::attention::problem::{SeqLens, MAX_HEAD_DIM};
use flexkern::variant::CompiledVariant;
use flexkern::DType;
use std::ffi::c_void;
use std::sync::Arc;

mod kernel;
mod memo;
mod nodes;
#[cfg(test)]
mod tests;
mod tma;
pub mod trace;
mod validate;

pub use kernel::{async_shape, warps, KernelConfig};
use kernel::{config, function_local_bytes, function_regs, load_kernel, wg_spill_allowance};
pub use memo::{attention_memo, PlanMemo};
pub use nodes::{NodeParams, RecordedNode};
use validate::validate;

/// Most partitions per row tile that the tensor-core kernel joins itself (its last block of
/// the row tile, serially); more go to the merge kernel (B1 x 128k: 49 partitions per row
/// tile took 15 % longer joined in-kernel on an H100).
const SELF_JOIN_PARTS: u32 = 4;
/// Threads of the merge kernel (`FK_MERGE_WARPS` warps).
const MERGE_THREADS: u32 = 256;

/// A strided operand: element (seq, token i, head h, d) at
/// `seq_base[seq] + i * tok_stride + h * head_stride + d`. The buffer type is the device's;
/// the plan key's tests put stand-ins there (a plan never reads it).
pub struct Operand<'a, B = DeviceBuf> {
    pub buf: &'a B,
    pub dtype: DType,
    pub seq_base: &'a [usize],
    pub tok_stride: usize,
    pub head_stride: usize,
}
/// Q.
pub type QInput<'a, B = DeviceBuf> = Operand<'a, B>;
/// One strided K or V.
pub type KvOperand<'a, B = DeviceBuf> = Operand<'a, B>;

pub enum KvInput<'a, B = DeviceBuf> {
    Strided {
        k: KvOperand<'a, B>,
        v: KvOperand<'a, B>,
    },
    Paged(PagedKv<'a, B>),
}

/// Paged K/V: pools `[num_pages, page_size, Hkv, D]`; sequence s owns
/// `page_indices[cu_pages[s]..cu_pages[s + 1]]`, the first of them logical page `first_page[s]`.
pub struct PagedKv<'a, B = DeviceBuf> {
    pub k: &'a B,
    pub v: &'a B,
    pub k_dtype: DType,
    pub v_dtype: DType,
    /// Tokens a page, 1 to 256; a page's bytes (tokens x kv heads x the wider row) stay under
    /// 4 GiB.
    pub page_size: usize,
    pub num_pages: usize,
    pub cu_pages: &'a [u32],
    pub first_page: &'a [u32],
    pub page_indices: &'a [u32],
    /// Page tables already on the device (the backend trait's U32 slices): then the host
    /// slices above are empty and unused.
    pub device_tables: Option<DeviceTables>,
}

// By hand: derived, they would ask B for Clone and Copy (only references to it are held).
impl<B> Clone for PagedKv<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for PagedKv<'_, B> {}

/// Device addresses of page tables: `cu_pages` (n + 1), `first_page` (n), `page_indices`.
#[derive(Clone, Copy, Debug)]
pub struct DeviceTables {
    pub cu_pages: u64,
    pub first_page: u64,
    pub page_indices: u64,
    pub page_indices_len: usize,
}

/// One attention call. `out` is f32 `[total_q, Hq, Dv]`, `lse` f32 `[total_q, Hq]`.
pub struct AttnCall<'a, B = DeviceBuf> {
    pub lens: &'a SeqLens,
    pub num_q_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    pub scale: f32,
    pub variant: &'a CompiledVariant,
    pub q: QInput<'a, B>,
    pub kv: KvInput<'a, B>,
    /// Per-kv-head dequantization scales (empty: 1.0).
    pub k_scales: &'a [f32],
    pub v_scales: &'a [f32],
    pub out: &'a B,
    pub lse: Option<&'a B>,
    pub deterministic: bool,
}

device_struct! {
    /// The attention kernels' parameter block (declared into each module's source).
    pub struct FkArgs {
        q: u64 => "const u8*",
        k: u64 => "const u8*",
        v: u64 => "const u8*",
        /// [items][Hkv][ROWS][DV]
        part_o: u64 => "float*",
        /// [items][Hkv][ROWS]
        part_lse: u64 => "float*",
        /// [tokens][Hq][DV]
        out: u64 => "float*",
        /// [tokens][Hq]
        lse: u64 => "float*",
        /// The uploaded plan; the offsets below are its sections.
        step: u64 => "const u8*",
        off_items: u64 => "u64",
        off_tiles: u64 => "u64",
        off_seqs: u64 => "u64",
        off_params: u64 => "u64",
        off_kscale: u64 => "u64",
        off_vscale: u64 => "u64",
        off_sinks: u64 => "u64",
        /// Each item's row tile and arrival counters (zeroed) when the tensor-core kernel joins
        /// the partitions itself (off_counters 0: the merge kernel does).
        off_item_tiles: u64 => "u64",
        off_counters: u64 => "u64",
        /// Per item, the keys [x, y) the mask keeps for every row (tensor-core path).
        off_item_full: u64 => "u64",
        /// Device addresses of the page tables (paged): the step buffer's copies for host
        /// tables, the caller's buffers for device ones.
        cu_pages: u64 => "const u32*",
        first_page: u64 => "const u32*",
        pages: u64 => "const u32*",
        q_tok_stride: i64 => "i64",
        q_head_stride: i64 => "i64",
        k_tok_stride: i64 => "i64",
        k_head_stride: i64 => "i64",
        v_tok_stride: i64 => "i64",
        v_head_stride: i64 => "i64",
        page_size: i64 => "i64",
        num_kv_heads: i64 => "i64",
        group: i64 => "i64",
        has_sinks: i64 => "i64",
        has_lse: i64 => "i64",
        num_pages: i64 => "i64",
        pages_len: i64 => "i64",
        scale: f32 => "float",
        pad: f32 => "float",
    }
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
    /// The attention kernel joins the partitions itself (tensor-core self-join, or every row
    /// tile has one partition and there are no sinks): no merge launch.
    self_join: bool,
    args: FkArgs,
    smem_attn: u32,
    grid_attn: (u32, u32, u32),
    grid_merge: (u32, u32, u32),
    _bufs: [DeviceBuf; 3],
    /// K and V TMA maps of the Hopper kernel built with FK_WTMA.
    tmaps: Option<[CUtensorMap; 2]>,
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

    /// The block timeline of the last launch (after a synchronize), where the kernel was built
    /// with `FLEXKERN_CUDA_TRACE=1`.
    pub fn block_trace(&self) -> Result<Option<trace::Timeline>> {
        if !self.config.trace {
            return Ok(None);
        }
        self.dev.synchronize()?;
        let (ptr, bytes) = self._module.global("fk_trace")?;
        let mut raw = vec![0u64; bytes / 8];
        self.dev.bind()?;
        // SAFETY: `raw` holds the variable's `bytes`; the copy completes before the synchronize
        // returns.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut raw[..], ptr, self.dev.stream()) }
            .map_err(|e| crate::error::driver("cuMemcpyDtoHAsync", e))?;
        self.dev.synchronize()?;
        let mut marks = Vec::new();
        if let Ok((ptr, bytes)) = self._module.global("fk_trace_ph") {
            marks = vec![0u32; bytes / 4];
            // SAFETY: as above, `marks` holds the variable's `bytes`.
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(&mut marks[..], ptr, self.dev.stream())
            }
            .map_err(|e| crate::error::driver("cuMemcpyDtoHAsync", e))?;
            self.dev.synchronize()?;
        }
        let g = |(x, y, z): (u32, u32, u32)| (x * y * z) as usize;
        let merge = if self.self_join {
            0
        } else {
            g(self.grid_merge)
        };
        Ok(Some(
            trace::parse(&raw, g(self.grid_attn), merge).with_marks(&marks),
        ))
    }

    /// Points this plan at `c`'s buffers (a call with the same `plan_key`); false where its TMA
    /// maps cannot address them (the caller plans again).
    fn rebind(&mut self, c: &AttnCall) -> bool {
        if self.tmaps.is_some() {
            let tile = self.config.mma.map_or(0, |m| m.tile);
            let dims = (self.config.dk, self.config.dv);
            match tma::maps(&c.kv, self.grid_attn.1 as usize, dims, tile) {
                Ok(m) => self.tmaps = Some(m),
                Err(_) => return false,
            }
        }
        let a = &mut self.args;
        a.q = c.q.buf.ptr();
        a.out = c.out.ptr();
        a.lse = c.lse.map_or(0, |l| l.ptr());
        match &c.kv {
            KvInput::Strided { k, v } => (a.k, a.v) = (k.buf.ptr(), v.buf.ptr()),
            KvInput::Paged(PagedKv {
                k,
                v,
                device_tables,
                ..
            }) => {
                (a.k, a.v) = (k.ptr(), v.ptr());
                if let Some(t) = device_tables {
                    (a.cu_pages, a.first_page, a.pages) =
                        (t.cu_pages, t.first_page, t.page_indices);
                }
            }
        }
        true
    }

    pub fn launch(&self) -> Result<()> {
        let mut args = self.args;
        let threads = self.config.threads() as u32;
        let mut maps = self.tmaps;
        if maps.is_some() && self.dev.capturing() {
            // Graph nodes are re-pointed through the one `FkArgs` parameter (nodes.rs).
            return Err(invalid("graph", "the TMA prefill kernel is not recorded"));
        }
        launch(
            &self.dev,
            self.f_attn,
            self.grid_attn,
            threads,
            self.smem_attn,
            &mut args,
            maps.as_mut(),
            false,
        )?;
        if self.self_join {
            return Ok(()); // the attention kernel joined (or wrote) the partitions
        }
        // The merge starts as the attention blocks leave and waits for their partials
        // (`griddepcontrol.wait`): the trace put 2 us between them launched plainly.
        launch(
            &self.dev,
            self.f_merge,
            self.grid_merge,
            MERGE_THREADS,
            0,
            &mut args,
            None,
            self.dev.pdl(),
        )
    }
}

/// Validates, plans, compiles (or finds) the module, and uploads the step buffer; `None` when
/// there is nothing to compute.
pub fn prepare(dev: &Arc<Device>, c: &AttnCall) -> Result<Option<Prepared>> {
    validate(c)?;
    prepare_with(dev, c, codegen::lower(c.variant), None)
}

/// `reuse`: the previous plan's step buffer and partition workspace, kept where they are large
/// enough, so a step's launches keep their arguments (a recorded graph's nodes then need no
/// update).
fn prepare_with(
    dev: &Arc<Device>,
    c: &AttnCall,
    hooks: codegen::Lowering,
    reuse: Option<[DeviceBuf; 3]>,
) -> Result<Option<Prepared>> {
    let (hq, hkv, dk, dv) = (c.num_q_heads, c.num_kv_heads, c.head_dim, c.head_dim_v);
    let group = hq / hkv;
    let lens = c.lens;
    let n = lens.num_seqs();
    let max_q = (0..n).map(|s| lens.q_len(s)).max().unwrap_or(0);
    let (mut cfg, k_dtype, v_dtype) = config(c, 0)?;
    // The hooks hold lifted integers in 32 bits too where FK_SMALL_VARS is set (codegen facts).
    cfg.small_vars &= hooks
        .params
        .ints
        .iter()
        .all(|p| p.unsigned_abs() < codegen::SMALL_VARS as u64);
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
            KvInput::Paged(PagedKv { .. }) => false,
        },
        q_rows: group * max_q.max(1),
        compute_capability: dev.props.compute_capability,
        warps: cfg.nwarps,
        k_size: k_dtype.size(),
        v_size: v_dtype.size(),
        smem_optin: dev.props.smem_per_block_optin,
        tuned: dev.tuned(),
    });
    cfg.rows = mma.map_or_else(|| rows_per_block(group, max_q, dk.max(dv)), |(r, _)| r);
    cfg.mma = mma.map(|(_, m)| m);
    // Three Hopper warpgroups where the mask does not cut many more tiles of their taller rows.
    if let Some(m) = cfg.mma.filter(|m| m.wg && m.m_tiles == 12) {
        let calls = crate::plan::GroupsCall {
            lens,
            group,
            num_kv_heads: hkv,
            num_q_heads: hq,
            mask: c.variant.mask.as_ref().map(|m| m.expr()),
            hooks: c.variant.mask.is_some() || c.variant.score.is_some(),
            wave: dev.props.sms,
            deterministic: c.deterministic,
        };
        cfg.mma = Some(choose_groups(m, dk, &calls));
    }
    if let Some(m) = cfg.mma.filter(|m| m.wg) {
        (cfg.nwarps, cfg.rows) = (m.m_tiles, 16 * m.m_tiles);
    }
    cfg.tma = cfg.mma.is_some_and(|m| m.wg) && tma::applies(&c.kv, hkv, (dk, dv));
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
        && cfg.rows <= lanes_per_key
        && tile % (cfg.nwarps * 32 / lanes_per_key) == 0
        && tile % (cfg.nwarps * 32 / (dv / cfg.vv.max(1)).next_power_of_two().min(32)) == 0
    {
        (cfg.async_tile, cfg.stages) = (tile, stages);
        // Leave room for the static shared memory (scores, running max / sum).
        let limit = dev
            .props
            .smem_per_block_optin
            .saturating_sub(cfg.rows * (tile + 3) * 4 + 1024);
        if cfg.stage_bytes(k_dtype, v_dtype) > limit {
            (cfg.async_tile, cfg.stages) = (0, 0);
        }
    }
    if cfg.async_tile == 0 && cfg.mma.is_none() {
        cfg.nwarps = 4; // the register path's tile of 128 keys assumes 4 warps
    }
    let (mut module, mut f_attn, per_sm, mut smem) = loop {
        let (module, f, per_sm, smem) = load_kernel(dev, &cfg, &hooks, k_dtype, v_dtype)?;
        match cfg.mma {
            // A variant whose hooks push the Hopper kernel's consumers past their registers:
            // first P is no longer kept live through the softmax, then three warpgroups' 160
            // registers give way to two's 232, then 64-key tiles halve the score registers
            // (checked once a shape; the modules are cached).
            Some(m)
                if m.wg
                    && (m.wg_overlap || m.tile > 64 || m.m_tiles > 8)
                    && function_local_bytes(f)? > wg_spill_allowance(&m) =>
            {
                cfg.mma = Some(if m.wg_overlap {
                    MmaShape {
                        wg_overlap: false,
                        ..m
                    }
                } else if m.m_tiles > 8 {
                    two_groups(&m, dk)
                } else {
                    MmaShape { tile: 64, ..m }
                });
                if let Some(m) = cfg.mma {
                    (cfg.nwarps, cfg.rows) = (m.m_tiles, 16 * m.m_tiles);
                }
            }
            _ => break (module, f, per_sm, smem),
        }
    };
    // The maps' boxes are the final tile (after the 64-key fallback above).
    let tmaps = match cfg.mma {
        Some(m) if cfg.tma => Some(tma::maps(&c.kv, hkv, (dk, dv), m.tile)?),
        _ => None,
    };
    let rows = cfg.rows;
    let mut plan = plan_work(
        lens,
        group,
        hkv,
        rows,
        dev.props.sms * per_sm,
        c.deterministic,
    );
    // Long paged decode partitions read their pages from a window. The plan stands: the window
    // adds no shared memory, and its registers (167 against 161 at bf16 D 128, NVRTC) keep three
    // blocks an SM, the wave the plan was sized for.
    let decode = cfg.mma.is_some_and(|m| !m.wg && m.m_tiles == 1);
    if cfg.paged && cfg.page_shift >= 0 && decode && page_window(plan.chunk) {
        cfg.page_window = true;
        (module, f_attn, _, smem) = load_kernel(dev, &cfg, &hooks, k_dtype, v_dtype)?;
    }
    let smem_attn = smem as u32;
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
    let mut args = FkArgs {
        off_items: step.push(&plan.items),
        off_tiles: step.push(&plan.tiles),
        ..FkArgs::default()
    };
    let seqs = seq_records(c);
    args.off_seqs = step.push(&seqs);
    let params_at = step.push(&vec![0u8; hooks.params.bytes()]);
    args.off_params = params_at;
    let cap_at: Vec<u64> = hooks
        .params
        .captures
        .iter()
        // An empty capture still gets one element: the Hopper kernel's hooks read index 0
        // of a capture before their bounds guard drops the value (kernels/hooks.cuh).
        .map(|cd| match cd {
            codegen::CaptureData::Int(v) if v.is_empty() => step.push(&[0i64]),
            codegen::CaptureData::Float(v) if v.is_empty() => step.push(&[0f32]),
            codegen::CaptureData::Int(v) => step.push(v),
            codegen::CaptureData::Float(v) => step.push(v),
        })
        .collect();
    let ones = vec![1f32; hkv];
    args.off_kscale = step.push(if c.k_scales.is_empty() {
        &ones
    } else {
        c.k_scales
    });
    args.off_vscale = step.push(if c.v_scales.is_empty() {
        &ones
    } else {
        c.v_scales
    });
    args.off_sinks = step.push(c.variant.sinks.as_deref().map_or(&[][..], |s| s.as_slice()));
    args.off_item_full = step.push(&plan.full);
    let max_parts = plan.tiles.iter().map(|t| t[3]).max().unwrap_or(0);
    let counters = cfg.mma.is_some() && max_parts <= SELF_JOIN_PARTS;
    // A sole partition (and no sinks) is written to `out` by the attention kernel itself.
    let self_join = counters || (max_parts <= 1 && c.variant.sinks.is_none());
    if counters {
        // Each item's row tile and one zeroed arrival counter per (row tile, KV head): the
        // tensor-core kernel's last block of a row tile joins it.
        let mut item_tiles = vec![0u32; plan.items.len()];
        for (i, t) in plan.tiles.iter().enumerate() {
            item_tiles[t[2] as usize..(t[2] + t[3]) as usize].fill(i as u32);
        }
        args.off_item_tiles = step.push(&item_tiles);
        args.off_counters = step.push(&vec![0u32; plan.tiles.len() * hkv]);
    }
    let mut host_tables = None;
    if let KvInput::Paged(PagedKv {
        cu_pages,
        first_page,
        page_indices,
        device_tables,
        num_pages,
        ..
    }) = &c.kv
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
    let parts = plan.items.len() * hkv * rows;
    let sizes = [step.bytes.len(), parts * dv * 4, parts * 4];
    let [step_buf, part_o, part_lse] = match reuse {
        Some(b) if b.iter().zip(sizes).all(|(b, n)| b.bytes() >= n) => b,
        _ => [
            dev.alloc(sizes[0])?,
            dev.alloc(sizes[1])?,
            dev.alloc(sizes[2])?,
        ],
    };
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
        KvInput::Paged(PagedKv {
            k, v, page_size, ..
        }) => {
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
        tmaps,
        config: cfg,
        plan,
    }))
}

/// Launches `f` with `args` (and, for the TMA kernel, its K and V maps after them), with
/// programmatic dependent launch when `pdl` (`f` waits for the previous kernel itself).
#[allow(clippy::too_many_arguments)]
fn launch(
    dev: &Device,
    f: cudarc::driver::sys::CUfunction,
    grid: (u32, u32, u32),
    threads: u32,
    smem: u32,
    args: &mut FkArgs,
    maps: Option<&mut [CUtensorMap; 2]>,
    pdl: bool,
) -> Result<()> {
    dev.bind()?;
    let mut params: Vec<*mut c_void> = vec![(args as *mut FkArgs).cast()];
    if let Some([k, v]) = maps {
        params.push((k as *mut CUtensorMap).cast());
        params.push((v as *mut CUtensorMap).cast());
    }
    // SAFETY: `f` takes one `FkArgs` by value (same layout), then the two maps where it was
    // built with FK_WTMA (exactly when `maps` is given); every pointer in them was checked
    // against its buffer's size in `validate` (the maps' extents in `tma.rs`), and the buffers
    // outlive the stream's work.
    unsafe {
        crate::runtime::launch_grid(
            f,
            grid,
            (threads, 1, 1),
            smem,
            dev.stream(),
            &mut params,
            pdl,
        )
    }
}

fn seq_records(c: &AttnCall) -> Vec<i64> {
    let lens = c.lens;
    let mut out = Vec::with_capacity(8 * lens.num_seqs());
    for s in 0..lens.num_seqs() {
        let (kb, vb) = match &c.kv {
            KvInput::Strided { k, v } => (k.seq_base[s], v.seq_base[s]),
            KvInput::Paged(PagedKv { .. }) => (0, 0),
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
