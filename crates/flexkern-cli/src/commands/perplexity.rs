//! `flexkern perplexity`: llama.cpp's perplexity (`flexkern_model::perplexity`) of a GGUF model
//! on a text file, with a progress bar and llama.cpp's error estimate.

use super::run_args::{default_model, kv_dtype, open_model, precision, KvType};
use anyhow::{bail, Context, Result};
use clap::Args;
use flexkern::CpuBackend;
use flexkern_gguf::Tokenizer;
use flexkern_model::perplexity::{perplexity, windows};
use flexkern_model::Model;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct PerplexityArgs {
    /// GGUF model file (default: SmolLM2-135M-Instruct from the model cache).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The text to score (UTF-8).
    #[arg(long)]
    pub file: PathBuf,
    /// Tokens per window (llama.cpp's -c); the second half of each window is scored.
    #[arg(long, default_value_t = 512)]
    pub ctx: usize,
    /// Score only the first N windows (llama.cpp's --chunks; default: all).
    #[arg(long)]
    pub chunks: Option<usize>,
    /// KV cache element type.
    #[arg(long, value_enum, default_value = "f16")]
    pub kv_type: KvType,
    /// Precise mode: f32 activations through every quantized matrix product, f32 KV cache.
    #[arg(long, conflicts_with = "kv_type")]
    pub precise: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

pub fn run_perplexity(args: &PerplexityArgs) -> Result<()> {
    if let Some(t) = args.threads {
        // Fails only if the pool already exists, which leaves the default in place.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global();
    }
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("--file {}", args.file.display()))?;
    let path = match &args.model {
        Some(p) => p.clone(),
        None => default_model()?,
    };
    let file = open_model(&path)?;
    let tok = Tokenizer::from_gguf(&file).context("building the tokenizer")?;
    // As llama.cpp: the whole text with the model's special prefix, no special-token parsing.
    let mut tokens = tok.encode(&text, true, false);
    let mut n = windows(tokens.len(), args.ctx).context("--file / --ctx")?;
    if let Some(c) = args.chunks {
        if c == 0 {
            bail!("--chunks: must be at least 1");
        }
        n = n.min(c);
    }
    tokens.truncate(n * args.ctx);
    let bos = if tok.add_bos() { tok.bos() } else { None };
    let model = Model::load_with(&file, CpuBackend, precision(args.precise), |_, _| {})?;
    let kv = kv_dtype(args.kv_type, args.precise);
    let mut cache = model.new_cache_with(args.ctx, kv)?;
    eprintln!(
        "{} tokens, {n} windows of {} (second halves scored), BOS per window: {}, KV {kv:?}, {:?} mode, {} threads",
        tok.encode(&text, true, false).len(),
        args.ctx,
        bos.is_some(),
        model.precision(),
        rayon::current_num_threads()
    );
    let bar = ProgressBar::new(n as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} windows {msg} [{elapsed} < {eta}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let t0 = Instant::now();
    let nll = perplexity(&model, &mut cache, &tokens, args.ctx, bos, |done, _, s| {
        bar.set_position(done as u64);
        bar.set_message(format!("PPL {:.4}", s.ppl()));
    })?;
    bar.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "scored {} tokens in {n} windows of {} ({:.1} tokens/s evaluated)",
        nll.count,
        args.ctx,
        (n * args.ctx) as f64 / secs
    );
    println!("PPL = {:.4} +/- {:.5}", nll.ppl(), nll.ppl_error());
    Ok(())
}
