//! The programmable variant layer: `mask_mod` and `score_mod` as typed IR expressions, plus
//! attention sinks, compiled once and run by every backend.

pub mod block_mask;
pub mod builtins;
pub mod classify;
pub mod expr;
pub mod interval;
pub mod lowered;
pub mod parse;
pub mod program;

use crate::error::{Error, Result};
use expr::{Expr, Ty, Var};
use program::Program;
use std::sync::Arc;

pub use block_mask::BlockMask;
pub use expr::Tensor;

/// What a user writes: an optional mask (Bool), an optional score transform (Float, reads
/// `score`), optional per-head sink logits. Masks compose with `and`; score mods chain in order.
#[derive(Clone, Debug, Default)]
pub struct Variant {
    pub mask: Option<Expr>,
    pub score: Option<Expr>,
    pub sinks: Option<Arc<Vec<f32>>>,
}

impl Variant {
    /// Plain softmax attention: no mask, no score mod.
    pub fn full() -> Variant {
        Variant::default()
    }

    /// ANDs `m` into the mask.
    pub fn mask(mut self, m: Expr) -> Variant {
        self.mask = Some(match self.mask.take() {
            Some(old) => old.and(m),
            None => m,
        });
        self
    }

    /// Chains `s` after the current score mod (`s` reads the previous result as `score`).
    pub fn score(mut self, s: Expr) -> Variant {
        self.score = Some(match self.score.take() {
            Some(old) => s.substitute_score(&old),
            None => s,
        });
        self
    }

    /// One learned logit per query head added to the softmax denominator (gpt-oss sinks).
    pub fn sinks(mut self, sinks: Vec<f32>) -> Variant {
        self.sinks = Some(Arc::new(sinks));
        self
    }

    /// Type-checks and compiles both mods.
    pub fn compile(&self) -> Result<CompiledVariant> {
        for e in self.mask.iter().chain(self.score.iter()) {
            check_constants(e)?;
        }
        let mask = self
            .mask
            .as_ref()
            .map(|m| Program::compile(m, Ty::Bool))
            .transpose()?;
        if let Some(m) = &self.mask {
            if m.uses(Var::Score) {
                return Err(Error::Expr(format!("mask_mod cannot read `score`: `{m}`")));
            }
        }
        let score = self
            .score
            .as_ref()
            .map(|s| Program::compile(s, Ty::Float))
            .transpose()?;
        if let Some(s) = &self.sinks {
            if s.iter().any(|x| x.is_nan() || *x == f32::INFINITY) {
                return Err(crate::error::invalid(
                    "sinks",
                    "sink logits must be finite or -inf",
                ));
            }
        }
        Ok(CompiledVariant {
            mask,
            score,
            sinks: self.sinks.clone(),
        })
    }
}

/// Refuses what can only be a bad parameter: a non-finite float constant, a division by a
/// constant zero (a `softcap(0)` or `chunked(0)`), a NaN in a float capture (ALiBi slopes,
/// bias tables). Named `variant` (`sinks` has its own check).
fn check_constants(e: &Expr) -> Result<()> {
    use expr::{BinOp, CaptureData};
    let mut bad: Option<String> = None;
    e.visit(&mut |n| {
        let msg = match n {
            Expr::Float(x) if !x.is_finite() => Some(format!("the constant {x} is not finite")),
            Expr::Binary(BinOp::Div | BinOp::Rem, _, d)
                if matches!(**d, Expr::Int(0)) || matches!(**d, Expr::Float(z) if z == 0.0) =>
            {
                Some(format!("`{n}` divides by the constant 0"))
            }
            Expr::Load(c, _) => match &c.data {
                CaptureData::Float(v) => v
                    .iter()
                    .position(|x| x.is_nan())
                    .map(|i| format!("capture `{}` holds NaN at index {i}", c.name)),
                CaptureData::Int(_) => None,
            },
            _ => None,
        };
        if bad.is_none() {
            bad = msg;
        }
    });
    match bad {
        Some(msg) => Err(crate::error::invalid(
            "variant",
            format!("{msg} (in `{e}`)"),
        )),
        None => Ok(()),
    }
}

/// A variant ready to run: compiled programs and sinks.
#[derive(Clone, Debug)]
pub struct CompiledVariant {
    pub mask: Option<Program>,
    pub score: Option<Program>,
    pub sinks: Option<Arc<Vec<f32>>>,
}

impl CompiledVariant {
    /// Whether the BlockMask must be built per head (else one entry broadcasts over heads).
    pub fn mask_per_head(&self) -> bool {
        self.mask.as_ref().is_some_and(|m| m.uses(Var::Head))
    }
}

#[cfg(test)]
mod tests;
