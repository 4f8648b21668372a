//! The attention kernel's choice and source: the configuration `#define`d into the templates
//! (element types, head sizes, rows, pipeline or tensor-core shape), its module name and full
//! source, and loading it (with the Hopper kernel's register checks).

use super::*;
use crate::plan::mma_smem;
use crate::runtime::compile::KernelSource;

const ATTENTION: &str = include_str!("../../kernels/attention.cu");
const ATTENTION_ASYNC: &str = include_str!("../../kernels/attention_async.cu");
const ATTENTION_TC: &str = include_str!("../../kernels/attention_tc.cu");
const ATTENTION_STAGE: &str = include_str!("../../kernels/attention_stage.cu");
const ATTENTION_JOIN: &str = include_str!("../../kernels/attention_join.cu");
const ATTENTION_MMA: &str = include_str!("../../kernels/attention_mma.cu");
const ATTENTION_WGMMA_COPY: &str = include_str!("../../kernels/attention_wgmma_copy.cu");
const ATTENTION_WGMMA: &str = include_str!("../../kernels/attention_wgmma.cu");

/// Warps per attention block: `FLEXKERN_CUDA_WARPS` (4 or 8) for tuning runs, else 4.
pub fn warps() -> usize {
    match std::env::var("FLEXKERN_CUDA_WARPS").ok().as_deref() {
        Some("8") => 8,
        _ => 4,
    }
}

pub(super) fn elem_code(arg: &'static str, d: DType, kv: bool) -> Result<u32> {
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
pub(super) fn vec_width(size: usize, xs: &[usize]) -> usize {
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
    /// The Hopper kernel copies whole K/V tiles with TMA (strided K/V; `tma.rs`).
    pub tma: bool,
    /// Every hook variable of the call is below `codegen::SMALL_VARS` (`small_vars`): the hooks
    /// may convert the integers they prove small on full-rate pipes.
    pub small_vars: bool,
    /// Blocks record their start, duration and SM (`FLEXKERN_CUDA_TRACE=1`; `trace.rs`).
    pub trace: bool,
    /// The mma.sync kernel's paged stages read their pages from a window a block holds
    /// (`FkPageWindow`, attention_stage.cu; `plan::page_window` decides).
    pub page_window: bool,
}

/// Whether every value a hook variable takes for a kept element of the call (batch, head, query
/// and key positions, lengths, token index) is below `codegen::SMALL_VARS` in magnitude (query
/// positions are negative where a query is longer than its keys).
pub(super) fn small_vars(lens: &SeqLens, num_q_heads: usize) -> bool {
    let lim = crate::codegen::SMALL_VARS as usize;
    let n = lens.num_seqs();
    n < lim
        && num_q_heads < lim
        && lens.total_q() < lim
        && (0..n).all(|s| {
            let p0 = lens.q_pos0(s);
            lens.kv_len(s) < lim && p0 > -(lim as i64) && p0 + (lens.q_len(s) as i64) < lim as i64
        })
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
            format!(
                "{}{}",
                1usize << self.page_shift,
                if self.page_window { "w" } else { "" }
            )
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
                    format!(
                        "wg{}{}{}",
                        m.wg_s,
                        if m.wg_overlap { "o" } else { "" },
                        if self.tma { "t" } else { "" }
                    )
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
            "attn_{}{pages}_q{}_{kv}_{hd}_r{}w{}{pipe}{}",
            if self.paged { "paged" } else { "strided" },
            N[self.qt as usize],
            self.rows,
            self.nwarps,
            if self.small_vars { "" } else { "_wide" }
        ) + if self.trace { "_trace" } else { "" }
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
            wg_overlap: false,
        });
        let defines = format!(
            "{defines}#define FK_MMA {}\n#define FK_MMA_MT {}\n#define FK_MMA_TILE {}\n#define FK_MMA_STAGES {}\n\
             #define FK_MMA_TPR {}\n#define FK_MMA_L2 {}\n#define FK_MMA_MINB {}\n#define FK_WGMMA {}\n#define FK_WG_S {}\n#define FK_WG_OVERLAP {}\n\
             #define FK_WTMA {}\n#define FK_SMALL_VARS {}\n#define FK_TRACE {}\n#define FK_JOIN_PARTS {SELF_JOIN_PARTS}\n#define FK_PAGE_WINDOW {}\n",
            self.mma.is_some() as u8, m.m_tiles, m.tile, m.stages, m.copy_threads, m.l2_prefetch, m.min_blocks,
            m.wg as u8, m.wg_s, m.wg_overlap as u8, self.tma as u8, self.small_vars as u8, self.trace as u8,
            self.page_window as u8
        );
        use crate::headers::{text, COMMON, MMA, WGMMA};
        let common = text(&[COMMON]);
        let mma = text(&[MMA, WGMMA]);
        KernelSource {
            name: format!("{}_v{:04x}", self.name(), variant_hash as u16),
            source: format!(
                "{defines}{common}\n{mma}\n{hooks}\n{}{ATTENTION}\n{ATTENTION_ASYNC}\n{ATTENTION_TC}\n{ATTENTION_STAGE}\n{ATTENTION_JOIN}\n{ATTENTION_MMA}\n{ATTENTION_WGMMA_COPY}\n{ATTENTION_WGMMA}",
                super::FkArgs::cuda()
            ),
        }
    }
}

#[cfg(test)]
impl KernelConfig {
    /// bf16 Q, K and V at D 128 over pages of 16 keys, 4 warps: the shape tests build on.
    pub(crate) fn bf16_paged16_d128(rows: usize, mma: Option<MmaShape>) -> KernelConfig {
        KernelConfig {
            qt: 2,
            kt: 2,
            vt: 2,
            dk: 128,
            dv: 128,
            vk: 8,
            vv: 8,
            rows,
            paged: true,
            async_tile: 0,
            stages: 0,
            mma,
            page_shift: 4,
            nwarps: 4,
            tma: false,
            small_vars: true,
            page_window: false,
            trace: false,
        }
    }
}

/// Compiles (or finds) `cfg`'s module and its attention kernel: (module, kernel, blocks per SM,
/// dynamic shared memory).
pub(super) fn load_kernel(
    dev: &Arc<Device>,
    cfg: &KernelConfig,
    hooks: &codegen::Lowering,
    k_dtype: DType,
    v_dtype: DType,
) -> Result<(
    Arc<crate::runtime::compile::Module>,
    cudarc::driver::sys::CUfunction,
    usize,
    usize,
)> {
    // The hooks' source is written only where no module is loaded under this key (a decode
    // step plans afresh as its lengths grow, and finds its module).
    let module = dev.module_keyed(&format!("attention {cfg:?} {}", hooks.key), || {
        cfg.source(
            &hooks.source(),
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
    if let Some(m) = cfg.mma.filter(|m| m.wg) {
        // setmaxnreg only moves registers within the block's launch allocation: the kernel's
        // budgets need exactly `wg_launch_regs`, or the consumers would wait for registers
        // forever.
        let regs = function_regs(f)?;
        if regs != m.wg_launch_regs() {
            return Err(crate::error::invalid(
                "kernel",
                format!(
                    "{name} compiled to {regs} registers per thread, not the {} its register hand-over assumes (FLEXKERN_CUDA_WGMMA=0 runs the mma.sync kernel)",
                    m.wg_launch_regs()
                ),
            ));
        }
    }
    Ok((module, f, per_sm, smem))
}

/// Local memory per thread of a loaded kernel (spills show there).
pub(super) fn function_local_bytes(f: cudarc::driver::sys::CUfunction) -> Result<i32> {
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

/// Local memory the Hopper kernel may use and still run as planned: none, but 32 bytes with
/// three warpgroups, where ptxas parks a few values the loop reads once a tile (a barrier id, a
/// descriptor): the causal mask spills those 32 bytes and ran 10 % faster than two warpgroups
/// (381 against 345 TFLOP/s), ALiBi's 80-104 bytes ran 15 % slower (H200, D 64, session 25).
pub(super) fn wg_spill_allowance(m: &MmaShape) -> i32 {
    if m.m_tiles > 8 {
        32
    } else {
        0
    }
}

/// Registers per thread of a loaded kernel.
pub(super) fn function_regs(f: cudarc::driver::sys::CUfunction) -> Result<i32> {
    use cudarc::driver::sys::CUfunction_attribute as A;
    // SAFETY: callers pass a handle of a module they hold loaded.
    unsafe {
        cudarc::driver::result::function::get_function_attribute(f, A::CU_FUNC_ATTRIBUTE_NUM_REGS)
    }
    .map_err(|e| driver("cuFuncGetAttribute", e))
}

pub(super) fn config(c: &AttnCall, rows: usize) -> Result<(KernelConfig, DType, DType)> {
    let (dk, dv) = (c.head_dim, c.head_dim_v);
    let (kd, vd, paged, kx, vx): (DType, DType, bool, Vec<usize>, Vec<usize>) = match &c.kv {
        KvInput::Strided { k, v } => {
            let mut kx = vec![dk, k.tok_stride, k.head_stride];
            kx.extend_from_slice(k.seq_base);
            let mut vx = vec![dv, v.tok_stride, v.head_stride];
            vx.extend_from_slice(v.seq_base);
            (k.dtype, v.dtype, false, kx, vx)
        }
        KvInput::Paged(PagedKv {
            k_dtype, v_dtype, ..
        }) => (*k_dtype, *v_dtype, true, vec![dk], vec![dv]),
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
            KvInput::Paged(PagedKv { page_size, .. }) if page_size.is_power_of_two() => {
                page_size.trailing_zeros() as i32
            }
            _ => -1,
        },
        nwarps: 4,
        tma: false,
        small_vars: small_vars(c.lens, c.num_q_heads),
        page_window: false,
        trace: super::trace::enabled(),
    };
    Ok((cfg, kd, vd))
}
