//! The GEMV / embedding launches on weight matrices (`matrix.rs`). Every argument is checked
//! before anything is launched: a format the GPU does not take, a `k` the format cannot hold,
//! buffers too small for `m` rows, mismatched gate / up shapes and out-of-range token ids are
//! typed errors naming the argument.

use super::choose::{config_for, direct_norm_pays, direct_normalizes, dp4a_applies};
use super::matrix::{need, FkMat, Kernel};
pub use super::matrix::{DeviceMatrix, GemvCall, GemvNorm};
use super::{embed_source, unit_elems, GemvConfig, Mode, MAX_M};
use crate::device_struct::device_struct;
use crate::error::{driver, invalid, Result};
use crate::headers::FkRopeKv;
use crate::runtime::{Device, DeviceBuf};
use cudarc::driver::result::launch_kernel;
use cudarc::driver::sys::CUfunction;
use std::ffi::c_void;
use std::sync::Arc;

device_struct! {
    /// A stacked launch of the streamed or direct GEMV (mode 3; zeros otherwise): the third matrix, the
    /// second and third outputs and the first two matrices' rows.
    pub(crate) struct FkStack {
        c: FkMat => "FkMat",
        y2: u64 => "float*",
        y3: u64 => "float*",
        na: i64 => "i64",
        nb: i64 => "i64",
    }
}

impl DeviceMatrix {
    /// The GEMV kernel of `cfg`, its activation quantizer (staged dp4a) and the blocks per SM
    /// of the streamed kernel.
    fn kernel(
        &self,
        dev: &Arc<Device>,
        cfg: &GemvConfig,
    ) -> Result<(CUfunction, CUfunction, usize)> {
        let mut m = self.funcs.lock().expect("kernel cache lock");
        if let Some(k) = m.get(cfg) {
            return Ok((k.f as CUfunction, k.quant as CUfunction, k.resident));
        }
        let src = cfg.source();
        let module = dev.module(&src)?;
        let (f, resident) = match cfg.stream {
            Some(st) => {
                dev.bind()?;
                let smem = st.smem_bytes(cfg.matrices(), self.k);
                module.kernel("fk_gemv", 32 * st.warps as u32, smem)?
            }
            // The direct kernel with its row in shared memory: launched as resident blocks.
            None if cfg.xs => {
                dev.bind()?;
                module.kernel("fk_gemv", 128, 4 * self.k)?
            }
            None => (module.function("fk_gemv")?, 0),
        };
        if let Some(st) = cfg.staged.filter(|_| cfg.stream.is_none()) {
            dev.bind()?;
            // SAFETY: raises the function's dynamic shared-memory limit (at most 64 KB, within
            // every sm_80+ device's opt-in).
            unsafe {
                cudarc::driver::result::function::set_function_attribute(
                    f,
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    st.smem_bytes(cfg.mb) as i32,
                )
            }
            .map_err(|e| driver("cuFuncSetAttribute", e))?;
        }
        let quant = if cfg.dp4a && cfg.stream.is_none() {
            module.function("fk_quant_q8")?
        } else {
            std::ptr::null_mut()
        };
        m.insert(
            cfg.clone(),
            Kernel {
                _module: module,
                f: f as usize,
                quant: quant as usize,
                resident,
            },
        );
        Ok((f, quant, resident))
    }
}

fn validate(c: &GemvCall) -> Result<()> {
    let (n, k, m) = (c.a.n, c.a.k, c.m);
    match (c.mode, c.b) {
        (Mode::GateUp, None) => return Err(invalid("b", "the fused gate/up GEMV needs `up`")),
        (Mode::GateUp, Some(b)) if b.format != c.a.format || b.n != n || b.k != k => {
            return Err(invalid(
                "b",
                format!(
                    "up is {} [{}, {}], gate {} [{n}, {k}]",
                    b.format, b.n, b.k, c.a.format
                ),
            ));
        }
        _ => {}
    }
    let mk = m.checked_mul(k).ok_or_else(|| invalid("m", "overflows"))?;
    need("x", c.x, mk, "activation elements (m * k)")?;
    if c.mode == Mode::DownSwiglu {
        let x2 =
            c.x2.ok_or_else(|| invalid("x2", "the down projection with SwiGLU needs `up`"))?;
        need("x2", x2, mk, "activation elements (m * k)")?;
    }
    let mn = m.checked_mul(n).ok_or_else(|| invalid("m", "overflows"))?;
    need("y", c.y, mn, "output elements (m * n)")?;
    c.norm.map_or(Ok(()), |nm| nm.check(k))
}

/// Queues the GEMV on `dev`'s stream (batches of more than `MAX_M` rows as several launches).
pub fn gemv(dev: &Arc<Device>, c: &GemvCall) -> Result<()> {
    validate(c)?;
    if c.m == 0 {
        return Ok(());
    }
    // Prompts: a tensor-core GEMM over operands decoded once (`gemm/`).
    if c.norm.is_none() && (!c.accumulate || c.mode == Mode::Plain) {
        if let Some(g) = c.a.gemm_plan(c.mode, c.m) {
            return super::gemm::run(dev, c, &g);
        }
    }
    let (n, k) = (c.a.n, c.a.k);
    let a = c.a.mat();
    let b = c.b.map_or(FkMat::default(), |b| b.mat());
    let mut done = 0;
    while done < c.m {
        let mm = (c.m - done).min(MAX_M);
        let mut cfg = config_for(&dev.props, c.mode, c.a, mm);
        // A batch's last single row takes the batch's path: one call, one arithmetic. The
        // streamed kernel reads its activation row with 16-byte loads.
        if c.m > 1 || !c.x.ptr().is_multiple_of(16) {
            cfg.stream = None;
        }
        // The bulk ring copies 16-byte spans of the weights; a matrix whose spans are not
        // (never one `upload` made) keeps the register batches.
        if let Some(st) = cfg.stream.as_mut() {
            if st.bulk > 0 && !(c.a.bulk_aligned() && c.b.is_none_or(|b| b.bulk_aligned())) {
                (st.bulk, st.bulk_stage, st.late) = (0, 0, 0);
            }
        }
        if cfg.stream.is_none() && c.norm.is_some() {
            if !(c.m == 1
                && cfg.staged.is_none()
                && c.mode != Mode::DownSwiglu
                && direct_normalizes(c.a.format))
            {
                return Err(invalid(
                    "norm",
                    "only single-row kernels normalize x (see `normalizes`)",
                ));
            }
            // One row a warp: the norm's loads and sums took K-quants' two past the registers.
            (cfg.norm, cfg.rows) = (true, 1);
        }
        cfg.acc = c.accumulate;
        if c.m > 1 && cfg.staged.is_some() && c.a.quantized_acts {
            cfg.dp4a = dp4a_applies(c.a.format, c.mode, k);
        }
        let (f, quant, resident) = c.a.kernel(dev, &cfg)?;
        let mut x = c.x.ptr() + (done * k * 4) as u64;
        let mut x2 = c.x2.map_or(0, |x2| x2.ptr() + (done * k * 4) as u64);
        // The integer path quantizes these rows first: codes [mm][k], (scale, sum) [mm][k/32].
        let _scratch = if cfg.dp4a && cfg.stream.is_none() {
            let blocks = mm * k / 32;
            let s = dev.alloc(mm * k + blocks * 8)?;
            let (mut xin, mut q, mut d, mut nb) =
                (x, s.ptr(), s.ptr() + (mm * k) as u64, blocks as i64);
            let mut qp: [*mut c_void; 4] = [
                (&mut xin as *mut u64).cast(),
                (&mut q as *mut u64).cast(),
                (&mut d as *mut u64).cast(),
                (&mut nb as *mut i64).cast(),
            ];
            dev.bind()?;
            // SAFETY: fk_quant_q8(const float*, i8*, float2*, i64) reads blocks * 32 floats of
            // x (mm rows of k, checked in `validate`) and writes inside `s`.
            unsafe {
                launch_kernel(
                    quant,
                    (blocks.div_ceil(8) as u32, 1, 1),
                    (256, 1, 1),
                    0,
                    dev.stream(),
                    &mut qp,
                )
            }
            .map_err(|e| driver("cuLaunchKernel", e))?;
            (x, x2) = (q, d);
            Some(s)
        } else {
            None
        };
        let y = c.y.ptr() + (done * n * 4) as u64;
        launch_gemv(
            dev,
            &cfg,
            (f, resident),
            (a, b, FkStack::default()),
            (x, x2, y),
            c.norm,
            None,
            mm,
            n,
            k,
        )?;
        done += mm;
    }
    Ok(())
}

/// Launches a loaded GEMV kernel of `cfg`: matrices, activations and output pointers, `m`
/// activation rows, `n` output rows (all of a stacked launch's), `k`.
#[allow(clippy::too_many_arguments)]
fn launch_gemv(
    dev: &Device,
    cfg: &GemvConfig,
    (f, resident): (CUfunction, usize),
    (mut a, mut b, mut st): (FkMat, FkMat, FkStack),
    (mut x, mut x2, mut y): (u64, u64, u64),
    norm: Option<GemvNorm<'_>>,
    rope: Option<&mut FkRopeKv>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    {
        let (mut m32, mut n64, mut k64) = (m as i32, n as i64, k as i64);
        let (mut nw, mut eps) = norm.map_or((0, 0.0), |nm| (nm.weight.ptr(), nm.eps));
        let rope_p: *mut c_void =
            rope.map_or(std::ptr::null_mut(), |r| (r as *mut FkRopeKv).cast());
        let mut params: [*mut c_void; 12] = [
            (&mut a as *mut FkMat).cast(),
            (&mut b as *mut FkMat).cast(),
            (&mut x as *mut u64).cast(),
            (&mut x2 as *mut u64).cast(),
            (&mut y as *mut u64).cast(),
            (&mut m32 as *mut i32).cast(),
            (&mut n64 as *mut i64).cast(),
            (&mut k64 as *mut i64).cast(),
            (&mut st as *mut FkStack).cast(),
            (&mut nw as *mut u64).cast(),
            (&mut eps as *mut f32).cast(),
            rope_p,
        ];
        // The streamed kernel also takes the stack and the norm (and with FK_SROPE the RoPE
        // arguments); the direct one the stack in mode 3, both with FK_DNORM; the others take
        // eight.
        let np = match (cfg.stream.is_some(), cfg.rope) {
            (true, true) => 12,
            (true, false) => 11,
            _ if cfg.norm => 11,
            _ if cfg.mode == Mode::Stack => 9,
            _ => 8,
        };
        let (grid, threads, smem) = match cfg.stream {
            // Resident blocks only: every warp owns n / warps consecutive rows, give or take one.
            // A whole number of clusters (blocks past the rows only join the prologue).
            Some(st) => (
                n.div_ceil(st.warps)
                    .min(super::choose::stream_grid_blocks(resident) * dev.props.sms.max(1))
                    .next_multiple_of(st.cluster.max(1)),
                32 * st.warps,
                st.smem_bytes(cfg.matrices(), k),
            ),
            // The direct kernel with its row in shared memory: the resident blocks, each warp
            // walking row groups grid-stride.
            None if cfg.xs => (
                n.div_ceil(4 * cfg.rows)
                    .min(resident.max(1) * dev.props.sms.max(1))
                    .max(1),
                128,
                4 * k,
            ),
            None => (
                n.div_ceil(4 * cfg.rows),
                128,
                cfg.staged.map_or(0, |st| st.smem_bytes(cfg.mb)),
            ),
        };
        dev.bind()?;
        // The streamed and direct kernels wait for the previous kernel themselves; the staged
        // one does not (its integer path's quantizing launch precedes it).
        let pdl = (cfg.stream.is_some() || cfg.staged.is_none()) && dev.pdl();
        // SAFETY: fk_gemv(FkMat, FkMat, const float*, const float*, float*, int, i64, i64
        // [, FkStack, const float*, float]) reads k norm weights (checked), rows < n of the matrices (sized by `upload`) and m * k
        // activations, writes m * n outputs: all checked by the callers (`validate`,
        // `gemv_stacked`). Under PDL the kernel reads the activations and writes only after
        // `griddepcontrol.wait` (the previous kernel complete).
        unsafe {
            crate::runtime::launch(
                f,
                (grid as u32, threads as u32, smem as u32),
                dev.stream(),
                &mut params[..np],
                pdl,
            )
        }?;
    }
    Ok(())
}

/// What `gemv_stacked` accepts: two or three matrices of one format, k and activation
/// precision, activations 16-byte aligned, and a kernel that stacks them, normalizing x when
/// `norm`: the streamed one (block formats with slack) or the direct one (plain floats, MLX,
/// matrices without slack; see `direct_normalizes`).
fn stackable(dev: &Device, ws: &[&DeviceMatrix], x: &DeviceBuf, norm: bool) -> bool {
    let Some(a) = ws.first() else {
        return false;
    };
    let same = ws.iter().all(|w| {
        w.format == a.format
            && w.k == a.k
            && w.quantized_acts == a.quantized_acts
            && w.traits().slack == a.traits().slack
    });
    (2..=3).contains(&ws.len())
        && same
        && x.ptr().is_multiple_of(16)
        && stack_kernel(&config_for(&dev.props, Mode::Stack, a, 1), a.format, norm)
}

/// Whether `gemv_stacked` serves `ws` with activations at `x`, normalized in the launch when
/// `norm` (the plan's choice; decides, launches nothing): `stackable`, and on the direct kernel
/// a norm only where it pays (`direct_norm_pays`), else the caller runs it first.
pub fn stacks(dev: &Device, ws: &[&DeviceMatrix], x: &DeviceBuf, norm: bool) -> bool {
    stackable(dev, ws, x, norm)
        && (!norm
            || config_for(&dev.props, Mode::Stack, ws[0], 1)
                .stream
                .is_some()
            || direct_norm_pays(ws.iter().map(|w| w.bytes()).sum()))
}

/// Whether `gemv_stacked` also applies RoPE and the KV append to `ws` (Q, K, V) in its
/// epilogue (`FK_SROPE`): the streamed kernel's. (The direct kernel's, two rows a warp, decoded
/// 8B F16 1.7 % slower than a row a warp and a RoPE launch after it, and SmolLM2 F16 no faster:
/// H200, session 33 calls d, e.)
pub fn stacks_rope(dev: &Device, ws: &[&DeviceMatrix], x: &DeviceBuf) -> bool {
    ws.len() == 3
        && stacks(dev, ws, x, false)
        && config_for(&dev.props, Mode::Stack, ws[0], 1)
            .stream
            .is_some()
}

/// Whether `cfg` (a stacked launch's configuration on `f`) has a kernel that stacks, and
/// normalizes when `norm`: the streamed one, or the direct one (the staged one never).
fn stack_kernel(cfg: &GemvConfig, f: flexkern_quant::Format, norm: bool) -> bool {
    cfg.stream.is_some() || (cfg.staged.is_none() && (!norm || direct_normalizes(f)))
}

/// `ys[i] = x · ws[i]ᵀ` for two or three matrices of one format and `k` (Q, K and V), a
/// single activation row, as one launch of the streamed kernel (mode 3: the matrices' rows
/// stacked). With `rope` (three matrices, Q, K and V of one token, `rope` built and checked by
/// the caller for their outputs) the epilogue also rotates Q and K and appends K and V to the
/// page store, as `fk_rope_kv_write` would after it. Ok(false), with nothing queued, where that
/// kernel does not serve them (the caller launches them one by one); typed errors for buffers
/// too small.
pub fn gemv_stacked(
    dev: &Arc<Device>,
    ws: &[&DeviceMatrix],
    x: &DeviceBuf,
    norm: Option<GemvNorm<'_>>,
    ys: &[&DeviceBuf],
    rope: Option<&mut FkRopeKv>,
) -> Result<bool> {
    if ys.len() != ws.len() || !stackable(dev, ws, x, norm.is_some()) {
        return Ok(false);
    }
    if rope.is_some() && !stacks_rope(dev, ws, x) {
        return Ok(false);
    }
    let a = ws[0];
    need("x", x, a.k, "activation elements (k)")?;
    if let Some(nm) = norm {
        nm.check(a.k)?;
    }
    for (w, y) in ws.iter().zip(ys) {
        need("ys", y, w.n, "output elements (n)")?;
    }
    let n: usize = ws.iter().map(|w| w.n).sum();
    let mut cfg = config_for(&dev.props, Mode::Stack, a, 1);
    if !stack_kernel(&cfg, a.format, norm.is_some()) {
        return Ok(false);
    }
    cfg.norm = norm.is_some() && cfg.stream.is_none();
    cfg.rope = rope.is_some();
    let (f, _, resident) = a.kernel(dev, &cfg)?;
    let st = FkStack {
        c: ws.get(2).map_or(FkMat::default(), |w| w.mat()),
        y2: ys[1].ptr(),
        y3: ys.get(2).map_or(0, |y| y.ptr()),
        na: ws[0].n as i64,
        nb: ws[1].n as i64,
    };
    let mats = (a.mat(), ws[1].mat(), st);
    launch_gemv(
        dev,
        &cfg,
        (f, resident),
        mats,
        (x.ptr(), 0, ys[0].ptr()),
        norm,
        rope,
        1,
        n,
        a.k,
    )?;
    Ok(true)
}

/// Rows `ids[at..at + tokens]` (u32, in `ids`) of `table`, dequantized exactly into the first
/// `tokens` rows of `out` (f32). The ids are checked against the table on the host first:
/// `host_ids` when the caller has them (no download, no sync), else downloaded.
pub fn embedding(
    dev: &Arc<Device>,
    table: &DeviceMatrix,
    ids: &DeviceBuf,
    at: usize,
    tokens: usize,
    out: &DeviceBuf,
    host_ids: Option<Vec<u32>>,
) -> Result<()> {
    let end = at
        .checked_add(tokens)
        .filter(|&e| e * 4 <= ids.bytes())
        .ok_or_else(|| invalid("ids", "range past the buffer"))?;
    need("out", out, tokens * table.k, "output elements (tokens * k)")?;
    let host = match host_ids.filter(|h| h.len() == end - at) {
        Some(h) => h,
        None => {
            let mut h = vec![0u32; end - at];
            dev.read(ids, at * 4, &mut h)?;
            h
        }
    };
    if let Some(i) = host.iter().position(|&t| t as usize >= table.n) {
        return Err(invalid(
            "ids",
            format!(
                "entry {i} is {} but the table has {} rows",
                host[i], table.n
            ),
        ));
    }
    if tokens == 0 {
        return Ok(());
    }
    let f = dev
        .module_keyed(&format!("embed {}", table.unit), || {
            embed_source(&table.unit)
        })?
        .function("fk_embed")?;
    let ue = unit_elems(table.format);
    let per_row = table.k / ue + table.k % ue;
    let total = tokens * per_row;
    let mut a = table.mat();
    let mut idp = ids.ptr() + (at * 4) as u64;
    let mut o = out.ptr();
    let (mut t64, mut k64) = (tokens as i64, table.k as i64);
    let mut params: [*mut c_void; 5] = [
        (&mut a as *mut FkMat).cast(),
        (&mut idp as *mut u64).cast(),
        (&mut o as *mut u64).cast(),
        (&mut t64 as *mut i64).cast(),
        (&mut k64 as *mut i64).cast(),
    ];
    dev.bind()?;
    let blocks = total.div_ceil(128).clamp(1, 65535) as u32;
    // SAFETY: fk_embed(FkMat, const u32*, float*, i64, i64) reads rows ids[t] < n (checked
    // above) and writes tokens * k outputs (checked).
    unsafe { launch_kernel(f, (blocks, 1, 1), (128, 1, 1), 0, dev.stream(), &mut params) }
        .map_err(|e| driver("cuLaunchKernel", e))
}
