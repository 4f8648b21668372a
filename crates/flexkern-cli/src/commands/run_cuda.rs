//! `flexkern run --device cuda`: the model runner (generic over `TensorOps`) on GPU 0 through
//! `CudaBackend`: weights uploaded once in the file's layout (with a progress bar), the KV
//! cache in device pages, GEMV / SwiGLU / norms / RoPE / attention as CUDA kernels; the host
//! samples from the downloaded logits. Prints the CPU path's text and speed line. Not yet:
//! CUDA-graph capture of the decode step and sampling on the device (issue 14, item 3/4).

use super::run::RunArgs;
use anyhow::{bail, Context};
use flexkern_gguf::{ChatTemplate, StreamDecoder, Tokenizer};
use flexkern_model::{generate, Flow, Model, Sampler, SamplerConfig};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;

pub fn run_model(args: RunArgs) -> anyhow::Result<()> {
    if args.json || args.dump_logits.is_some() || args.tokenize_only {
        bail!("--device cuda: the benchmark flags (--json, --dump-logits, --tokenize-only) run on the CPU only");
    }
    if args.batch.parallel.is_some() {
        bail!("--parallel: batched generation runs on the CPU only so far (--device cpu)");
    }
    let dev = super::cuda::open("run")?;
    let backend = flexkern_cuda::backend::CudaBackend { dev: dev.clone() };
    let path = match &args.model {
        Some(p) => p.clone(),
        None => super::run::default_model()?,
    };
    let file = super::run::open_model(&path)?;
    let tok = Tokenizer::from_gguf(&file).context("building the tokenizer")?;
    let text = match (&args.prompt, &args.prompt_file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        (None, None) => bail!("give --prompt or --prompt-file"),
    };
    let text = if args.chat {
        let tmpl = ChatTemplate::from_gguf(&file)?.context("the model has no chat template")?;
        tmpl.apply(&[("user", text.as_str())], true)?
    } else {
        text
    };
    let prompt = tok.encode(&text, true, args.chat);
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("uploading weights to the GPU {bar:40} {pos}/{len}")
            .expect("valid template"),
    );
    let model = Model::load(&file, backend, |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    // The GPU GEMV always keeps activations in f32; `--precise` adds the f32 KV cache.
    let mut cache =
        model.new_cache_with(args.ctx, super::run::kv_dtype(args.kv_type, args.precise))?;
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
    let mut stdout = std::io::stdout().lock();
    if !args.chat {
        write!(stdout, "{text}")?;
    }
    let (_, stats) = generate(
        &model,
        &mut cache,
        &prompt,
        args.n_predict,
        &mut sampler,
        |id| {
            if tok.is_eog(id) {
                return Flow::Stop;
            }
            let _ = write!(stdout, "{}", stream.push(&tok, id));
            let _ = stdout.flush();
            Flow::Continue
        },
    )?;
    writeln!(stdout, "{}", stream.finish())?;
    eprintln!(
        "prefill: {} tokens, {:.1} tok/s | decode: {} tokens, {:.1} tok/s | {}",
        stats.prefill_tokens,
        stats.prefill_tok_s(),
        stats.decode_tokens,
        stats.decode_tok_s(),
        dev.props.name
    );
    Ok(())
}
