//! One prompt on any backend (`TensorOps`): load, generate, stream the text and report
//! prefill and decode speed. Hidden flags serve `bench/llamacpp_compare.py` (token ids as JSON,
//! last-position logits as .npy, tokenization only).

use super::run_args::{default_model, kv_dtype, open_model, precision, prompt_text, RunArgs};
use anyhow::Context;
use flexkern::backend::tensor_ops::TensorOps;
use flexkern_gguf::{ChatTemplate, StreamDecoder, Tokenizer};
use flexkern_model::{generate, Flow, Logits, Model, Sampler, SamplerConfig};
use std::io::Write;

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
    // A GPU loads (or first compiles) each kernel module on first use: one untimed pass of the
    // prompt and a decode step does that before the timed run, as llama.cpp warms up.
    if model.backend().caps().is_gpu() && !prompt.is_empty() && cache.max_len() > prompt.len() {
        model.forward_largest(&mut cache, &prompt, 1)?;
        model.forward_largest(&mut cache, &prompt[..1], 1)?;
        cache.clear()?;
    }
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
