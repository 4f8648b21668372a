//! Synthetic llama-family GGUF models: random weights at published shapes, for benchmarks at
//! sizes that cannot be downloaded here. `plan` lays out the file (metadata, tensors and each
//! tensor's format), `write` streams it (`fill.rs`), `tokenizer.rs` supplies the vocabulary.

mod fill;
mod tokenizer;

pub use fill::write;
pub use tokenizer::TokenizerSource;

use flexkern_gguf::{GgmlType, GgufWriter, TensorDecl, Value};
use flexkern_quant::Format;

/// Bad synthesis arguments, each naming the argument.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("argument `{arg}`: {msg}")]
    Invalid { arg: &'static str, msg: String },
    #[error(transparent)]
    Gguf(#[from] flexkern_gguf::GgufError),
    #[error(transparent)]
    Quant(#[from] flexkern_quant::QuantError),
}

pub(crate) fn invalid(arg: &'static str, msg: impl Into<String>) -> SynthError {
    SynthError::Invalid {
        arg,
        msg: msg.into(),
    }
}

/// A published model shape (from each model's config.json).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub name: &'static str,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub rope_base: f32,
    /// Llama 3 RoPE scaling: (factor, low_freq_factor, high_freq_factor, original context).
    pub llama3_rope: Option<(f32, f32, f32, usize)>,
    pub context_length: usize,
    pub tied_embeddings: bool,
}

pub const SHAPES: [Shape; 3] = [
    // Meta-Llama-3.1-8B: Llama 3's 8B layers with its rope scaling.
    Shape {
        name: "llama3-8b",
        n_layer: 32,
        n_embd: 4096,
        n_ff: 14336,
        n_head: 32,
        n_head_kv: 8,
        rope_base: 500_000.0,
        llama3_rope: Some((8.0, 1.0, 4.0, 8192)),
        context_length: 131_072,
        tied_embeddings: false,
    },
    // Llama-3.2-1B.
    Shape {
        name: "llama3-1b",
        n_layer: 16,
        n_embd: 2048,
        n_ff: 8192,
        n_head: 32,
        n_head_kv: 8,
        rope_base: 500_000.0,
        llama3_rope: Some((32.0, 1.0, 4.0, 8192)),
        context_length: 131_072,
        tied_embeddings: true,
    },
    // SmolLM2-135M.
    Shape {
        name: "smollm2-135m",
        n_layer: 30,
        n_embd: 576,
        n_ff: 1536,
        n_head: 9,
        n_head_kv: 3,
        rope_base: 100_000.0,
        llama3_rope: None,
        context_length: 8192,
        tied_embeddings: true,
    },
];

impl Shape {
    pub fn from_name(name: &str) -> Result<Shape, SynthError> {
        SHAPES
            .iter()
            .find(|s| s.name == name)
            .copied()
            .ok_or_else(|| {
                let known: Vec<_> = SHAPES.iter().map(|s| s.name).collect();
                invalid(
                    "shape",
                    format!("unknown shape {name:?} (known: {})", known.join(", ")),
                )
            })
    }

    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }
}

/// The weight formats of a file: one format for every matrix, or llama.cpp's `_M` mixes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Recipe {
    /// Every matrix in this format (llama-quantize `--pure`), but for llama.cpp's fallback
    /// where a row is not whole blocks (`fallback`).
    Pure(Format),
    /// llama.cpp's Q4_K_M / Q5_K_M: `base` (Q4_K or Q5_K) with Q6_K for the output matrix,
    /// and for `attn_v` and `ffn_down` in the layers `use_more_bits` picks.
    KMixed { base: Format },
}

impl Recipe {
    pub fn from_name(name: &str) -> Result<Recipe, SynthError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "q4_k_m" => return Ok(Recipe::KMixed { base: Format::Q4K }),
            "q5_k_m" => return Ok(Recipe::KMixed { base: Format::Q5K }),
            _ => {}
        }
        let f = Format::from_name(name).map_err(|_| {
            invalid(
                "format",
                format!("unknown format {name:?} (f32, f16, bf16, q4_0 .. q8_0, q2_k .. q6_k, iq4_nl, iq4_xs, mxfp4, q4_k_m, q5_k_m)"),
            )
        })?;
        if f.ggml_type().is_none() || matches!(f, Format::Q8_1 | Format::Q8K) {
            return Err(invalid(
                "format",
                format!("{name}: not a GGUF weight format (MLX and activation formats are not)"),
            ));
        }
        Ok(Recipe::Pure(f))
    }

    /// llama.cpp's `general.file_type` (`llama_ftype`) where one names the recipe; llama.cpp
    /// only prints it (it reads each tensor's own type).
    fn llama_file_type(&self) -> Option<u32> {
        Some(match *self {
            Recipe::KMixed { base: Format::Q4K } => 15,
            Recipe::KMixed { .. } => 17,
            Recipe::Pure(f) => match f {
                Format::F32 => 0,
                Format::F16 => 1,
                Format::Q4_0 => 2,
                Format::Q4_1 => 3,
                Format::Q8_0 => 7,
                Format::Q5_0 => 8,
                Format::Q5_1 => 9,
                Format::Q6K => 18,
                Format::IQ4NL => 25,
                Format::BF16 => 32,
                _ => return None,
            },
        })
    }

    /// The format of matrix `role` in layer `layer` of `n_layer` (None: not a layer tensor),
    /// before the whole-block fallback.
    fn pick(&self, role: &str, layer: Option<usize>, n_layer: usize) -> Format {
        match *self {
            Recipe::Pure(f) => f,
            Recipe::KMixed { base } => {
                let more = layer.is_some_and(|i| use_more_bits(i, n_layer));
                match role {
                    "output" => Format::Q6K,
                    "attn_v" | "ffn_down" if more => Format::Q6K,
                    _ => base,
                }
            }
        }
    }
}

/// llama.cpp's choice of layers that get more bits: the first and last eighth, and every
/// third in between.
fn use_more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// llama.cpp's replacement when a row of `k` is not whole blocks of `f` (576-wide SmolLM2
/// rows in the 256-element K-quants).
pub fn fallback(f: Format, k: usize) -> Format {
    if k.is_multiple_of(f.block_elems()) {
        return f;
    }
    match f {
        Format::Q4K => Format::Q5_0,
        Format::Q5K => Format::Q5_1,
        Format::Q6K => Format::Q8_0,
        Format::Q2K | Format::Q3K | Format::IQ4XS => Format::IQ4NL,
        other => other,
    }
}

/// What to synthesize.
#[derive(Clone, Debug)]
pub struct SynthSpec {
    pub shape: Shape,
    pub recipe: Recipe,
    pub seed: u64,
    /// Vocabulary size: at least the tokenizer's (extra ids are unused tokens); None: the
    /// tokenizer's.
    pub vocab: Option<usize>,
}

/// One tensor of the plan: GGUF dims `[k, n]` (or `[len]`) and how to fill it.
#[derive(Clone, Debug)]
pub struct PlannedTensor {
    pub decl: TensorDecl,
    pub format: Format,
    /// Rows `n` and row length `k` of the row-major values.
    pub n: usize,
    pub k: usize,
    pub fill: Fill,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    /// Irwin-Hall (4 uniforms) approximation of a normal with this std: bounded at 3.5 std,
    /// so no quantizer sees an outlier.
    Normal(f32),
    /// These exact values (norms are 1, RoPE factors computed).
    Values(Vec<f32>),
}

/// The whole file: metadata and tensors in write order.
pub struct Plan {
    pub meta: GgufWriter,
    pub tensors: Vec<PlannedTensor>,
    pub vocab: usize,
}

impl Plan {
    /// Bytes of tensor data (without header and padding).
    pub fn data_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| t.format.tensor_bytes(t.n, t.k).unwrap_or(0) as u64)
            .sum()
    }

    /// Formats and how many tensors use each (one line of the CLI's report).
    pub fn format_counts(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for t in &self.tensors {
            let name = t.format.name();
            match out.iter_mut().find(|(n, _)| *n == name) {
                Some(e) => e.1 += 1,
                None => out.push((name, 1)),
            }
        }
        out
    }
}

/// The weights' std (GPT-2 / Llama init): activations stay O(1) through the blocks.
const STD: f32 = 0.02;

/// Lays out the file for `spec` with the tokenizer from `tok`.
pub fn plan(spec: &SynthSpec, tok: &TokenizerSource) -> Result<Plan, SynthError> {
    let s = &spec.shape;
    let (tok_meta, vocab) = tokenizer::metadata(tok, spec.vocab)?;
    let mut meta = GgufWriter::new();
    let a = "llama";
    let u32v = |x: usize| Value::U32(x as u32);
    let mut keys: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(a.into())),
        (
            "general.name".into(),
            Value::String(format!("flexkern synthetic {}", s.name)),
        ),
        ("general.quantization_version".into(), Value::U32(2)),
        (format!("{a}.block_count"), u32v(s.n_layer)),
        (format!("{a}.context_length"), u32v(s.context_length)),
        (format!("{a}.embedding_length"), u32v(s.n_embd)),
        (format!("{a}.feed_forward_length"), u32v(s.n_ff)),
        (format!("{a}.attention.head_count"), u32v(s.n_head)),
        (format!("{a}.attention.head_count_kv"), u32v(s.n_head_kv)),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-5),
        ),
        (format!("{a}.rope.freq_base"), Value::F32(s.rope_base)),
        (format!("{a}.rope.dimension_count"), u32v(s.head_dim())),
        (format!("{a}.vocab_size"), u32v(vocab)),
    ];
    if let Some(ft) = spec.recipe.llama_file_type() {
        keys.push(("general.file_type".into(), Value::U32(ft)));
    }
    keys.extend(tok_meta);
    for (k, v) in keys {
        meta.add_metadata(k, v)?;
    }

    let (d, hd) = (s.n_embd, s.head_dim());
    let (qd, kvd) = (s.n_head * hd, s.n_head_kv * hd);
    let mut tensors = Vec::new();
    let mut matrix = |name: String, role: &str, layer: Option<usize>, n: usize, k: usize| {
        let format = fallback(spec.recipe.pick(role, layer, s.n_layer), k);
        let ty = ggml(format);
        tensors.push(PlannedTensor {
            decl: TensorDecl::new(name, &[k as u64, n as u64], ty),
            format,
            n,
            k,
            fill: Fill::Normal(STD),
        });
    };
    // Tied embeddings are the output matrix too: llama.cpp gives them the output's format.
    let embd_role = if s.tied_embeddings { "output" } else { "embd" };
    matrix("token_embd.weight".into(), embd_role, None, vocab, d);
    if !s.tied_embeddings {
        matrix("output.weight".into(), "output", None, vocab, d);
    }
    for i in 0..s.n_layer {
        let n = |t: &str| format!("blk.{i}.{t}.weight");
        let l = Some(i);
        matrix(n("attn_q"), "attn_q", l, qd, d);
        matrix(n("attn_k"), "attn_k", l, kvd, d);
        matrix(n("attn_v"), "attn_v", l, kvd, d);
        matrix(n("attn_output"), "attn_output", l, d, qd);
        matrix(n("ffn_gate"), "ffn_gate", l, s.n_ff, d);
        matrix(n("ffn_up"), "ffn_up", l, s.n_ff, d);
        matrix(n("ffn_down"), "ffn_down", l, d, s.n_ff);
    }
    let mut vector = |name: String, values: Vec<f32>| {
        tensors.push(PlannedTensor {
            decl: TensorDecl::new(name, &[values.len() as u64], GgmlType::F32),
            format: Format::F32,
            n: 1,
            k: values.len(),
            fill: Fill::Values(values),
        });
    };
    vector("output_norm.weight".into(), vec![1.0; d]);
    for i in 0..s.n_layer {
        vector(format!("blk.{i}.attn_norm.weight"), vec![1.0; d]);
        vector(format!("blk.{i}.ffn_norm.weight"), vec![1.0; d]);
    }
    if let Some((factor, low, high, orig)) = s.llama3_rope {
        vector(
            "rope_freqs.weight".into(),
            llama3_rope_factors(s.rope_base, hd, factor, low, high, orig),
        );
    }
    Ok(Plan {
        meta,
        tensors,
        vocab,
    })
}

fn ggml(f: Format) -> GgmlType {
    // Every format `Recipe` and `fallback` pick has a GGUF type (checked in from_name).
    f.ggml_type()
        .and_then(GgmlType::from_id)
        .unwrap_or(GgmlType::F32)
}

/// Llama 3's per-frequency divisors, as llama.cpp's converter writes `rope_freqs.weight`.
pub fn llama3_rope_factors(
    base: f32,
    head_dim: usize,
    factor: f32,
    low_freq_factor: f32,
    high_freq_factor: f32,
    orig_ctx: usize,
) -> Vec<f32> {
    let (base, orig) = (base as f64, orig_ctx as f64);
    let low_wavelen = orig / low_freq_factor as f64;
    let high_wavelen = orig / high_freq_factor as f64;
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / base.powf((2 * i) as f64 / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let f = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor as f64
            } else {
                let smooth = (orig / wavelen - low_freq_factor as f64)
                    / (high_freq_factor - low_freq_factor) as f64;
                1.0 / ((1.0 - smooth) / factor as f64 + smooth)
            };
            f as f32
        })
        .collect()
}

#[cfg(test)]
mod tests;
