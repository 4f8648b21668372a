//! `flexkern bench`: attention benchmarks reported beside the machine limits measured in the
//! same run (FMA rate, read bandwidth). Medians of repeated runs.

use super::bench_common::{print_rows, AttnBenchArgs, Row};
use super::limits::{fma_peak_gflops, median, median_secs, read_bandwidth_gbs, BandwidthProbe};
use anyhow::Result;
use clap::{Args, Subcommand};
use flexkern::attention::plan::{plan, Plan};
use flexkern::attention::problem::{Problem, SeqLens};
use flexkern::attention::upload_data;
use flexkern::backend::host::HostBuffer;
use flexkern::backend::{AttnIo, KvBufs};
use flexkern::builtins::{causal, sliding_window};
use flexkern::mem::huge_vec;
use flexkern::verify::{Input, Rng};
use flexkern::Backend;
use flexkern::{AttentionArgs, BlockMask, CpuBackend, DType, Variant};
use std::time::Instant;

/// `flexkern bench [attn|gemv|mixed]`: no subcommand runs attn and gemv with their defaults.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: Option<BenchWhat>,
}

#[derive(Subcommand, Debug)]
pub enum BenchWhat {
    /// Attention: prefill, sliding window, BlockMask build, decode, paged and quantized KV.
    Attn(AttnBenchArgs),
    /// Quantized GEMV per format beside measured read bandwidth.
    Gemv(super::bench_gemv::BenchGemvArgs),
    /// A prefill chunk plus decodes: one mixed call, separate calls, the single path.
    Mixed(super::bench_mixed::MixedBenchArgs),
}

/// Random inputs on huge pages, as the paged KV cache they are compared with.
fn random(n: usize, dtype: DType, seed: u64) -> Input {
    let mut rng = Rng::new(seed);
    let v: Vec<f32> = (0..n).map(|_| rng.uniform()).collect();
    match dtype {
        DType::F16 => Input::F16(huge_vec(n, |i| half::f16::from_f32(v[i]))),
        DType::BF16 => Input::BF16(huge_vec(n, |i| half::bf16::from_f32(v[i]))),
        _ => Input::F32(huge_vec(n, |i| v[i])),
    }
}

/// One attention problem with its operands in backend buffers and its plan built once (as a
/// serving engine plans per batch layout), timed call by call.
struct Timed {
    p: Problem,
    plan: Plan<'static>,
    q: HostBuffer,
    k: HostBuffer,
    v: HostBuffer,
    o: HostBuffer,
    times: Vec<f64>,
}

impl Timed {
    /// Q `[q_len, hq, d]`, K/V `[kv_len, hkv, d]`; one untimed call warms caches and pages.
    fn new(inputs: &[Input; 3], shape: [usize; 5], variant: &Variant) -> Result<Timed> {
        let [q_len, kv_len, hq, hkv, d] = shape;
        let [q, k, v] = inputs;
        let args = AttentionArgs::new(
            q.view(&[q_len, hq, d]),
            k.view(&[kv_len, hkv, d]),
            v.view(&[kv_len, hkv, d]),
        )
        .variant(variant.clone());
        let p = args.prepare()?;
        let b = CpuBackend;
        let plan = plan(&p, &b.caps(), None)?.into_owned();
        let mut t = Timed {
            q: upload_data(&b, &args.q.data)?,
            k: upload_data(&b, &args.k.data)?,
            v: upload_data(&b, &args.v.data)?,
            o: b.alloc(DType::F32, q_len * hq * d)?,
            p,
            plan,
            times: Vec::new(),
        };
        t.time(1)?;
        t.times.clear();
        Ok(t)
    }

    fn time(&mut self, reps: usize) -> Result<()> {
        for _ in 0..reps {
            let t = Instant::now();
            let io = AttnIo {
                q: &self.q,
                kv: KvBufs::Strided {
                    k: &self.k,
                    v: &self.v,
                },
                out: &mut self.o,
                lse: None,
            };
            CpuBackend.attention(&self.p, &self.plan, io)?;
            self.times.push(t.elapsed().as_secs_f64());
        }
        Ok(())
    }

    fn median(&self) -> f64 {
        median(self.times.clone())
    }
}

fn inputs(
    dtype: DType,
    q_len: usize,
    kv_len: usize,
    hq: usize,
    hkv: usize,
    d: usize,
) -> [Input; 3] {
    [
        random(q_len * hq * d, dtype, 1),
        random(kv_len * hkv * d, dtype, 2),
        random(kv_len * hkv * d, dtype, 3),
    ]
}

/// Median time of one attention call, seconds.
fn time_attention(dtype: DType, shape: [usize; 5], variant: &Variant, reps: usize) -> Result<f64> {
    let [q_len, kv_len, hq, hkv, d] = shape;
    let inputs = inputs(dtype, q_len, kv_len, hq, hkv, d);
    let mut t = Timed::new(&inputs, shape, variant)?;
    t.time(reps)?;
    Ok(t.median())
}

/// Timing rounds of the decode cases: each round probes the bandwidth and times every dtype, so
/// a neighbour's burst on a shared machine lands on cases and limit alike.
const DECODE_ROUNDS: usize = 5;

pub fn run_attention_benches(quick: bool, only: &str, fma: f64) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let want = |section: &str| section.contains(only);
    let reps = if quick { 1 } else { 5 };
    let s = if quick { 1024 } else { 4096 };
    let (h, d) = (8, 128);
    let kv = if quick { 4096 } else { 32768 };
    let full_flops = 4.0 * (s * s * d * h) as f64;
    let causal_v = Variant::full().mask(causal());
    if want("prefill") {
        for (name, v, flops) in [
            ("causal", &causal_v, full_flops / 2.0),
            ("dense", &Variant::full(), full_flops),
        ] {
            let t = time_attention(DType::F32, [s, s, h, h, d], v, reps)?;
            // The peak again right after the case, and the higher of the two figures: a
            // neighbour's burst during one short probe would flatter the ratio.
            let fma = fma.max(fma_peak_gflops());
            rows.push(Row {
                case: format!("prefill f32 {name} S{s} H{h} D{d}"),
                ms: t * 1e3,
                gflops: flops / t / 1e9,
                gbs: 0.0,
                ratio: flops / t / 1e9 / fma,
                limit: format!("FMA peak ({fma:.1} GFLOP/s, before or after)"),
            });
        }
        // Sliding window: compare with the dense rate times the kept fraction.
        let w = 256;
        let kept: f64 = (0..s).map(|i| (i + 1).min(w) as f64).sum();
        let dense_t = rows[1].ms / 1e3;
        let sw = Variant::full()
            .mask(causal())
            .mask(sliding_window(w as i64));
        let t = time_attention(DType::F32, [s, s, h, h, d], &sw, reps)?;
        let ideal = dense_t * kept / (s * s) as f64;
        let flops = 4.0 * kept * (d * h) as f64;
        rows.push(Row {
            case: format!("prefill f32 sliding {w}+causal S{s} (time/ideal)"),
            ms: t * 1e3,
            gflops: flops / t / 1e9,
            gbs: 0.0,
            ratio: t / ideal,
            limit: "ideal time".into(),
        });
        // BlockMask construction for causal, as a fraction of the attention it serves.
        let prog = causal_v.compile()?.mask;
        let lens = SeqLens::single(s, s);
        let bt = median_secs(1, reps.max(3), || {
            std::hint::black_box(BlockMask::build(prog.as_ref(), &lens, h, 64, 64).ok());
        });
        rows.push(Row {
            case: format!("BlockMask build causal S{s} (of causal attn)"),
            ms: bt * 1e3,
            gflops: 0.0,
            gbs: 0.0,
            ratio: bt / (rows[0].ms / 1e3),
            limit: "attention time".into(),
        });
    }
    // Decode: one query, long KV, GQA 32/8: bandwidth bound. Rated against the bandwidth
    // measured in the same rounds (the best of 3 passes per round, median over rounds).
    if want("decode") {
        let dtypes = [DType::F32, DType::F16, DType::BF16];
        let shape = [1, kv, 32, 8, d];
        let data: Vec<[Input; 3]> = dtypes.iter().map(|&t| inputs(t, 1, kv, 32, 8, d)).collect();
        let mut cases: Vec<Timed> = data
            .iter()
            .map(|x| Timed::new(x, shape, &causal_v))
            .collect::<Result<_>>()?;
        let probe = BandwidthProbe::new(if quick { 128 } else { 512 });
        let mut limits = Vec::new();
        for _ in 0..DECODE_ROUNDS {
            limits.push((0..3).map(|_| probe.pass()).fold(0.0, f64::max));
            for c in cases.iter_mut() {
                c.time((reps * 4).div_ceil(DECODE_ROUNDS))?;
            }
        }
        let bw = median(limits);
        for (dtype, c) in dtypes.iter().zip(&cases) {
            let t = c.median();
            let bytes = (2 * kv * 8 * d * dtype.size()) as f64;
            rows.push(Row {
                case: format!("decode {} KV{kv} Hq32/Hkv8 D{d}", dtype.name()),
                ms: t * 1e3,
                gflops: 0.0,
                gbs: bytes / t / 1e9,
                ratio: bytes / t / 1e9 / bw,
                limit: format!("read bandwidth ({bw:.2} GB/s, same rounds)"),
            });
        }
    }
    // Paged decode (shuffled pages) against contiguous, and fp8 KV against bf16 KV.
    if want("paged") {
        let shape = (32, 8, d);
        for (act, ps) in [(DType::F32, 16), (DType::F32, 64), (DType::BF16, 16)] {
            let t = super::paged::bench_paged_decode(shape, kv, ps, act, None, reps * 4)?;
            let bytes = (2 * kv * 8 * d * act.size()) as f64;
            rows.push(Row {
                case: format!(
                    "decode paged {} page {ps} KV{kv} (paged/contiguous)",
                    act.name()
                ),
                ms: t.paged_ms,
                gflops: 0.0,
                gbs: bytes / (t.paged_ms / 1e3) / 1e9,
                ratio: t.paged_ms / t.contiguous_ms,
                limit: "contiguous time".into(),
            });
        }
        let bf = super::paged::bench_paged_decode(shape, kv, 16, DType::BF16, None, reps * 4)?;
        for kvd in [DType::Fp8E4M3, DType::Fp8E5M2, DType::I8] {
            let t =
                super::paged::bench_paged_decode(shape, kv, 16, DType::BF16, Some(kvd), reps * 4)?;
            let bytes = (2 * kv * 8 * d) as f64;
            rows.push(Row {
                case: format!("decode paged {} KV{kv} (time / bf16 KV time)", kvd.name()),
                ms: t.paged_ms,
                gflops: 0.0,
                gbs: bytes / (t.paged_ms / 1e3) / 1e9,
                ratio: t.paged_ms / bf.paged_ms,
                limit: "bf16 KV time".into(),
            });
        }
    }
    // Cascade: 32 sequences sharing a 16k prefix, against independent paged attention.
    if want("cascade") {
        let prefix = if quick { 2048 } else { 16384 };
        for kvd in [DType::F32, DType::BF16] {
            rows.extend(super::bench_cascade::bench_cascade(
                prefix,
                kvd,
                reps * 2,
                fma,
            )?);
        }
    }
    Ok(rows)
}

fn run_attn_bench(a: &AttnBenchArgs) -> Result<()> {
    println!(
        "flexkern bench attn ({} threads)",
        rayon::current_num_threads()
    );
    let fma = fma_peak_gflops();
    let bw = read_bandwidth_gbs();
    println!(
        "machine limits (measured now): FMA peak {fma:.1} GFLOP/s, read bandwidth {bw:.2} GB/s"
    );
    let rows = run_attention_benches(a.quick, &a.only, fma)?;
    print_rows(&rows, a.csv.as_deref())
}

pub fn run_bench(a: &BenchArgs) -> Result<()> {
    match &a.what {
        Some(BenchWhat::Attn(x)) if x.device == super::device::Device::Cuda => {
            super::cuda::bench_attn(x)
        }
        Some(BenchWhat::Attn(x)) => run_attn_bench(x),
        // `--precise` keeps f32 activations there too (the default quantizes them to Q8_0
        // where the format has the integer dot, as the CPU does).
        Some(BenchWhat::Gemv(x)) if x.device == super::device::Device::Cuda => {
            super::cuda_gemv::bench_gemv(x)
        }
        Some(BenchWhat::Gemv(x)) => super::bench_gemv::run_bench_gemv(x),
        Some(BenchWhat::Mixed(x)) => super::bench_mixed::run_bench_mixed(x),
        None => {
            run_attn_bench(&AttnBenchArgs::default())?;
            #[derive(clap::Parser)]
            struct Defaults {
                #[command(flatten)]
                gemv: super::bench_gemv::BenchGemvArgs,
            }
            super::bench_gemv::run_bench_gemv(
                &<Defaults as clap::Parser>::parse_from(["bench"]).gemv,
            )
        }
    }
}
