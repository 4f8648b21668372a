//! `flexkern synth-model`: a llama-family GGUF with random weights at a published shape, for
//! benchmarks at sizes that cannot be downloaded (flexkern-model's `synth`). Written to
//! `FILE.partial` and renamed when complete, so a failed run leaves no half file behind.

use anyhow::Context;
use clap::Args;
use flexkern_gguf::GgufFile;
use flexkern_model::synth::{self, Recipe, Shape, SynthSpec, TokenizerSource};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Model shape: llama3-8b, llama3-1b or smollm2-135m.
    #[arg(long)]
    pub shape: String,
    /// Weight format: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl
    /// iq4_xs mxfp4 (every matrix), or q4_k_m / q5_k_m (llama.cpp's mixes).
    #[arg(long)]
    pub format: String,
    /// Output GGUF file (never commit it).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Vocabulary size (at least the tokenizer's; extra ids are unused tokens).
    #[arg(long)]
    pub vocab: Option<usize>,
    /// Where the tokenizer and chat template come from: `default` (the default model, see
    /// README), `bytes` (256 byte tokens, no merges) or a GGUF file.
    #[arg(long, default_value = "default")]
    pub tokenizer: String,
}

pub fn run_synth(a: &SynthArgs) -> anyhow::Result<()> {
    // Every argument is checked before the donor is opened or anything is written.
    let spec = SynthSpec {
        shape: Shape::from_name(&a.shape)?,
        recipe: Recipe::from_name(&a.format)?,
        seed: a.seed,
        vocab: a.vocab,
    };
    let dir = match a.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "--out {}: directory {} does not exist",
            a.out.display(),
            dir.display()
        );
    }
    let donor = match a.tokenizer.as_str() {
        "bytes" => None,
        "default" => {
            let path = super::run_args::default_model().context(
                "--tokenizer default: synth-model takes its tokenizer and chat template from \
                 the default model; run the README's first command (bash bench/fetch_model.sh) \
                 or pass --tokenizer bytes",
            )?;
            Some(GgufFile::open(&path).with_context(|| format!("opening {}", path.display()))?)
        }
        path => Some(GgufFile::open(path).with_context(|| format!("--tokenizer {path}"))?),
    };
    let source = match &donor {
        Some(f) => TokenizerSource::Gguf(f),
        None => TokenizerSource::Bytes,
    };
    let plan = synth::plan(&spec, &source)?;
    let params: usize = plan.tensors.iter().map(|t| t.n * t.k).sum();
    let mix: Vec<String> = plan
        .format_counts()
        .iter()
        .map(|(f, n)| format!("{n} {f}"))
        .collect();
    eprintln!(
        "{}: {:.3} B parameters, vocab {}, tensors: {}",
        spec.shape.name,
        params as f64 / 1e9,
        plan.vocab,
        mix.join(", ")
    );
    let total = plan.data_bytes();
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template(
            "writing {bar:30} {bytes}/{total_bytes} {bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut part = a.out.clone().into_os_string();
    part.push(".partial");
    let part = PathBuf::from(part);
    let t = Instant::now();
    let result = std::fs::File::create(&part)
        .with_context(|| format!("--out {}", part.display()))
        .and_then(|file| {
            let out = std::io::BufWriter::with_capacity(8 << 20, file);
            let out = synth::write(plan, spec.seed, out, |done, _| bar.set_position(done))?;
            // Flushed by `finish`; no fsync: a benchmark file needs no durability, and the
            // rename already hides a partial one.
            drop(out);
            Ok(())
        })
        .and_then(|()| {
            std::fs::rename(&part, &a.out).with_context(|| format!("--out {}", a.out.display()))
        });
    bar.finish_and_clear();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&part);
        return Err(e);
    }
    let secs = t.elapsed().as_secs_f64();
    let size = std::fs::metadata(&a.out).map_or(0, |m| m.len());
    println!(
        "wrote {} ({:.2} GiB) in {:.1} s ({:.0} MB/s)",
        a.out.display(),
        size as f64 / (1u64 << 30) as f64,
        secs,
        size as f64 / secs / 1e6
    );
    Ok(())
}
