//! `flexkern tune`: measures the CPU attention tile choices on this machine (prefill tile rows
//! and kv block, decode kv block and split thresholds) by running the real kernels on
//! representative shapes, candidates alternated round by round and medians compared, and
//! writes the winners into the tune table the CPU backend reads (`flexkern::tune`).

use super::device::Device;
use super::limits::median;
use anyhow::{bail, Result};
use clap::Args;
use flexkern::attention::plan::{plan, Plan};
use flexkern::attention::problem::Problem;
use flexkern::attention::upload_data;
use flexkern::backend::host::HostBuffer;
use flexkern::backend::{AttnIo, KvBufs};
use flexkern::builtins::causal;
use flexkern::device::TilePolicy;
use flexkern::tune::{self, CPU_ATTENTION};
use flexkern::verify::{Input, Rng};
use flexkern::{AttentionArgs, Backend, Caps, CpuBackend, DType, Variant};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct TuneArgs {
    #[arg(long, value_enum, default_value_t)]
    pub device: Device,
    /// The table to update (default: $FLEXKERN_TUNE_FILE, else <cache dir>/tune.json).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Smaller shapes and fewer rounds (under 20 s).
    #[arg(long)]
    pub quick: bool,
}

/// A candidate wins only if it beats the default by more than this (timing noise on a
/// shared machine is about this size).
const MARGIN: f64 = 0.03;

/// One attention problem on backend buffers, run under any tile policy.
struct Case {
    name: String,
    p: Problem,
    q: HostBuffer,
    k: HostBuffer,
    v: HostBuffer,
    o: HostBuffer,
}

fn random(n: usize, dtype: DType, seed: u64) -> Input {
    let mut rng = Rng::new(seed);
    match dtype {
        DType::F16 => Input::F16((0..n).map(|_| half::f16::from_f32(rng.uniform())).collect()),
        _ => Input::F32((0..n).map(|_| rng.uniform()).collect()),
    }
}

impl Case {
    /// `seqs` sequences of `q_len` queries over `kv_len` keys each, all in `dtype`; causal.
    fn new(
        name: &str,
        seqs: usize,
        q_len: usize,
        kv_len: usize,
        heads: (usize, usize, usize),
        dtype: DType,
    ) -> Result<Case> {
        let (hq, hkv, d) = heads;
        let q = random(seqs * q_len * hq * d, dtype, 1);
        let k = random(seqs * kv_len * hkv * d, dtype, 2);
        let v = random(seqs * kv_len * hkv * d, dtype, 3);
        let cu_q: Vec<u64> = (0..=seqs as u64).map(|i| i * q_len as u64).collect();
        let cu_kv: Vec<u64> = (0..=seqs as u64).map(|i| i * kv_len as u64).collect();
        let args = AttentionArgs::new(
            q.view(&[seqs * q_len, hq, d]),
            k.view(&[seqs * kv_len, hkv, d]),
            v.view(&[seqs * kv_len, hkv, d]),
        )
        .ragged(&cu_q, &cu_kv)
        .variant(Variant::full().mask(causal()));
        let p = args.prepare()?;
        let b = CpuBackend;
        Ok(Case {
            name: name.into(),
            q: upload_data(&b, &args.q.data)?,
            k: upload_data(&b, &args.k.data)?,
            v: upload_data(&b, &args.v.data)?,
            o: b.alloc(DType::F32, seqs * q_len * hq * d)?,
            p,
        })
    }

    fn plan(&self, tiles: &TilePolicy) -> Result<Plan<'static>> {
        let caps = Caps {
            tiles: tiles.clone(),
            ..CpuBackend.caps()
        };
        Ok(plan(&self.p, &caps, None)?.into_owned())
    }

    fn run(&mut self, plan: &Plan) -> Result<f64> {
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
        CpuBackend.attention(&self.p, plan, io)?;
        Ok(t.elapsed().as_secs_f64())
    }
}

/// Times every candidate on every case, candidates alternated within each round; returns
/// each candidate's score (geometric mean over cases of its median over the best median)
/// and the medians.
fn measure(
    cases: &mut [Case],
    cands: &[TilePolicy],
    rounds: usize,
) -> Result<(Vec<f64>, Vec<Vec<f64>>)> {
    let mut med = vec![vec![0.0; cands.len()]; cases.len()];
    for (ci, case) in cases.iter_mut().enumerate() {
        let plans: Vec<Plan> = cands.iter().map(|t| case.plan(t)).collect::<Result<_>>()?;
        let mut times = vec![Vec::new(); cands.len()];
        for p in &plans {
            case.run(p)?; // warm-up: pages, caches
        }
        for r in 0..rounds {
            // Rotate the starting candidate, so none always runs right after another.
            for j in 0..plans.len() {
                let i = (j + r) % plans.len();
                times[i].push(case.run(&plans[i])?);
            }
        }
        for (i, t) in times.into_iter().enumerate() {
            med[ci][i] = median(t);
        }
    }
    let scores = (0..cands.len())
        .map(|i| {
            let logs: f64 = med
                .iter()
                .map(|row| (row[i] / row.iter().cloned().fold(f64::MAX, f64::min)).ln())
                .sum();
            (logs / med.len() as f64).exp()
        })
        .collect();
    Ok((scores, med))
}

/// The candidate to keep: the screening's best, if a head-to-head rematch against the
/// default (index 0) in fresh rounds confirms it faster by more than MARGIN (picking the
/// minimum of many noisy medians flatters the winner). Returns (index, default time over
/// the kept candidate's time in the rematch).
fn pick(
    cases: &mut [Case],
    cands: &[TilePolicy],
    scores: &[f64],
    rounds: usize,
) -> Result<(usize, f64)> {
    let best = (0..scores.len())
        .min_by(|&a, &b| scores[a].total_cmp(&scores[b]))
        .unwrap_or(0);
    if best == 0 {
        return Ok((0, 1.0));
    }
    let pair = [cands[0].clone(), cands[best].clone()];
    let (s, _) = measure(cases, &pair, 2 * rounds)?;
    let gain = s[0] / s[1];
    println!(
        "  rematch over {} rounds: candidate {best} is {:+.1}% against the default",
        2 * rounds,
        (gain - 1.0) * 100.0
    );
    Ok(if gain > 1.0 + MARGIN {
        (best, gain)
    } else {
        (0, 1.0)
    })
}

fn report(title: &str, labels: &[String], cases: &[Case], scores: &[f64], med: &[Vec<f64>]) {
    println!("{title}");
    let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    println!(
        "  {:<34} {:>7}  median ms: {}",
        "candidate",
        "score",
        names.join(" | ")
    );
    for (i, l) in labels.iter().enumerate() {
        let ms: Vec<String> = med
            .iter()
            .map(|row| format!("{:.3}", row[i] * 1e3))
            .collect();
        println!("  {l:<34} {:>7.3}  {}", scores[i], ms.join(" | "));
    }
}

pub fn run_tune(a: &TuneArgs) -> Result<()> {
    let path = match a.out.clone().or_else(tune::table_path) {
        Some(p) => p,
        None => {
            bail!("--out: no path given and no cache directory (set HOME or FLEXKERN_TUNE_FILE)")
        }
    };
    if a.device == Device::Cuda {
        return super::tune_cuda::run(a.quick, &path);
    }
    let t0 = Instant::now();
    let device = tune::cpu_device_name();
    let def = TilePolicy::cpu_for_l2(match CpuBackend.caps().kind {
        flexkern::device::DeviceKind::Cpu { l2_bytes, .. } => l2_bytes,
        _ => 1 << 20,
    });
    println!(
        "tuning the CPU attention tiles on {device} ({} threads)",
        rayon::current_num_threads()
    );

    // Prefill: causal, MHA as `flexkern bench attn` and Llama 3's GQA 32/8, D 128.
    let (s, rounds) = if a.quick { (512, 3) } else { (1024, 5) };
    let mut cases = vec![
        Case::new(
            &format!("causal S{s} H8 D128"),
            1,
            s,
            s,
            (8, 8, 128),
            DType::F32,
        )?,
        Case::new(
            &format!("causal S{} H32/8 D128", s / 2),
            1,
            s / 2,
            s / 2,
            (32, 8, 128),
            DType::F32,
        )?,
    ];
    let mut cands = vec![def.clone()];
    let mut labels = vec![format!(
        "default rows {} kv {}",
        def.prefill_rows, def.prefill_kv_block
    )];
    for rows in [64, 128, 256, 512] {
        for kv in [32, 64, 128] {
            if (rows, kv) != (def.prefill_rows, def.prefill_kv_block) {
                cands.push(TilePolicy {
                    prefill_rows: rows,
                    prefill_kv_block: kv,
                    ..def.clone()
                });
                labels.push(format!("rows {rows} kv {kv}"));
            }
        }
    }
    let (scores, med) = measure(&mut cases, &cands, rounds)?;
    report("prefill (f32 Q/K/V)", &labels, &cases, &scores, &med);
    let (p, prefill_gain) = pick(&mut cases, &cands, &scores, rounds)?;
    println!("  chosen: {}", labels[p]);
    let prefill = cands[p].clone();

    // Decode: one query per sequence over an f16 cache, the model's case: Llama 3 8B's heads
    // at batch 1 and 4, SmolLM2's at batch 1.
    let kv = if a.quick { 4096 } else { 16384 };
    let mut cases = vec![
        Case::new(
            &format!("1 x KV{kv} H32/8 D128"),
            1,
            1,
            kv,
            (32, 8, 128),
            DType::F16,
        )?,
        Case::new(
            &format!("4 x KV{} H32/8 D128", kv / 4),
            4,
            1,
            kv / 4,
            (32, 8, 128),
            DType::F16,
        )?,
        Case::new(
            &format!("1 x KV{} H9/3 D64", kv / 4),
            1,
            1,
            kv / 4,
            (9, 3, 64),
            DType::F16,
        )?,
    ];
    let mut cands = vec![prefill.clone()];
    let mut labels = vec![format!(
        "default kv {} min {} ppw {}",
        def.decode_kv_block, def.min_part_blocks, def.parts_per_worker
    )];
    for kvb in [64, 128, 256] {
        for min in [1, 2, 4, 8] {
            for ppw in [1, 2, 4] {
                if (kvb, min, ppw)
                    != (
                        def.decode_kv_block,
                        def.min_part_blocks,
                        def.parts_per_worker,
                    )
                {
                    cands.push(TilePolicy {
                        decode_kv_block: kvb,
                        min_part_blocks: min,
                        parts_per_worker: ppw,
                        ..prefill.clone()
                    });
                    labels.push(format!("kv {kvb} min {min} ppw {ppw}"));
                }
            }
        }
    }
    let rounds = if a.quick { 5 } else { 15 };
    let (scores, med) = measure(&mut cases, &cands, rounds)?;
    report("decode (f16 KV)", &labels, &cases, &scores, &med);
    let (d, decode_gain) = pick(&mut cases, &cands, &scores, rounds)?;
    println!("  chosen: {}", labels[d]);
    let chosen = cands[d].clone();

    let params: BTreeMap<String, u64> = [
        ("prefill_rows", chosen.prefill_rows),
        ("prefill_kv_block", chosen.prefill_kv_block),
        ("decode_kv_block", chosen.decode_kv_block),
        ("min_part_blocks", chosen.min_part_blocks),
        ("parts_per_worker", chosen.parts_per_worker),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v as u64))
    .collect();
    let note = format!(
        "flexkern tune{} ({} threads): prefill {:.1}% and decode {:.1}% faster than the defaults (rematch, geometric mean over cases of median ratios)",
        if a.quick { " --quick" } else { "" },
        rayon::current_num_threads(),
        (prefill_gain - 1.0) * 100.0,
        (decode_gain - 1.0) * 100.0,
    );
    println!("{note}");
    let wrote = tune::save(&path, device, CPU_ATTENTION, params, note)?;
    println!("{wrote} in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}
