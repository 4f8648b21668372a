//! The weights as a backend holds them: matrices through `TensorOps::prepare_weight` (the CPU's
//! interleaved copy, a GPU's one upload of the file's layout), vectors uploaded once. After
//! loading, a forward step reads nothing from the host.

use crate::error::Result;
use crate::weights::Weights;
use flexkern::backend::tensor_ops::TensorOps;
use flexkern::backend::to_device;
use flexkern_quant::{Precision, QuantMatrix};

pub struct PreparedLayer<'a, B: TensorOps + 'a> {
    pub attn_norm: B::Buffer,
    pub wq: B::Weight<'a>,
    pub wk: B::Weight<'a>,
    pub wv: B::Weight<'a>,
    pub wo: B::Weight<'a>,
    pub bq: Option<B::Buffer>,
    pub bk: Option<B::Buffer>,
    pub bv: Option<B::Buffer>,
    pub ffn_norm: B::Buffer,
    pub gate: B::Weight<'a>,
    pub up: B::Weight<'a>,
    pub down: B::Weight<'a>,
}

pub struct Prepared<'a, B: TensorOps + 'a> {
    pub tok_embd: B::Weight<'a>,
    pub output_norm: B::Buffer,
    /// `None` when the embeddings are tied: the output reads `tok_embd` (prepared once).
    output: Option<B::Weight<'a>>,
    pub layers: Vec<PreparedLayer<'a, B>>,
    /// How every matrix product treats its activation (`Precise`: f32, no 8-bit rounding).
    pub precision: Precision,
}

impl<'a, B: TensorOps + 'a> Prepared<'a, B> {
    /// The output projection.
    pub fn output(&self) -> &B::Weight<'a> {
        self.output.as_ref().unwrap_or(&self.tok_embd)
    }

    /// Prepares every tensor of `w` for `precision`; `progress(done, total)` after each layer.
    pub fn new(
        b: &B,
        w: &Weights<'a>,
        precision: Precision,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Self> {
        let total = w.layers.len() + 1;
        let vec = |v: &Vec<f32>| to_device(b, v);
        let opt = |v: &Option<Vec<f32>>| v.as_ref().map(|v| to_device(b, v)).transpose();
        let mat = |m: &QuantMatrix<'a>| b.prepare_weight(m.clone().with_precision(precision));
        let tok_embd = mat(&w.tok_embd)?;
        let output = match w.tied_output {
            true => None,
            false => Some(mat(&w.output)?),
        };
        let output_norm = vec(&w.output_norm)?;
        progress(1, total);
        let mut layers = Vec::with_capacity(w.layers.len());
        for (i, l) in w.layers.iter().enumerate() {
            layers.push(PreparedLayer {
                attn_norm: vec(&l.attn_norm)?,
                wq: mat(&l.wq)?,
                wk: mat(&l.wk)?,
                wv: mat(&l.wv)?,
                wo: mat(&l.wo)?,
                bq: opt(&l.bq)?,
                bk: opt(&l.bk)?,
                bv: opt(&l.bv)?,
                ffn_norm: vec(&l.ffn_norm)?,
                gate: mat(&l.gate)?,
                up: mat(&l.up)?,
                down: mat(&l.down)?,
            });
            progress(i + 2, total);
        }
        Ok(Prepared {
            tok_embd,
            output_norm,
            output,
            layers,
            precision,
        })
    }
}
