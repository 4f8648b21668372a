//! The model's tensors as the file holds them: borrowed from the memory-mapped GGUF file and
//! wrapped as `QuantMatrix` (GGUF dims are `[k, n]`: dims[0] varies fastest); vectors (norms,
//! biases) widened to f32. The f64 reference forward reads these; the forward pass reads the
//! copies a backend prepared from them (`prepared.rs`).

use crate::config::Config;
use crate::error::{ModelError, Result};
use flexkern_gguf::GgufFile;
use flexkern_quant::{Format, QuantMatrix};

/// One transformer block.
pub struct Layer<'a> {
    pub attn_norm: Vec<f32>,
    pub wq: QuantMatrix<'a>,
    pub wk: QuantMatrix<'a>,
    pub wv: QuantMatrix<'a>,
    pub wo: QuantMatrix<'a>,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub gate: QuantMatrix<'a>,
    pub up: QuantMatrix<'a>,
    pub down: QuantMatrix<'a>,
}

pub struct Weights<'a> {
    pub tok_embd: QuantMatrix<'a>,
    pub output_norm: Vec<f32>,
    /// `output.weight`, or `token_embd.weight` when the embeddings are tied.
    pub output: QuantMatrix<'a>,
    /// No `output.weight`: `output` is the embedding table (a backend prepares it once).
    pub tied_output: bool,
    pub layers: Vec<Layer<'a>>,
    /// Per-frequency RoPE divisors (`rope_freqs.weight`, `[rope_dims / 2]`): how llama.cpp's
    /// converter stores Llama 3's "llama3" RoPE scaling.
    pub rope_freqs: Option<Vec<f32>>,
}

/// Finds `name`, checks its dims (GGUF order), and returns its format and bytes.
fn raw<'a>(f: &'a GgufFile, name: &str, dims: &[usize]) -> Result<(Format, &'a [u8])> {
    let info = f
        .tensor_info(name)
        .ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
    let want: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
    let mut found = info.dims.clone();
    // Trailing unit dims carry no information.
    while found.len() > want.len() && found.last() == Some(&1) {
        found.pop();
    }
    if found != want {
        return Err(ModelError::TensorShape {
            name: name.to_string(),
            expected: want,
            found: info.dims.clone(),
        });
    }
    let ty = info.ggml_type as u32;
    let format = Format::from_ggml_type(ty).ok_or_else(|| ModelError::UnsupportedType {
        name: name.to_string(),
        ty: info.ggml_type.name().to_string(),
    })?;
    Ok((format, f.tensor_data(name)?))
}

/// A `[n, k]` matrix stored as GGUF dims `[k, n]`.
pub fn matrix<'a>(f: &'a GgufFile, name: &str, n: usize, k: usize) -> Result<QuantMatrix<'a>> {
    let (format, bytes) = raw(f, name, &[k, n])?;
    QuantMatrix::new(format, n, k, bytes).map_err(|e| ModelError::UnsupportedType {
        name: name.to_string(),
        ty: format!("{format}: {e}"),
    })
}

/// A vector of `len` elements, widened to f32.
pub fn vector(f: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    let (format, bytes) = raw(f, name, &[len])?;
    Ok(QuantMatrix::new(format, 1, len, bytes)?.dequantize()?)
}

fn opt_vector(f: &GgufFile, name: &str, len: usize) -> Result<Option<Vec<f32>>> {
    match f.tensor_info(name) {
        Some(_) => vector(f, name, len).map(Some),
        None => Ok(None),
    }
}

impl<'a> Weights<'a> {
    /// Loads every tensor; `progress(done, total)` is called after each one.
    pub fn load(
        f: &'a GgufFile,
        c: &Config,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Self> {
        let (d, qd, kvd) = (c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim);
        let total = c.n_layer + 2;
        let tok_embd = matrix(f, "token_embd.weight", c.vocab, d)?;
        let tied_output = f.tensor_info("output.weight").is_none();
        let output = match tied_output {
            false => matrix(f, "output.weight", c.vocab, d)?,
            true => tok_embd.clone(),
        };
        let output_norm = vector(f, "output_norm.weight", d)?;
        let rope_freqs = opt_vector(f, "rope_freqs.weight", c.rope_dims / 2)?;
        progress(2, total);
        let mut layers = Vec::with_capacity(c.n_layer);
        for i in 0..c.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            layers.push(Layer {
                attn_norm: vector(f, &n("attn_norm.weight"), d)?,
                wq: matrix(f, &n("attn_q.weight"), qd, d)?,
                wk: matrix(f, &n("attn_k.weight"), kvd, d)?,
                wv: matrix(f, &n("attn_v.weight"), kvd, d)?,
                wo: matrix(f, &n("attn_output.weight"), d, qd)?,
                bq: opt_vector(f, &n("attn_q.bias"), qd)?,
                bk: opt_vector(f, &n("attn_k.bias"), kvd)?,
                bv: opt_vector(f, &n("attn_v.bias"), kvd)?,
                ffn_norm: vector(f, &n("ffn_norm.weight"), d)?,
                gate: matrix(f, &n("ffn_gate.weight"), c.n_ff, d)?,
                up: matrix(f, &n("ffn_up.weight"), c.n_ff, d)?,
                down: matrix(f, &n("ffn_down.weight"), d, c.n_ff)?,
            });
            progress(i + 3, total);
        }
        Ok(Weights {
            tok_embd,
            output_norm,
            output,
            tied_output,
            layers,
            rope_freqs,
        })
    }
}
