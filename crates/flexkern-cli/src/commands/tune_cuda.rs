//! `flexkern tune --device cuda`: measures the tensor-core attention kernels' keys per stage and
//! stages on this GPU (the Hopper prefill kernel, the mma.sync prefill kernel, decode) on the
//! benchmark's own cases, candidates alternated round by round, and writes the winners into the
//! tune table's `cuda-attention` entry for the GPU's name. The planner reads that entry when the
//! device opens; `FLEXKERN_CUDA_MMA` still overrides it.

use super::limits::median;
use anyhow::Result;
use flexkern::tune::{self, CUDA_ATTENTION};
use flexkern::DType;
use flexkern_cuda::bench::prefill::{prefill, Mod, PrefillCase};
use flexkern_cuda::bench::{decode, DecodeShape};
use flexkern_cuda::plan::TunedTiles;
use flexkern_cuda::Device;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// A candidate replaces the default only if faster by more than this.
const MARGIN: f64 = 0.03;

enum Probe {
    Prefill(PrefillCase),
    Decode(DecodeShape),
}

impl Probe {
    fn name(&self) -> String {
        match self {
            Probe::Prefill(c) => c.name(),
            Probe::Decode(s) => s.name(),
        }
    }

    fn ms(&self, dev: &Arc<Device>, reps: usize) -> Result<f64> {
        Ok(match self {
            Probe::Prefill(c) => prefill(dev, c, reps)?.ms,
            Probe::Decode(s) => decode(dev, s, reps, false)?.ms,
        })
    }
}

/// One kernel's knob: its candidates (keys per stage, stages), the cases that judge them, and
/// where the choice goes.
struct Family {
    name: &'static str,
    cands: Vec<(usize, usize)>,
    probes: Vec<Probe>,
    set: fn(&mut TunedTiles, Option<(usize, usize)>),
}

fn prefill_case(batch: usize, q_len: usize, d: usize, variant: Mod) -> Probe {
    Probe::Prefill(PrefillCase {
        batch,
        heads: 16,
        q_len,
        prefix: 0,
        d,
        variant,
        page_size: None,
    })
}

fn decode_case(batch: usize, kv_len: usize, page_size: Option<usize>) -> Probe {
    Probe::Decode(DecodeShape {
        batch,
        kv_len,
        hq: 32,
        hkv: 8,
        d: 128,
        kv_dtype: DType::BF16,
        page_size,
    })
}

fn families(hopper: bool, quick: bool) -> Vec<Family> {
    let div = if quick { 4 } else { 1 };
    let mut v = Vec::new();
    if hopper {
        v.push(Family {
            name: "Hopper prefill (wgmma)",
            // Three stages at least (two deadlock, attention_wgmma.cu).
            cands: vec![(128, 3), (128, 4), (64, 3), (64, 4), (64, 6)],
            probes: vec![
                prefill_case(2, 8192 / div, 128, Mod::Causal),
                prefill_case(2, 8192 / div, 128, Mod::Full),
                prefill_case(4, 4096 / div, 64, Mod::Causal),
            ],
            set: |t, c| t.wg = c,
        });
    }
    v.push(Family {
        name: "mma.sync prefill (wide heads, or all before Hopper)",
        cands: vec![(32, 2), (32, 3), (64, 2), (64, 3)],
        probes: vec![
            prefill_case(1, 4096 / div, 256, Mod::Causal),
            prefill_case(1, 4096 / div, if hopper { 256 } else { 128 }, Mod::Full),
        ],
        set: |t, c| t.prefill = c,
    });
    v.push(Family {
        name: "decode",
        cands: vec![(64, 2), (64, 3), (64, 4), (128, 2), (128, 3)],
        probes: vec![
            decode_case(8, 32768 / div, None),
            decode_case(8, 32768 / div, Some(16)),
            decode_case(1, 131072 / div, None),
        ],
        set: |t, c| t.decode = c,
    });
    v
}

/// Times the default and every candidate of `f` on its probes, alternated round by round;
/// returns the winner (None: the default) and its speed-up (geometric mean of median ratios).
fn tune_family(
    dev: &Arc<Device>,
    base: TunedTiles,
    f: &Family,
    rounds: usize,
    reps: usize,
) -> Result<(Option<(usize, usize)>, f64)> {
    let cands: Vec<Option<(usize, usize)>> = std::iter::once(None)
        .chain(f.cands.iter().copied().map(Some))
        .collect();
    let mut times = vec![vec![Vec::new(); f.probes.len()]; cands.len()];
    for r in 0..rounds {
        for j in 0..cands.len() {
            // Rotate the starting candidate, so none always runs right after another.
            let i = (j + r) % cands.len();
            let mut t = base;
            (f.set)(&mut t, cands[i]);
            dev.set_tuned(t);
            for (p, probe) in f.probes.iter().enumerate() {
                times[i][p].push(probe.ms(dev, reps)?);
            }
        }
    }
    dev.set_tuned(base);
    let med: Vec<Vec<f64>> = times
        .into_iter()
        .map(|row| row.into_iter().map(median).collect())
        .collect();
    // Score: geometric mean over probes of the candidate's median over the default's.
    let score: Vec<f64> = med
        .iter()
        .map(|row| {
            let logs: f64 = row.iter().zip(&med[0]).map(|(m, d)| (m / d).ln()).sum();
            (logs / row.len() as f64).exp()
        })
        .collect();
    println!("{}", f.name);
    let names: Vec<String> = f.probes.iter().map(Probe::name).collect();
    println!(
        "  {:<22} {:>6}  median ms: {}",
        "candidate",
        "score",
        names.join(" | ")
    );
    for (i, c) in cands.iter().enumerate() {
        let label = c.map_or("default".to_string(), |(t, s)| {
            format!("{t} keys x {s} stages")
        });
        let ms: Vec<String> = med[i].iter().map(|m| format!("{m:.3}")).collect();
        println!("  {label:<22} {:>6.3}  {}", score[i], ms.join(" | "));
    }
    let best = (0..score.len())
        .min_by(|&a, &b| score[a].total_cmp(&score[b]))
        .unwrap_or(0);
    Ok(if score[best] * (1.0 + MARGIN) < 1.0 {
        (cands[best], 1.0 / score[best])
    } else {
        (None, 1.0)
    })
}

pub fn run(quick: bool, path: &Path) -> Result<()> {
    let t0 = Instant::now();
    let dev = super::cuda::open("tune")?;
    let name = dev.props.name.clone();
    let hopper = dev.props.compute_capability == (9, 0);
    println!(
        "tuning the CUDA attention tiles on {name} (sm_{}{}, {} SMs)",
        dev.props.compute_capability.0, dev.props.compute_capability.1, dev.props.sms
    );
    // From the defaults, not an earlier table: each family is judged against them.
    let mut chosen = TunedTiles::default();
    dev.set_tuned(chosen);
    let (rounds, reps) = if quick { (2, 5) } else { (4, 10) };
    let mut notes = Vec::new();
    for f in families(hopper, quick) {
        let (c, gain) = tune_family(&dev, chosen, &f, rounds, reps)?;
        (f.set)(&mut chosen, c);
        let pick = c.map_or("default".to_string(), |(t, s)| {
            format!("{t} keys x {s} stages")
        });
        println!(
            "  chosen: {pick} ({:+.1}% against the default)",
            (gain - 1.0) * 100.0
        );
        notes.push(format!("{}: {pick} {:+.1}%", f.name, (gain - 1.0) * 100.0));
    }
    let note = format!(
        "flexkern tune --device cuda{} ({rounds} rounds, medians of {reps}): {}",
        if quick { " --quick" } else { "" },
        notes.join("; ")
    );
    println!("{note}");
    let wrote = tune::save(path, name, CUDA_ATTENTION, chosen.to_params(), note)?;
    println!("{wrote} in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}
