//! `flexkern bench attn --device cuda`: decode attention timed with CUDA events around the whole
//! call (step upload, attention kernel, merge), beside the card's copy and read rates measured in
//! the same run (`device.rs`); and `bench gemv --device cuda`.

use crate::attention::{self, AttnCall, DeviceTables, KvInput, KvOperand, PagedKv, QInput};
use crate::error::Result;
use crate::runtime::Device;
use flexkern::attention::problem::SeqLens;
use flexkern::builtins::causal;
use flexkern::{DType, Variant};
use std::sync::Arc;

mod device;
pub mod prefill;

pub use device::*;

/// One decode shape.
#[derive(Clone, Debug)]
pub struct DecodeShape {
    pub batch: usize,
    pub kv_len: usize,
    pub hq: usize,
    pub hkv: usize,
    pub d: usize,
    pub kv_dtype: DType,
    /// Page size, or contiguous KV.
    pub page_size: Option<usize>,
}

impl DecodeShape {
    pub fn name(&self) -> String {
        format!(
            "decode B{} L{} Hq{}/Hkv{} D{} {} {}",
            self.batch,
            self.kv_len,
            self.hq,
            self.hkv,
            self.d,
            self.kv_dtype.name(),
            self.page_size
                .map_or("contiguous".to_string(), |p| format!("paged{p}"))
        )
    }
    pub fn kv_bytes(&self) -> usize {
        2 * self.batch * self.kv_len * self.hkv * self.d * self.kv_dtype.size()
    }
}

/// The shapes: bf16 D128 Hq32/Hkv8 at B64x8k, B8x32k, B1x128k, contiguous and paged(16);
/// fp8 e4m3 at B1x128k; SmolLM2 (Hq9/Hkv3, D64) at B64x8k.
pub fn standard_shapes(quick: bool) -> Vec<DecodeShape> {
    let s = |batch, kv_len, hq, hkv, d, kv_dtype, page_size| DecodeShape {
        batch,
        kv_len,
        hq,
        hkv,
        d,
        kv_dtype,
        page_size,
    };
    let div = if quick { 8 } else { 1 };
    let mut v = Vec::new();
    for (b, l) in [(64, 8192), (8, 32768), (1, 131072)] {
        for p in [None, Some(16)] {
            v.push(s(b, l / div, 32, 8, 128, DType::BF16, p));
        }
    }
    for p in [None, Some(16)] {
        v.push(s(1, 131072 / div, 32, 8, 128, DType::Fp8E4M3, p));
    }
    for p in [None, Some(16)] {
        v.push(s(64, 8192 / div, 9, 3, 64, DType::BF16, p));
    }
    v
}

/// Decode at a model step's short contexts (B1, 64 and 160 keys, paged 16): the 8B shape's
/// heads and SmolLM2's; and a lone sequence of 1024 and 2048 keys, split into at most a block
/// an SM. Bound by latency, not bytes (`bench attn --only short`, not in the default run):
/// with `FLEXKERN_CUDA_TRACE=1` their phase marks say where a step's attention spends its few
/// microseconds.
pub fn short_shapes() -> Vec<DecodeShape> {
    let s = |kv_len, hq, hkv, d| DecodeShape {
        batch: 1,
        kv_len,
        hq,
        hkv,
        d,
        kv_dtype: DType::BF16,
        page_size: Some(16),
    };
    vec![
        s(64, 32, 8, 128),
        s(160, 32, 8, 128),
        s(1024, 32, 8, 128),
        s(2048, 32, 8, 128),
        s(64, 9, 3, 64),
        s(160, 9, 3, 64),
    ]
}

/// What one decode shape ran: time, kernel, partitions, registers.
pub struct DecodeRun {
    /// A layer's whole call, its plan reused (`attention_memo`, as the model's layers share
    /// one plan a step): validation, plan lookup, attention and merge kernels.
    pub ms: f64,
    /// The same call queued behind other GPU work (`time_ms_queued`): its kernels alone, back
    /// to back, as in a model's step.
    pub queued_ms: f64,
    /// A call planned afresh (`attention`): planning and the step upload too.
    pub fresh_ms: f64,
    /// Host microseconds of planning alone (`prepare`: validation, plan, step upload queued).
    pub plan_us: f64,
    /// The kernels of a prepared call alone.
    pub launch_ms: f64,
    pub kernel: String,
    pub blocks: usize,
    pub chunk: usize,
    pub regs: i32,
    pub local_bytes: i32,
    /// The prepared call's block timeline (`FLEXKERN_CUDA_TRACE=1`).
    pub trace: Option<String>,
}

/// Times one decode shape; the median milliseconds of the whole call. Contiguous KV is
/// head-major (`[B, Hkv, L, D]`, the PyTorch peers' layout); paged KV is `[page, slot, Hkv,
/// D]` with shuffled pages and device-resident page tables.
pub fn decode(
    dev: &Arc<Device>,
    s: &DecodeShape,
    reps: usize,
    deterministic: bool,
) -> Result<DecodeRun> {
    let (b, l, hq, hkv, d) = (s.batch, s.kv_len, s.hq, s.hkv, s.d);
    let lens = SeqLens::uniform(b, 1, l);
    let q = random(dev, b * hq * d, DType::BF16, 1)?;
    let k = random(dev, b * l * hkv * d, s.kv_dtype, 2)?;
    let v = random(dev, b * l * hkv * d, s.kv_dtype, 3)?;
    let out = dev.alloc(b * hq * d * 4)?;
    let lse = dev.alloc(b * hq * 4)?;
    let variant = Variant::full().mask(causal()).compile()?;
    let q_base: Vec<usize> = (0..b).map(|i| i * hq * d).collect();
    let kv_base: Vec<usize> = (0..b).map(|i| i * l * hkv * d).collect();
    let scales = vec![0.01f32; hkv];
    let (cu, first, pages) = s.page_size.map_or((vec![0], vec![0; b], vec![]), |ps| {
        prefill::shuffled_pages(b, l.div_ceil(ps), 5)
    });
    // The page tables live on the device, as the model's page-table manager keeps them.
    let tables = dev.upload(&[&cu[..], &first[..], &pages[..]].concat())?;
    // `FLEXKERN_BENCH_KV=token` lays contiguous K/V out token-major (`[B, L, Hkv, D]`, the
    // paged pool's order within a page) for A/B runs of the layout alone.
    let token_major = std::env::var("FLEXKERN_BENCH_KV").is_ok_and(|v| v == "token");
    let (tok_stride, head_stride) = if token_major {
        (hkv * d, d)
    } else {
        (d, l * d)
    };
    let kv = match s.page_size {
        None => KvInput::Strided {
            k: KvOperand {
                buf: &k,
                dtype: s.kv_dtype,
                seq_base: &kv_base,
                tok_stride,
                head_stride,
            },
            v: KvOperand {
                buf: &v,
                dtype: s.kv_dtype,
                seq_base: &kv_base,
                tok_stride,
                head_stride,
            },
        },
        Some(ps) => KvInput::Paged(PagedKv {
            k: &k,
            v: &v,
            k_dtype: s.kv_dtype,
            v_dtype: s.kv_dtype,
            page_size: ps,
            num_pages: b * l.div_ceil(ps),
            cu_pages: &[],
            first_page: &[],
            page_indices: &[],
            device_tables: Some(DeviceTables {
                cu_pages: tables.ptr(),
                first_page: tables.ptr() + 4 * cu.len() as u64,
                page_indices: tables.ptr() + 4 * (cu.len() + first.len()) as u64,
                page_indices_len: pages.len(),
            }),
        }),
    };
    let call = AttnCall {
        lens: &lens,
        num_q_heads: hq,
        num_kv_heads: hkv,
        head_dim: d,
        head_dim_v: d,
        scale: 1.0 / (d as f32).sqrt(),
        variant: &variant,
        q: QInput {
            buf: &q,
            dtype: DType::BF16,
            seq_base: &q_base,
            tok_stride: hq * d,
            head_stride: d,
        },
        kv,
        k_scales: &scales,
        v_scales: &scales,
        out: &out,
        lse: Some(&lse),
        deterministic,
    };
    let p = attention::prepare(dev, &call)?.expect("non-empty");
    let (regs, local_bytes) = p.kernel_resources()?;
    let (kernel, blocks, chunk) = (p.config.name(), p.plan.items.len() * hkv, p.plan.chunk);
    let launch_ms = time_ms(dev, 3, reps, || p.launch())?;
    let trace = p.block_trace()?.map(|t| t.summary(dev.props.sms));
    drop(p);
    let mut plan_us = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = std::time::Instant::now();
        let p = attention::prepare(dev, &call)?;
        plan_us.push(t.elapsed().as_secs_f64() * 1e6);
        dev.synchronize()?; // the step upload has landed before `p`'s buffers go back
        drop(p);
    }
    let fresh_ms = time_ms(dev, 3, reps, || attention::attention(dev, &call))?;
    let memo = attention::PlanMemo::default();
    let ms = time_ms(dev, 3, reps, || {
        attention::attention_memo(dev, &call, &memo)
    })?;
    let queued_ms = time_ms_queued(dev, 3, reps, || {
        attention::attention_memo(dev, &call, &memo)
    })?;
    Ok(DecodeRun {
        ms,
        queued_ms,
        fresh_ms,
        plan_us: median(plan_us),
        launch_ms,
        kernel,
        blocks,
        chunk,
        regs,
        local_bytes,
        trace,
    })
}

/// How `gemv` runs: activations quantized first (the default precision), and the pass over the
/// copies replayed as one CUDA graph (as a decode step runs: no host work between launches).
#[derive(Clone, Copy, Debug, Default)]
pub struct GemvHow {
    pub quantized_acts: bool,
    pub graph: bool,
    /// One weight copy launched `IN_L2_LAUNCHES` times a pass: the bytes come from L2 where
    /// they fit, so the rate is the kernel's own ceiling (instructions, launches).
    pub in_l2: bool,
}

/// Launches of the one copy a pass under `GemvHow::in_l2`.
const IN_L2_LAUNCHES: usize = 32;

/// One GEMV timing: median milliseconds per call and the weight bytes one call reads.
pub struct GemvRun {
    pub ms: f64,
    pub weight_bytes: usize,
    pub kernel: String,
}

/// Times `y[m, n] = x[m, k] · Wᵀ` for `format` with random weight bytes made on the device
/// (valid floats for F32 / F16 / BF16; any bytes decode for the block formats, which is all a
/// timing needs). Enough distinct weight copies that they overflow the L2 cache are visited in
/// turn, each rep timing one pass over all of them (CUDA events), so every call streams its
/// weights from HBM as a decode step does.
pub fn gemv(
    dev: &Arc<Device>,
    format: flexkern_quant::Format,
    n: usize,
    k: usize,
    m: usize,
    reps: usize,
    how: GemvHow,
) -> Result<GemvRun> {
    use crate::quant::gemv::{gemv as run, DeviceMatrix, GemvCall};
    use flexkern_quant::Format;
    crate::quant::unit_type(format, k)?;
    let bytes = format
        .tensor_bytes(n, k)
        .map_err(|e| crate::error::invalid("n", e.to_string()))?;
    let copies = if how.in_l2 {
        1
    } else {
        (dev.props.l2_bytes.max(1 << 20) * 4)
            .div_ceil(bytes)
            .clamp(2, 64)
    };
    let launches = if how.in_l2 { IN_L2_LAUNCHES } else { copies };
    let mut mats = Vec::with_capacity(copies);
    for c in 0..copies {
        let buf = match format {
            Format::F32 => random(dev, n * k, DType::F32, 100 + c as u64)?,
            Format::F16 => random(dev, n * k, DType::F16, 100 + c as u64)?,
            Format::BF16 => random(dev, n * k, DType::BF16, 100 + c as u64)?,
            _ => random(dev, bytes, DType::U8, 100 + c as u64)?,
        };
        mats.push(
            DeviceMatrix::from_device(buf, format, n, k)?
                .with_quantized_activations(how.quantized_acts),
        );
    }
    let x = random(dev, m * k, DType::F32, 7)?;
    let y = dev.alloc(m * n * 4)?;
    let kernel = match mats[0].gemm_plan(crate::quant::Mode::Plain, m) {
        Some(g) => g.mma_source().name + if g.direct { "" } else { " (+decode)" },
        None => {
            crate::quant::choose::config_for(&dev.props, crate::quant::Mode::Plain, &mats[0], m)
                .source()
                .name
        }
    };
    let pass = || -> Result<()> {
        for a in mats.iter().cycle().take(launches) {
            run(
                dev,
                &GemvCall {
                    accumulate: false,
                    norm: None,
                    mode: crate::quant::Mode::Plain,
                    a,
                    b: None,
                    x: &x,
                    x2: None,
                    y: &y,
                    m,
                },
            )?;
        }
        Ok(())
    };
    let ms = if how.graph {
        pass()?; // kernels loaded before the capture
        dev.capture_begin()?;
        let captured = pass();
        let graph = dev.capture_end();
        captured?;
        let graph = graph?;
        let ms = time_ms(dev, 2, reps, || graph.launch(dev))?;
        // `FLEXKERN_CUDA_TRACE=step[,prologue]`: one more replay's timeline (every launch's
        // wait, prologue and tail; runtime/step_trace.rs), after the timed ones.
        if crate::runtime::step_trace::enabled() {
            dev.step_trace_reset()?;
            graph.launch(dev)?;
            if let Some(b) = dev.step_trace_blocks()? {
                eprintln!(
                    "{format:?} {n} x {k}: {}{}{}",
                    crate::runtime::step_trace::summary(&b),
                    crate::runtime::step_trace::spread(&b, 3),
                    crate::runtime::step_trace::sm_spread(&b, 6)
                );
            }
        }
        ms
    } else {
        time_ms(dev, 2, reps, pass)?
    };
    Ok(GemvRun {
        ms: ms / launches as f64,
        weight_bytes: bytes,
        kernel,
    })
}
