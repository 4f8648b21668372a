//! `TensorOps` for `CudaBackend`: the model's non-attention kernels on the GPU. Weights are
//! the file's blocks uploaded once (`prepare_weight`); GEMV, SwiGLU and embedding run the
//! `quant` kernels, RMSNorm / RoPE / adds the small kernels of `kernels/ops.cu`, each checked
//! like the CPU's (typed errors naming the argument, before any launch).

use crate::backend::{CudaBackend, CudaBuffer};
use crate::headers::{text, FkRopeKv, COMMON};
use crate::quant::choose::{normalizes, streams};
use crate::quant::gemv::{
    embedding, gemv, gemv_stacked, stacks, stacks_rope, DeviceMatrix, GemvCall, GemvNorm,
};
use crate::quant::Mode;
use crate::runtime::compile::{KernelSource, Module};
use crate::runtime::Device;
use cudarc::driver::sys::CUfunction;
use flexkern::attention::plan::Plan;
use flexkern::attention::problem::Problem;
use flexkern::backend::tensor_ops::{check_q16, GraphId, Norm, Rope, RopeKv, RopeStyle, TensorOps};
use flexkern::backend::{check_range, AttnIo, Buffer, Slice};
use flexkern::error::{Error, Result};
use flexkern::DType;
use flexkern_quant::QuantMatrix;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, Weak};

const OPS: &str = include_str!("../kernels/ops.cu");

fn invalid(arg: &'static str, msg: impl Into<String>) -> Error {
    Error::InvalidArgument {
        arg,
        msg: msg.into(),
    }
}

/// An f32 buffer holding at least `need` elements.
fn f32_rows(arg: &'static str, b: &CudaBuffer, need: usize) -> Result<()> {
    if b.dtype() != DType::F32 {
        return Err(invalid(
            arg,
            format!("expected f32, got {}", b.dtype().name()),
        ));
    }
    if b.len() < need {
        return Err(invalid(
            arg,
            format!("needs {need} elements, the buffer holds {}", b.len()),
        ));
    }
    Ok(())
}

fn size(arg: &'static str, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| invalid(arg, "size overflows"))
}

fn u32_slice(arg: &'static str, s: &Slice<'_, CudaBuffer>) -> Result<()> {
    if s.buf.dtype() != DType::U32 {
        return Err(invalid(arg, "expected a u32 buffer"));
    }
    check_range(arg, s.start, s.len, s.buf.len())
}

/// The ops module of each open device (by identity), loaded once: a step launches several
/// ops per layer, and building and hashing the source each time would cost more than they do.
static OPS_MODULES: Mutex<Vec<(Weak<Device>, Arc<Module>)>> = Mutex::new(Vec::new());

fn ops_function(dev: &Arc<Device>, name: &str) -> crate::Result<CUfunction> {
    let mut mods = OPS_MODULES.lock().expect("ops modules lock");
    mods.retain(|(d, _)| d.strong_count() > 0);
    if let Some((_, m)) = mods
        .iter()
        .find(|(d, _)| std::ptr::eq(d.as_ptr(), Arc::as_ptr(dev)))
    {
        return m.function(name);
    }
    let src = KernelSource {
        name: "ops".into(),
        source: format!("{}\n{}\n{OPS}", text(&[COMMON]), crate::headers::kv_store()),
    };
    let m = dev.module(&src)?;
    let f = m.function(name);
    mods.push((Arc::downgrade(dev), m));
    f
}

impl CudaBackend {
    /// Launches `name` of the ops module over `blocks` blocks of `threads` (grid-stride loops).
    fn ops_launch(
        &self,
        name: &str,
        (blocks, threads): (usize, u32),
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let dev = &self.dev;
        let f = ops_function(dev, name)?;
        dev.bind()?;
        let grid = blocks.clamp(1, 65535) as u32;
        // SAFETY: each caller passes the parameters of `name` in order, with every pointer
        // range checked against its buffer first.
        // SAFETY: as above; every ops kernel starts with FK_PDL_ENTER.
        unsafe { crate::runtime::launch(f, (grid, threads, 0), dev.stream(), params, dev.pdl())? };
        Ok(())
    }

    /// One GEMV (`accumulate`: added into `y`; `norm`: x normalized first; the caller checked
    /// `streams` for either).
    #[allow(clippy::too_many_arguments)]
    fn run_gemv(
        &self,
        mode: Mode,
        a: &DeviceMatrix,
        b: Option<&DeviceMatrix>,
        x: &CudaBuffer,
        m: usize,
        y: &CudaBuffer,
        accumulate: bool,
        norm: Option<GemvNorm<'_>>,
    ) -> Result<()> {
        f32_rows("x", x, size("x", m, a.k)?)?;
        f32_rows("y", y, size("y", m, a.n)?)?;
        let call = GemvCall {
            accumulate,
            norm,
            mode,
            a,
            b,
            x: x.device_buf(),
            x2: None,
            y: y.device_buf(),
            m,
        };
        Ok(gemv(&self.dev, &call)?)
    }
}

/// Matrices split into runs of consecutive ones that one stacked GEMV could take (at most
/// three): equal keys, a matrix's format and activation precision.
fn format_runs<K: PartialEq>(keys: &[K]) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if keys[r.start] == *key && r.len() < 3 => r.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    runs
}

/// `rope`'s checks: u32 positions, the rotated dims and frequencies, x holding the rows.
/// Returns the number of rotated pairs per head.
fn rope_check(
    x: &CudaBuffer,
    heads: usize,
    head_dim: usize,
    positions: &Slice<'_, CudaBuffer>,
    rope: &Rope,
    inv_freq: &CudaBuffer,
) -> Result<usize> {
    u32_slice("positions", positions)?;
    if rope.n_rot > head_dim
        || !rope.n_rot.is_multiple_of(2)
        || inv_freq.len() != rope.n_rot / 2
        || inv_freq.dtype() != DType::F32
    {
        return Err(invalid(
            "rope",
            format!(
                "n_rot {} with {} frequencies for head_dim {head_dim}",
                rope.n_rot,
                inv_freq.len()
            ),
        ));
    }
    if head_dim > i32::MAX as usize || heads > i32::MAX as usize {
        return Err(invalid("head_dim", "larger than i32::MAX"));
    }
    let row = size("x", heads, head_dim)?;
    f32_rows("x", x, size("x", positions.len, row)?)?;
    Ok(rope.n_rot / 2)
}

/// `FLEXKERN_CUDA_ROPE_FUSE=0` keeps RoPE and the KV append in their own launch after the QKV
/// projection (A/B runs).
fn rope_fusion() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("FLEXKERN_CUDA_ROPE_FUSE").map_or(true, |v| v != "0"))
}

impl CudaBackend {
    /// `rope_kv_write`'s checks (before anything is launched) and its kernel's arguments, the
    /// kernel and its launch's thread count; None when there is nothing to write.
    fn rope_kv_args(
        &self,
        (q, q16, k, v): (&CudaBuffer, Option<&CudaBuffer>, &CudaBuffer, &CudaBuffer),
        at: &RopeKv<'_, CudaBuffer>,
    ) -> Result<Option<(FkRopeKv, CUfunction, usize)>> {
        let RopeKv {
            heads: (hq, hkv),
            head_dim,
            positions,
            rope,
            inv_freq,
            pages,
            slots,
        } = at;
        let (hq, hkv, head_dim) = (*hq, *hkv, *head_dim);
        let l = pages.layout;
        let half = rope_check(q, hq, head_dim, positions, rope, inv_freq)?;
        rope_check(k, hkv, head_dim, positions, rope, inv_freq)?;
        if l.head_dim != head_dim || l.num_kv_heads != hkv || slots.len != positions.len {
            return Err(invalid(
                "pages",
                format!(
                    "a store of {} heads of {} for {hkv} heads of {head_dim}, {} slots for {} positions",
                    l.num_kv_heads, l.head_dim, slots.len, positions.len
                ),
            ));
        }
        let t = positions.len;
        let (qh, qcode) = match q16 {
            Some(h) => {
                check_q16(q, h, t * hq * head_dim)?;
                (
                    h.device_buf().ptr(),
                    if h.dtype() == DType::BF16 { 2 } else { 1 },
                )
            }
            None => (0, 0),
        };
        let Some(w) = self.kv_write_args(pages, slots, k, v)? else {
            return Ok(None);
        };
        let f = w.function("fk_rope_kv_write")?;
        let a = FkRopeKv {
            q: q.device_buf().ptr(),
            k: k.device_buf().ptr(),
            v: v.device_buf().ptr(),
            pos: positions.buf.ptr_at(positions.start),
            slots: w.slots,
            inv_freq: inv_freq.device_buf().ptr(),
            kdst: w.k,
            vdst: w.v,
            kscales: w.scales.ptr(),
            vscales: w.v_scales(),
            qh,
            tokens: t as i64,
            hq: hq as i32,
            hkv: hkv as i32,
            dim: head_dim as i32,
            dim_v: l.head_dim_v as i32,
            half: half as i32,
            neox: (rope.style == RopeStyle::Neox) as i32,
            kcode: w.codes.0,
            vcode: w.codes.1,
            qcode,
            mscale: rope.mscale,
        };
        let q_tail = if qcode != 0 {
            hq * (head_dim - 2 * half)
        } else {
            0
        };
        let total = t * (hq * half + q_tail + hkv * (head_dim - half) + hkv * l.head_dim_v);
        Ok(Some((a, f, total)))
    }

    /// A fused norm's weights, checked as `rms_norm` checks them (`k` f32 values).
    fn gemv_norm<'b>(&self, norm: Norm<'b, CudaBuffer>, k: usize) -> Result<GemvNorm<'b>> {
        norm.check(k)?;
        let w = norm.weight;
        if w.dtype() != DType::F32 {
            return Err(invalid(
                "norm",
                format!("f32 weights, not {}", w.dtype().name()),
            ));
        }
        Ok(GemvNorm {
            weight: w.device_buf(),
            eps: norm.eps,
        })
    }
}

impl TensorOps for CudaBackend {
    type Weight<'w> = DeviceMatrix;

    fn prepare_weight<'w>(&self, w: QuantMatrix<'w>) -> Result<DeviceMatrix> {
        let bytes = w.file_bytes().ok_or_else(|| {
            invalid(
                "w",
                "a CPU-repacked matrix: the GPU takes the file's layout",
            )
        })?;
        // The default precision quantizes activations as the CPU does (Q8_0 / Q4_0 on the GPU).
        let quantized = w.precision() != flexkern_quant::Precision::Precise;
        Ok(
            DeviceMatrix::upload(&self.dev, w.format(), w.n(), w.k(), &bytes)?
                .with_quantized_activations(quantized),
        )
    }

    fn weight_shape(w: &DeviceMatrix) -> (usize, usize) {
        (w.n, w.k)
    }

    fn matmul(&self, w: &DeviceMatrix, x: &CudaBuffer, m: usize, y: &mut CudaBuffer) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "matmul");
        self.run_gemv(Mode::Plain, w, None, x, m, y, false, None)
    }

    fn matmul_add(
        &self,
        w: &DeviceMatrix,
        x: &CudaBuffer,
        m: usize,
        acc: &mut CudaBuffer,
        scratch: &mut CudaBuffer,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "matmul_add");
        // Decode: the GEMV adds in its epilogue (one launch, no scratch round trip; the plain
        // float formats' step had an add launch after each of its 64 projections, 1.2 us each
        // on the 8B F16 step). Prompts keep the GEMM and the add.
        if m == 1 || streams(&self.dev, Mode::Plain, w, m, x.device_buf()) {
            return self.run_gemv(Mode::Plain, w, None, x, m, acc, true, None);
        }
        self.run_gemv(Mode::Plain, w, None, x, m, scratch, false, None)?;
        self.add(acc, scratch, m * w.n)
    }

    fn matmul_many(
        &self,
        ws: &[&DeviceMatrix],
        x: &CudaBuffer,
        m: usize,
        ys: &mut [&mut CudaBuffer],
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "matmul_many");
        if ws.len() != ys.len() {
            return Err(invalid(
                "ys",
                format!("{} outputs for {} matrices", ys.len(), ws.len()),
            ));
        }
        if let Some(w) = ws.iter().find(|w| w.k != ws[0].k) {
            return Err(invalid(
                "ws",
                format!("k = {} differs from the first matrix's {}", w.k, ws[0].k),
            ));
        }
        for (w, y) in ws.iter().zip(ys.iter()) {
            f32_rows("ys", y, size("ys", m, w.n)?)?;
        }
        // Decode: Q, K and V as one streamed launch where it serves them.
        if m == 1 {
            f32_rows("x", x, ws.first().map_or(0, |w| w.k))?;
            let outs: Vec<_> = ys.iter().map(|y| y.device_buf()).collect();
            if gemv_stacked(&self.dev, ws, x.device_buf(), None, &outs, None)? {
                return Ok(());
            }
        }
        for (w, y) in ws.iter().zip(ys.iter()) {
            self.run_gemv(Mode::Plain, w, None, x, m, y, false, None)?;
        }
        Ok(())
    }

    fn norm_matmul_many(
        &self,
        norm: Norm<'_, CudaBuffer>,
        ws: &[&DeviceMatrix],
        x: &CudaBuffer,
        m: usize,
        h: &mut CudaBuffer,
        ys: &mut [&mut CudaBuffer],
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "norm_matmul_many");
        let k = ws.first().map_or(0, |w| w.k);
        // Decode: Q, K and V as one launch (streamed or direct) that normalizes x itself.
        if m == 1 && ws.iter().all(|w| w.k == k) && ys.len() == ws.len() {
            let nm = self.gemv_norm(norm, k)?;
            f32_rows("x", x, k)?;
            for (w, y) in ws.iter().zip(ys.iter()) {
                f32_rows("ys", y, w.n)?;
            }
            let outs: Vec<_> = ys.iter().map(|y| y.device_buf()).collect();
            if stacks(&self.dev, ws, x.device_buf(), true)
                && gemv_stacked(&self.dev, ws, x.device_buf(), Some(nm), &outs, None)?
            {
                return Ok(());
            }
            // One matrix, or mixed formats (Q4_K_M keeps some layers' V in Q6_K): each run of
            // one format is its own normalizing launch, where a single-row kernel serves every
            // run, instead of a norm launch first (ncu, H100, 8B: it took as long as K's GEMV).
            let keys: Vec<_> = ws.iter().map(|w| (w.format, w.quantized_acts)).collect();
            let runs = format_runs(&keys);
            let served = |r: &std::ops::Range<usize>| match r.len() {
                1 => normalizes(&self.dev, Mode::Plain, ws[r.start], 1, x.device_buf()),
                _ => stacks(&self.dev, &ws[r.clone()], x.device_buf(), true),
            };
            if !runs.is_empty() && runs.iter().all(served) {
                for r in runs {
                    if r.len() == 1 {
                        self.run_gemv(
                            Mode::Plain,
                            ws[r.start],
                            None,
                            x,
                            1,
                            ys[r.start],
                            false,
                            Some(nm),
                        )?;
                    } else {
                        gemv_stacked(
                            &self.dev,
                            &ws[r.clone()],
                            x.device_buf(),
                            Some(nm),
                            &outs[r],
                            None,
                        )?;
                    }
                }
                return Ok(());
            }
        }
        for w in ws {
            norm.check(w.k)?;
        }
        self.rms_norm(x, m, norm.weight, norm.eps, h)?;
        self.matmul_many(ws, h, m, ys)
    }

    fn norm_swiglu(
        &self,
        norm: Norm<'_, CudaBuffer>,
        gate: &DeviceMatrix,
        up: &DeviceMatrix,
        x: &CudaBuffer,
        m: usize,
        h: &mut CudaBuffer,
        out: &mut CudaBuffer,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "norm_swiglu");
        if normalizes(&self.dev, Mode::GateUp, gate, m, x.device_buf()) {
            let nm = self.gemv_norm(norm, gate.k)?;
            return self.run_gemv(Mode::GateUp, gate, Some(up), x, m, out, false, Some(nm));
        }
        norm.check(gate.k)?;
        self.rms_norm(x, m, norm.weight, norm.eps, h)?;
        self.swiglu(gate, up, h, m, out)
    }

    fn swiglu(
        &self,
        gate: &DeviceMatrix,
        up: &DeviceMatrix,
        x: &CudaBuffer,
        m: usize,
        out: &mut CudaBuffer,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "swiglu");
        self.run_gemv(Mode::GateUp, gate, Some(up), x, m, out, false, None)
    }

    fn embedding(
        &self,
        table: &DeviceMatrix,
        ids: Slice<'_, CudaBuffer>,
        out: &mut CudaBuffer,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "embedding");
        u32_slice("ids", &ids)?;
        f32_rows("out", out, size("out", ids.len, table.k)?)?;
        Ok(embedding(
            &self.dev,
            table,
            ids.buf.device_buf(),
            ids.start,
            ids.len,
            out.device_buf(),
            ids.buf.mirrored_u32(ids.start, ids.len),
        )?)
    }

    fn rms_norm(
        &self,
        x: &CudaBuffer,
        rows: usize,
        weight: &CudaBuffer,
        eps: f32,
        out: &mut CudaBuffer,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "rms_norm");
        let d = weight.len();
        if d == 0 || weight.dtype() != DType::F32 {
            return Err(invalid("weight", "expected a non-empty f32 buffer"));
        }
        let n = size("x", rows, d)?;
        f32_rows("x", x, n)?;
        f32_rows("out", out, n)?;
        if d > i32::MAX as usize {
            return Err(invalid("weight", "longer than i32::MAX"));
        }
        if rows == 0 {
            return Ok(());
        }
        let (mut xp, mut wp, mut op) = (
            x.device_buf().ptr(),
            weight.device_buf().ptr(),
            out.device_buf().ptr(),
        );
        let (mut r64, mut d32, mut e) = (rows as i64, d as i32, eps);
        let mut p: [*mut c_void; 6] = [
            (&mut xp as *mut u64).cast(),
            (&mut wp as *mut u64).cast(),
            (&mut op as *mut u64).cast(),
            (&mut r64 as *mut i64).cast(),
            (&mut d32 as *mut i32).cast(),
            (&mut e as *mut f32).cast(),
        ];
        self.ops_launch("fk_rms_norm", (rows, 1024), &mut p)
    }

    fn rope(
        &self,
        x: &mut CudaBuffer,
        heads: usize,
        head_dim: usize,
        positions: Slice<'_, CudaBuffer>,
        rope: &Rope,
        inv_freq: &CudaBuffer,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "rope");
        let half = rope_check(x, heads, head_dim, &positions, rope, inv_freq)?;
        let total = positions.len * heads * half;
        if total == 0 {
            return Ok(());
        }
        let (mut xp, mut pp, mut fp) = (
            x.device_buf().ptr(),
            positions.buf.ptr_at(positions.start),
            inv_freq.device_buf().ptr(),
        );
        let (mut t, mut h, mut hd, mut hf, mut neox, mut ms) = (
            positions.len as i64,
            heads as i32,
            head_dim as i32,
            half as i32,
            (rope.style == RopeStyle::Neox) as i32,
            rope.mscale,
        );
        let mut p: [*mut c_void; 9] = [
            (&mut xp as *mut u64).cast(),
            (&mut pp as *mut u64).cast(),
            (&mut fp as *mut u64).cast(),
            (&mut t as *mut i64).cast(),
            (&mut h as *mut i32).cast(),
            (&mut hd as *mut i32).cast(),
            (&mut hf as *mut i32).cast(),
            (&mut neox as *mut i32).cast(),
            (&mut ms as *mut f32).cast(),
        ];
        self.ops_launch("fk_rope", (total.div_ceil(256), 256), &mut p)
    }

    fn rope_kv_write(
        &self,
        q: &mut CudaBuffer,
        q16: Option<&mut CudaBuffer>,
        k: &mut CudaBuffer,
        v: &CudaBuffer,
        at: RopeKv<'_, CudaBuffer>,
    ) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "rope_kv_write");
        let q16 = q16.map(|h| &*h);
        let Some((mut a, f, total)) = self.rope_kv_args((q, q16, k, v), &at)? else {
            return Ok(());
        };
        let mut p: [*mut c_void; 1] = [(&mut a as *mut FkRopeKv).cast()];
        self.dev.bind()?;
        // SAFETY: fk_rope_kv_write(FkRopeKv) (same layout) rotates `t` rows of q and k (checked
        // by rope_check) and writes K / V rows at slots inside the pool (kv_write_args).
        unsafe {
            crate::runtime::launch(
                f,
                ((total.div_ceil(256)).clamp(1, 65535) as u32, 256, 0),
                self.dev.stream(),
                &mut p,
                self.dev.pdl(),
            )
        }?;
        Ok(())
    }

    fn norm_qkv_rope_kv_write(
        &self,
        norm: Norm<'_, CudaBuffer>,
        ws: [&DeviceMatrix; 3],
        x: &CudaBuffer,
        m: usize,
        h: &mut CudaBuffer,
        (q, k, v): (&mut CudaBuffer, &mut CudaBuffer, &mut CudaBuffer),
        q16: Option<&mut CudaBuffer>,
        at: RopeKv<'_, CudaBuffer>,
    ) -> Result<()> {
        let (heads, head_dim, rope) = (at.heads, at.head_dim, at.rope);
        // One decode token of normal-style RoPE over three matrices a stacked kernel takes:
        // RoPE and the append in its epilogue (FK_SROPE). Anything else: the two calls.
        let k_in = ws[0].k;
        let fusable = m == 1
            && at.positions.len == 1
            && rope.style == RopeStyle::Normal
            && rope_fusion()
            // The epilogue's shared arrays (FK_ROPE_HALF_MAX, FK_ROPE_HKV_MAX).
            && rope.n_rot / 2 <= 256
            && heads.1 <= 64
            // The kernel pairs rows 2i and 2i + 1 (a rotated pair's dims, even first): even
            // head dims keep every pair in one head and the stacked rows even.
            && head_dim.is_multiple_of(2)
            && at.pages.layout.head_dim_v.is_multiple_of(2)
            && ws.iter().all(|w| w.k == k_in)
            && ws[0].n == heads.0 * head_dim
            && ws[1].n == heads.1 * head_dim
            && ws[2].n == heads.1 * at.pages.layout.head_dim_v
            && stacks_rope(&self.dev, &ws, x.device_buf());
        if fusable {
            let _p = self.prof.scope(&self.dev, "norm_qkv_rope_kv_write");
            let nm = self.gemv_norm(norm, k_in)?;
            f32_rows("x", x, k_in)?;
            for (w, y) in ws.iter().zip([&*q, &*k, &*v]) {
                f32_rows("ys", y, w.n)?;
            }
            let q16r = q16.as_deref();
            let Some((mut a, _, _)) = self.rope_kv_args((q, q16r, k, v), &at)? else {
                return Ok(());
            };
            let outs = [q.device_buf(), k.device_buf(), v.device_buf()];
            if gemv_stacked(
                &self.dev,
                &ws,
                x.device_buf(),
                Some(nm),
                &outs,
                Some(&mut a),
            )? {
                return Ok(());
            }
        }
        self.norm_matmul_many(norm, &ws, x, m, h, &mut [&mut *q, &mut *k, &mut *v])?;
        self.rope_kv_write(q, q16, k, v, at)
    }

    fn add(&self, acc: &mut CudaBuffer, x: &CudaBuffer, len: usize) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "add");
        f32_rows("acc", acc, len)?;
        f32_rows("x", x, len)?;
        if len == 0 {
            return Ok(());
        }
        let (mut ap, mut xp, mut l) = (acc.device_buf().ptr(), x.device_buf().ptr(), len as i64);
        let mut p: [*mut c_void; 3] = [
            (&mut ap as *mut u64).cast(),
            (&mut xp as *mut u64).cast(),
            (&mut l as *mut i64).cast(),
        ];
        self.ops_launch("fk_add", (len.div_ceil(256), 256), &mut p)
    }

    fn convert(&self, x: &CudaBuffer, out: &mut CudaBuffer, len: usize) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "convert");
        flexkern::backend::tensor_ops::check_convert(x, out, len)?;
        if len == 0 {
            return Ok(());
        }
        let (mut xp, mut op, mut l) = (x.device_buf().ptr(), out.device_buf().ptr(), len as i64);
        let mut to = if out.dtype() == DType::BF16 { 2i32 } else { 1 };
        let mut p: [*mut c_void; 4] = [
            (&mut xp as *mut u64).cast(),
            (&mut op as *mut u64).cast(),
            (&mut l as *mut i64).cast(),
            (&mut to as *mut i32).cast(),
        ];
        self.ops_launch("fk_convert", (len.div_ceil(256), 256), &mut p)
    }

    fn add_bias(&self, x: &mut CudaBuffer, rows: usize, bias: &CudaBuffer) -> Result<()> {
        let _p = self.prof.scope(&self.dev, "add_bias");
        let d = bias.len();
        if d == 0 || bias.dtype() != DType::F32 || d > i32::MAX as usize {
            return Err(invalid("bias", "expected a non-empty f32 buffer"));
        }
        let n = size("x", rows, d)?;
        f32_rows("x", x, n)?;
        if n == 0 {
            return Ok(());
        }
        let (mut xp, mut bp, mut r, mut d32) = (
            x.device_buf().ptr(),
            bias.device_buf().ptr(),
            rows as i64,
            d as i32,
        );
        let mut p: [*mut c_void; 4] = [
            (&mut xp as *mut u64).cast(),
            (&mut bp as *mut u64).cast(),
            (&mut r as *mut i64).cast(),
            (&mut d32 as *mut i32).cast(),
        ];
        self.ops_launch("fk_add_bias", (n.div_ceil(256), 256), &mut p)
    }

    fn largest(&self, x: &CudaBuffer, n: usize, k: usize) -> Result<Option<Vec<(u32, f32)>>> {
        let _p = self.prof.scope(&self.dev, "largest");
        self.top_k(x, n, k)
    }

    fn record_begin(&self) -> Result<bool> {
        self.graphs
            .lock()
            .expect("graphs lock")
            .begin(&self.dev, self.prof.on())
    }

    fn record_end(&self) -> Result<GraphId> {
        self.graphs
            .lock()
            .expect("graphs lock")
            .end(&self.dev, &self.attn_plan)
    }

    fn replay(
        &self,
        id: GraphId,
        (p, _plan, io): (&Problem, &Plan, AttnIo<'_, CudaBuffer>),
    ) -> Result<bool> {
        self.graphs
            .lock()
            .expect("graphs lock")
            .replay(id, &self.dev, &self.attn_plan, || {
                crate::backend::attn_call(p, &io)
            })
    }

    fn graph_free(&self, id: GraphId) {
        self.graphs.lock().expect("graphs lock").free(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexkern_quant::Format;

    /// Q4_K_M's layers: Q and K one launch, a Q6_K V its own; three of a kind stay one run, a
    /// fourth starts another; a precision change splits too.
    #[test]
    fn format_runs_split_where_a_stacked_launch_cannot_go() {
        let (q4k, q6k) = (Format::Q4K, Format::Q6K);
        assert_eq!(format_runs(&[q4k, q4k, q6k]), vec![0..2, 2..3]);
        assert_eq!(format_runs(&[q4k, q4k, q4k]), vec![0..3]);
        assert_eq!(format_runs(&[q6k]), vec![0..1]);
        assert_eq!(format_runs(&[q4k, q4k, q4k, q4k]), vec![0..3, 3..4]);
        assert_eq!(format_runs(&[q6k, q4k, q6k]), vec![0..1, 1..2, 2..3]);
        assert_eq!(format_runs(&[(q4k, true), (q4k, false)]), vec![0..1, 1..2]);
        assert!(format_runs::<Format>(&[]).is_empty());
    }

    #[test]
    fn ops_compile_with_nvrtc() {
        if !crate::runtime::nvrtc_present() {
            eprintln!("ops_compile_with_nvrtc: libnvrtc not found, skipped");
            return;
        }
        let src = KernelSource {
            name: "ops".into(),
            source: format!("{}\n{}\n{OPS}", text(&[COMMON]), crate::headers::kv_store()),
        };
        let (bin, log) = crate::runtime::compile::compile_verbose(&src, "sm_90a")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!bin.is_empty());
        assert!(
            !log.lines()
                .any(|l| l.contains("spill stores") && !l.contains(" 0 bytes spill stores")),
            "{log}"
        );
        eprintln!("{log}");
    }
}
