//! `flexkern run --prompt-file FILE --parallel N`: one prompt per line, generated with up to N
//! sequences at once (continuous batching over one shared paged KV cache), printed grouped per
//! prompt in prompt order, then aggregate tokens/s and the speed-up over the same prompts run
//! one after another (`--parallel 1`), measured in the same invocation unless `--no-baseline`.
//! `--json` prints one line per prompt instead: its index, prompt ids and generated ids.

use super::run_args::{default_model, open_model, RunArgs};
use anyhow::{bail, Context};
use flexkern::CpuBackend;
use flexkern_gguf::{ChatTemplate, StreamDecoder, Tokenizer};
use flexkern_model::{
    generate_batch, BatchConfig, BatchStats, Finish, Flow, KvCache, Model, SamplerConfig, SeqOutput,
};
use std::io::Write;

/// The prompts of a --parallel file: its non-blank lines.
fn prompt_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.trim().is_empty()).collect()
}

pub fn run_batch(args: &RunArgs, parallel: usize) -> anyhow::Result<()> {
    if parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    if args.batch.chunk == 0 {
        bail!("--chunk must be at least 1");
    }
    if args.dump_logits.is_some() || args.tokenize_only {
        bail!("--parallel does not combine with --dump-logits or --tokenize-only");
    }
    let Some(file) = &args.prompt_file else {
        bail!("--parallel reads its prompts from --prompt-file");
    };
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let lines = prompt_lines(&text);
    if lines.is_empty() {
        bail!(
            "--prompt-file {}: no prompts (every line is blank)",
            file.display()
        );
    }
    let path = match &args.model {
        Some(p) => p.clone(),
        None => default_model()?,
    };
    let gguf = open_model(&path)?;
    let tok = Tokenizer::from_gguf(&gguf).context("building the tokenizer")?;
    let tmpl = match args.chat {
        true => Some(ChatTemplate::from_gguf(&gguf)?.context("the model has no chat template")?),
        false => None,
    };
    let mut prompts = Vec::with_capacity(lines.len());
    for l in &lines {
        let ids = match &tmpl {
            Some(t) => tok.encode(&t.apply(&[("user", l)], true)?, true, true),
            None => tok.encode(l, true, false),
        };
        prompts.push(ids);
    }
    let model = Model::load_with(
        &gguf,
        CpuBackend,
        super::run_args::precision(args.precise),
        |_, _| {},
    )?;
    let kv_dtype = super::run_args::kv_dtype(args.kv_type, args.precise);
    let ctx = args.ctx.min(model.config.context_length);
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    // Room for `parallel` of the longest prompt with all its tokens: admission never waits
    // on pages, only on a free slot.
    let per_seq = KvCache::<CpuBackend>::pages_for((longest + args.n_predict).min(ctx));
    let pages = per_seq
        .checked_mul(parallel.min(prompts.len()))
        .context("--parallel: the KV pool size overflows")?;
    let sampling = SamplerConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        }),
    };
    let run = |n: usize| -> anyhow::Result<(Vec<SeqOutput>, BatchStats)> {
        let mut cache = model.new_shared_cache(ctx, pages, kv_dtype)?;
        let mut cfg = BatchConfig::new(n, args.n_predict);
        cfg.chunk = args.batch.chunk;
        let stop = |_: usize, id: u32| match tok.is_eog(id) {
            true => Flow::Stop,
            false => Flow::Continue,
        };
        Ok(generate_batch(
            &model, &mut cache, &prompts, cfg, &sampling, stop,
        )?)
    };
    let (outs, stats) = run(parallel)?;
    let mut stdout = std::io::stdout().lock();
    for (i, (line, out)) in lines.iter().zip(&outs).enumerate() {
        if args.json {
            let (p, g) = (json_ids(&prompts[i]), json_ids(&out.tokens));
            writeln!(stdout, "{{\"prompt\":{i},\"prompt_ids\":{p},\"ids\":{g}}}")?;
        } else {
            writeln!(stdout, "=== prompt {} ===", i + 1)?;
            // A chat answer is not a continuation of the line.
            let sep = if args.chat { "\n" } else { "" };
            writeln!(stdout, "{line}{sep}{}", decode(&tok, &out.tokens))?;
        }
    }
    stdout.flush()?;
    report(&format!("--parallel {parallel}"), &stats);
    let full = outs
        .iter()
        .filter(|o| o.finish == Finish::ContextFull)
        .count();
    if full > 0 {
        eprintln!(
            "note: {full} prompt(s) stopped before -n {} tokens: the KV cache is full ({ctx} \
             positions = min(--ctx {}, the model's context length)); raise --ctx to generate more",
            args.n_predict, args.ctx
        );
    }
    if !args.batch.no_baseline && parallel > 1 {
        let quantized_kv = flexkern::kv_cache::quant::is_quantized(kv_dtype);
        let (serial, base) = run(1)?;
        report("one after another", &base);
        eprintln!(
            "speed-up: {:.2}x generated tok/s ({:.2}x wall time); outputs {}",
            stats.gen_tok_s() / base.gen_tok_s().max(1e-9),
            base.secs / stats.secs.max(1e-9),
            match (serial == outs, quantized_kv) {
                (true, _) => "identical",
                (false, true) =>
                    "differ (a quantized KV cache takes its scales from the first \
                                  step, whose prompts depend on --parallel)",
                (false, false) => "differ (floating-point order differs between batch shapes)",
            }
        );
    }
    Ok(())
}

fn json_ids(ids: &[u32]) -> String {
    let v: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    format!("[{}]", v.join(","))
}

/// The text of generated ids (an end-of-generation token prints nothing).
fn decode(tok: &Tokenizer, ids: &[u32]) -> String {
    let mut stream = StreamDecoder::new();
    let mut s = String::new();
    for &id in ids.iter().filter(|&&id| !tok.is_eog(id)) {
        s.push_str(&stream.push(tok, id));
    }
    s.push_str(&stream.finish());
    s
}

fn report(what: &str, s: &BatchStats) {
    eprintln!(
        "{what}: {} prompt + {} generated tokens in {:.2} s, {} steps, at most {} active | \
         {:.1} generated tok/s, {:.1} tok/s with prompts | {} threads",
        s.prompt_tokens,
        s.generated_tokens,
        s.secs,
        s.steps,
        s.max_active,
        s.gen_tok_s(),
        s.total_tok_s(),
        rayon::current_num_threads()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_are_not_prompts() {
        assert_eq!(prompt_lines("a\n\n  \nb c\r\n"), vec!["a", "b c"]);
        assert!(prompt_lines("\n \n").is_empty());
    }
}
