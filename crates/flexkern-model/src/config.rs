//! Hyperparameters read from GGUF metadata (`{arch}.*` keys).

use crate::error::{config_err, ModelError, Result};
use flexkern::backend::tensor_ops::{Rope, RopeStyle, Yarn};
use flexkern_gguf::GgufFile;

/// A llama-family model's shape and numerics.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: String,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub rms_eps: f32,
    pub rope_style: RopeStyle,
    pub rope_dims: usize,
    pub rope_base: f32,
    /// 1 / linear scaling factor (1 when unscaled).
    pub rope_freq_scale: f32,
    /// YaRN context extension (`rope.scaling.type = "yarn"`), which replaces the linear scale.
    pub rope_yarn: Option<Yarn>,
    pub context_length: usize,
    pub vocab: usize,
}

impl Config {
    pub fn from_gguf(f: &GgufFile) -> Result<Config> {
        let arch = f.get_str("general.architecture")?.to_string();
        // GGUF's llama/mistral Q and K were permuted by the converter for adjacent-pair RoPE;
        // qwen2 keeps the original halves layout.
        let rope_style = match arch.as_str() {
            "llama" | "mistral" => RopeStyle::Normal,
            "qwen2" => RopeStyle::Neox,
            _ => return Err(ModelError::UnsupportedArch(arch)),
        };
        let key = |k: &str| format!("{arch}.{k}");
        let usize_key = |k: &str| f.get_usize(&key(k));
        let n_embd = usize_key("embedding_length")?;
        let n_head = usize_key("attention.head_count")?;
        if n_head == 0 || n_embd == 0 {
            return Err(config_err(&key("attention.head_count"), "must be positive"));
        }
        let n_head_kv = f
            .get_opt(&key("attention.head_count_kv"), GgufFile::get_usize)?
            .unwrap_or(n_head);
        if n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(config_err(
                &key("attention.head_count_kv"),
                format!("{n_head_kv} does not divide {n_head} query heads"),
            ));
        }
        let head_dim = match f.get_opt(&key("attention.key_length"), GgufFile::get_usize)? {
            Some(d) => d,
            None if n_embd % n_head == 0 => n_embd / n_head,
            None => {
                return Err(config_err(
                    &key("embedding_length"),
                    "not a multiple of heads",
                ))
            }
        };
        let rope_dims = f
            .get_opt(&key("rope.dimension_count"), GgufFile::get_usize)?
            .unwrap_or(head_dim);
        if rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(config_err(
                &key("rope.dimension_count"),
                format!("{rope_dims} for head dim {head_dim}"),
            ));
        }
        let rope_freq_scale = rope_scale(f, &arch)?;
        let rope_yarn = yarn(f, &arch)?;
        let vocab = match f.get_opt(&key("vocab_size"), GgufFile::get_usize)? {
            Some(v) => v,
            None => f.get_array("tokenizer.ggml.tokens")?.len(),
        };
        let rms_key = key("attention.layer_norm_rms_epsilon");
        let rms_eps = f.get_opt(&rms_key, GgufFile::get_f32)?.unwrap_or(1e-5);
        positive(&rms_key, rms_eps)?;
        let base_key = key("rope.freq_base");
        let rope_base = f.get_opt(&base_key, GgufFile::get_f32)?.unwrap_or(10_000.0);
        positive(&base_key, rope_base)?;
        Ok(Config {
            n_layer: block_count(f, &key("block_count"))?,
            n_ff: usize_key("feed_forward_length")?,
            rms_eps,
            rope_base,
            context_length: f
                .get_opt(&key("context_length"), GgufFile::get_usize)?
                .unwrap_or(2048),
            arch,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            rope_style,
            rope_dims,
            rope_freq_scale,
            rope_yarn,
            vocab,
        })
    }

    pub fn rope(&self) -> Result<Rope> {
        Ok(match &self.rope_yarn {
            Some(y) => Rope::yarn(self.rope_style, self.rope_dims, self.rope_base, y)?,
            None => Rope::new(
                self.rope_style,
                self.rope_dims,
                self.rope_base,
                self.rope_freq_scale,
            ),
        })
    }
}

/// A float hyperparameter that must be finite and > 0 (NaN would surface only as NaN logits).
fn positive(key: &str, x: f32) -> Result<()> {
    if x.is_finite() && x > 0.0 {
        Ok(())
    } else {
        Err(config_err(key, format!("must be finite and > 0, got {x}")))
    }
}

/// `block_count`, checked against the `blk.N.*` tensors the file holds, before any per-layer
/// allocation is sized by it (a corrupt 2^31 reserved every layer and aborted).
fn block_count(f: &GgufFile, key: &str) -> Result<usize> {
    let n = f.get_usize(key)?;
    let held = f
        .tensors()
        .iter()
        .filter_map(|t| {
            t.name
                .strip_prefix("blk.")?
                .split('.')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .max()
        .map_or(0, |i| i + 1);
    if n != held {
        return Err(config_err(
            key,
            format!(
                "is {n} but the file holds layer tensors for {held} blocks (blk.0 .. blk.{})",
                held.max(1) - 1
            ),
        ));
    }
    Ok(n)
}

/// Frequency scale from `rope.scaling.*` (linear; YaRN is read by `yarn`). Llama 3 scaling
/// arrives as the `rope_freqs.weight` tensor instead (see `Weights::rope_freqs`).
fn rope_scale(f: &GgufFile, arch: &str) -> Result<f32> {
    let ty_key = format!("{arch}.rope.scaling.type");
    let factor_key = format!("{arch}.rope.scaling.factor");
    let ty = f.get_opt(&ty_key, GgufFile::get_str)?.unwrap_or("none");
    let factor = f.get_opt(&factor_key, GgufFile::get_f32)?;
    match (ty, factor) {
        ("none", _) | (_, None) => {
            let lin_key = format!("{arch}.rope.scale_linear");
            if let Ok(s) = f.get_f32(&lin_key) {
                positive(&lin_key, s)?;
                return Ok(1.0 / s);
            }
            Ok(1.0)
        }
        ("linear", Some(x)) => positive(&factor_key, x).map(|_| 1.0 / x),
        ("yarn", Some(_)) => Ok(1.0),
        (_, Some(1.0)) => Ok(1.0),
        (t, _) => Err(config_err(
            &ty_key,
            format!("rope scaling {t:?} is not supported"),
        )),
    }
}

/// YaRN parameters from `rope.scaling.*`, with llama.cpp's defaults for the optional keys
/// (ext_factor 1, attn_factor 1, beta_fast 32, beta_slow 1).
fn yarn(f: &GgufFile, arch: &str) -> Result<Option<Yarn>> {
    let key = |k: &str| format!("{arch}.rope.scaling.{k}");
    if f.get_opt(&key("type"), GgufFile::get_str)? != Some("yarn") {
        return Ok(None);
    }
    let f32_or = |k: &str, d: f32| -> Result<f32> {
        Ok(f.get_opt(&key(k), GgufFile::get_f32)?.unwrap_or(d))
    };
    let factor = f.get_f32(&key("factor"))?;
    let orig_ctx = f.get_usize(&key("original_context_length"))?;
    let attn_factor = match f.get_opt(&key("attn_factor"), GgufFile::get_f32)? {
        Some(a) => a,
        None => f32_or("yarn_attn_factor", 1.0)?,
    };
    Ok(Some(Yarn {
        factor,
        orig_ctx,
        ext_factor: f32_or("yarn_ext_factor", 1.0)?,
        attn_factor,
        beta_fast: f32_or("yarn_beta_fast", 32.0)?,
        beta_slow: f32_or("yarn_beta_slow", 1.0)?,
    }))
}
