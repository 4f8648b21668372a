//! `flexkern bench mixed`: one prefill chunk plus 32 decoding sequences over a paged cache (the
//! step continuous batching makes), GQA 32/8, D 128. Times (a) the mixed call (one plan, each
//! sequence scheduled by its own shape), (b) the two groups as separate calls (their sum), and
//! (c) the single path (`TilePolicy::mixed = false`: the whole batch on the prefill path). The
//! three run in turn each round, in a rotating order, so a neighbour's load lands on all; medians
//! over rounds. Plans are built once, as a server plans per batch layout.

use super::bench_common::{print_rows, Row};
use super::limits::{fma_peak_gflops, median, read_bandwidth_gbs};
use anyhow::{bail, Result};
use clap::Args;
use flexkern::attention::paged::{paged_bufs, prepare_buffers};
use flexkern::attention::plan::{plan, Plan};
use flexkern::attention::problem::Problem;
use flexkern::backend::host::HostBuffer;
use flexkern::backend::{to_device, to_host, AttnIo};
use flexkern::builtins::causal;
use flexkern::kv_cache::{CacheConfig, KvCache, PagedBinding, SeqId};
use flexkern::{Backend, CpuBackend, DType, TensorView, Variant};
use std::time::Instant;

#[derive(Args, Debug)]
pub struct MixedBenchArgs {
    /// Query tokens of the prefill chunk (over a KV of the same length, causal).
    #[arg(long, default_value_t = 2048)]
    pub chunk: usize,
    /// Decoding sequences, one query each.
    #[arg(long, default_value_t = 32)]
    pub decodes: usize,
    /// KV length of each decoding sequence.
    #[arg(long, default_value_t = 8192)]
    pub kv: usize,
    /// KV cache type: bf16 or f32 (the activations are f32).
    #[arg(long, default_value = "bf16")]
    pub kv_type: String,
    /// Timed rounds (after one warm-up round).
    #[arg(long, default_value_t = 7)]
    pub rounds: usize,
    /// Also append the rows to this CSV file.
    #[arg(long)]
    pub csv: Option<std::path::PathBuf>,
}

const HQ: usize = 32;
const HKV: usize = 8;
const D: usize = 128;
const PAGE: usize = 16;

/// Cheap reproducible values in [-1, 1) (a hash of the index and a salt).
fn values(n: usize, salt: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let h = (i ^ salt.wrapping_mul(0x9E37_79B9)).wrapping_mul(0x85EB_CA6B);
            let h = (h ^ (h >> 13)).wrapping_mul(0xC2B2_AE35);
            (h >> 8) as f32 / (1 << 23) as f32 - 1.0
        })
        .collect()
}

/// CPU seconds this process has used (user + system, every thread; /proc/self/stat at the
/// kernel's 100 Hz tick): the work a case costs, whatever share of the cores the neighbours
/// leave it. 0 where /proc is missing.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
}

/// One planned call: its problem, plan, page tables and Q in buffers, and its output.
struct Call {
    p: Problem,
    plan: Plan<'static>,
    tables: HostBuffer,
    q: HostBuffer,
    o: HostBuffer,
    seqs: Vec<SeqId>,
}

impl Call {
    fn new(
        cache: &KvCache<CpuBackend>,
        seqs: &[SeqId],
        q_lens: &[usize],
        q: &[f32],
        mixed: bool,
    ) -> Result<Call> {
        let b = CpuBackend;
        let kv = cache.view(seqs)?;
        let mut cu_q = vec![0u64];
        for &l in q_lens {
            cu_q.push(cu_q.last().unwrap() + l as u64);
        }
        let var = Variant::full().mask(causal());
        let p = prepare_buffers(
            DType::F32,
            HQ,
            &cu_q,
            &kv.store.layout,
            &kv.tables,
            None,
            &var,
        )?;
        let mut caps = b.caps();
        caps.tiles.mixed = mixed;
        let plan = plan(&p, &caps, None)?.into_owned();
        Ok(Call {
            tables: to_device(&b, &kv.tables.packed())?,
            q: to_device(&b, q)?,
            o: b.alloc(DType::F32, q.len())?,
            p,
            plan,
            seqs: seqs.to_vec(),
        })
    }

    /// Runs the call once; returns its wall and CPU time in seconds.
    fn run(&mut self, cache: &KvCache<CpuBackend>) -> Result<(f64, f64)> {
        let kv: PagedBinding<'_, HostBuffer> = cache.view(&self.seqs)?;
        let (t, c) = (Instant::now(), cpu_secs());
        let io = AttnIo {
            q: &self.q,
            kv: paged_bufs(&kv.tables, &kv.store.k, &kv.store.v, &self.tables, 0),
            out: &mut self.o,
            lse: None,
        };
        CpuBackend.attention(&self.p, &self.plan, io)?;
        Ok((t.elapsed().as_secs_f64(), cpu_secs() - c))
    }

    fn output(&self) -> Result<Vec<f32>> {
        Ok(to_host(&CpuBackend, &self.o)?)
    }
}

pub fn run_bench_mixed(a: &MixedBenchArgs) -> Result<()> {
    let kv_dtype = match a.kv_type.as_str() {
        "bf16" => DType::BF16,
        "f32" => DType::F32,
        t => bail!("--kv-type: {t} is not bf16 or f32"),
    };
    if a.chunk <= 16 || a.decodes == 0 || a.kv == 0 || a.rounds == 0 {
        bail!("--chunk must exceed 16 (a prefill), --decodes, --kv and --rounds be positive");
    }
    let b = CpuBackend;
    let row = HKV * D;
    let pages = a.chunk.div_ceil(PAGE) + a.decodes * a.kv.div_ceil(PAGE);
    let mut cfg = CacheConfig::new(pages, PAGE, HKV, D);
    (cfg.k_dtype, cfg.v_dtype) = (kv_dtype, kv_dtype);
    let mut cache = KvCache::new(&b, cfg)?;
    cache.shuffle_free_pages(1);
    fn tv(x: &[f32]) -> TensorView<'_> {
        TensorView::contiguous(x, &[x.len() / (HKV * D), HKV, D])
    }
    let mut append = |len: usize, salt: u32| -> Result<SeqId> {
        let id = cache.add_seq();
        let (k, v) = (values(len * row, salt), values(len * row, salt + 7919));
        cache.append(&b, id, &tv(&k), &tv(&v))?;
        Ok(id)
    };
    let chunk_id = append(a.chunk, 1)?;
    let decode_ids: Vec<SeqId> = (0..a.decodes)
        .map(|s| append(a.kv, 100 + s as u32))
        .collect::<Result<_>>()?;
    let q = values((a.chunk + a.decodes) * HQ * D, 3);
    let (q_chunk, q_dec) = q.split_at(a.chunk * HQ * D);
    let all: Vec<SeqId> = std::iter::once(chunk_id)
        .chain(decode_ids.clone())
        .collect();
    let q_lens: Vec<usize> = std::iter::once(a.chunk)
        .chain(std::iter::repeat_n(1, a.decodes))
        .collect();
    let mut mixed = Call::new(&cache, &all, &q_lens, &q, true)?;
    let mut single = Call::new(&cache, &all, &q_lens, &q, false)?;
    let mut pre = Call::new(&cache, &[chunk_id], &[a.chunk], q_chunk, true)?;
    let mut dec = Call::new(&cache, &decode_ids, &vec![1; a.decodes], q_dec, true)?;

    println!(
        "flexkern bench mixed ({} threads): a {}-token prefill chunk (causal) + {} decodes at \
         KV {}, Hq{HQ}/Hkv{HKV} D{D}, {} paged KV (page {PAGE}), f32 Q",
        rayon::current_num_threads(),
        a.chunk,
        a.decodes,
        a.kv,
        kv_dtype.name()
    );
    let fma = fma_peak_gflops();
    let bw = read_bandwidth_gbs();
    println!(
        "machine limits (measured now): FMA peak {fma:.1} GFLOP/s, read bandwidth {bw:.2} GB/s"
    );
    let (mut tm, mut ts, mut tp, mut td, mut t1) = (vec![], vec![], vec![], vec![], vec![]);
    // CPU seconds of mixed, separate, single.
    let mut cpu = [vec![], vec![], vec![]];
    for round in 0..=a.rounds {
        let z = (0.0, 0.0);
        let (mut m, mut p, mut d, mut s) = (z, z, z, z);
        // Rotate the order so no case always runs right after another.
        for k in 0..3 {
            match (round + k) % 3 {
                0 => m = mixed.run(&cache)?,
                1 => {
                    p = pre.run(&cache)?;
                    d = dec.run(&cache)?;
                }
                _ => s = single.run(&cache)?,
            }
        }
        if round > 0 {
            // The first round warms caches, pages and the thread pool.
            tm.push(m.0);
            tp.push(p.0);
            td.push(d.0);
            ts.push(p.0 + d.0);
            t1.push(s.0);
            for (v, x) in cpu.iter_mut().zip([m.1, p.1 + d.1, s.1]) {
                v.push(x);
            }
        }
    }
    // The three computed the same attention.
    let (om, o1) = (mixed.output()?, single.output()?);
    let mut sep = pre.output()?;
    sep.extend(dec.output()?);
    for (name, o) in [("separate", &sep), ("single path", &o1)] {
        let scale = om.iter().fold(1e-30f32, |x, v| x.max(v.abs()));
        let err = om
            .iter()
            .zip(o)
            .fold(0f32, |x, (a, b)| x.max((a - b).abs()))
            / scale;
        if err.is_nan() || err > 1e-4 {
            bail!("mixed and {name} outputs differ: relative error {err}");
        }
    }
    // Ratios within a round (the three ran back to back, under the same neighbours' load).
    let paired = |x: &[f64], y: &[f64]| median(x.iter().zip(y).map(|(a, b)| a / b).collect());
    let (r_sep, r_one) = (paired(&tm, &ts), paired(&t1, &tm));
    let (c_sep, c_one) = (paired(&cpu[0], &cpu[1]), paired(&cpu[2], &cpu[0]));
    let [cm, cs, c1] = cpu.map(median);
    let (m, s, p, d, one) = (median(tm), median(ts), median(tp), median(td), median(t1));
    let flops = 4.0 * (HQ * D) as f64 * (a.chunk * (a.chunk + 1) / 2 + a.decodes * a.kv) as f64;
    let bytes = (2 * row * kv_dtype.size() * (a.chunk + a.decodes * a.kv)) as f64;
    // A lower bound: the chunk's flops at the FMA peak plus the decodes' reads at full bandwidth.
    let bound = 4.0 * (HQ * D) as f64 * (a.chunk * (a.chunk + 1) / 2) as f64 / (fma * 1e9)
        + (2 * row * kv_dtype.size() * a.decodes * a.kv) as f64 / (bw * 1e9);
    let case = |w: &str| {
        format!(
            "mixed {w} {}+{}x{} {}",
            a.chunk,
            a.decodes,
            a.kv,
            kv_dtype.name()
        )
    };
    let row_of = |c: String, t: f64, ratio: f64, limit: String| Row {
        case: c,
        ms: t * 1e3,
        gflops: flops / t / 1e9,
        gbs: bytes / t / 1e9,
        ratio,
        limit,
    };
    let rows = vec![
        row_of(case("one call"), m, m / s, "separate calls' time".into()),
        row_of(case("separate (sum)"), s, s / m, "mixed time".into()),
        row_of(case("single path"), one, one / m, "mixed time".into()),
        row_of(
            case("one call"),
            m,
            bound / m,
            format!(
                "bound: chunk at FMA peak + decodes at read bandwidth ({:.1} ms)",
                bound * 1e3
            ),
        ),
    ];
    print_rows(&rows, a.csv.as_deref())?;
    println!(
        "separate: prefill chunk {:.2} ms + decodes {:.2} ms (medians of {} rounds); paired \
         within rounds: mixed / separate {r_sep:.3}, single path / mixed {r_one:.3} (medians)",
        p * 1e3,
        d * 1e3,
        a.rounds
    );
    println!(
        "CPU time (all threads): mixed {:.0} ms, separate {:.0} ms, single path {:.0} ms; \
         paired: mixed / separate {c_sep:.3}, single path / mixed {c_one:.3}",
        cm * 1e3,
        cs * 1e3,
        c1 * 1e3
    );
    Ok(())
}
