//! The cross-backend model check behind `flexkern verify-model`: one model on two backends (or
//! in two precisions), fed the same tokens, compared logit by logit at every position.
//!
//! Teacher forcing: both sides run the prompt, then each token the *reference* picks greedily,
//! so an early divergence of the device's own argmax cannot cascade into unrelated positions.
//!
//! The rule at one position, with `tie` a logit tolerance (see [`Tolerance`]):
//! - every logit finite on both sides (NaN never passes), and
//!   `max |ref - dev| <= max_abs + max_rel * max |ref|`;
//! - top-5 as a set: an id may enter or leave the device's top 5 only when its reference logit
//!   is within `tie` of the reference's 5th largest (a near-tie at the boundary);
//! - top-5 in order: for ids in both top 5s whose reference logits differ by more than `tie`,
//!   the device ranks them as the reference does. Closer pairs may swap.

use crate::error::{ModelError, Result};
use crate::forward::{Logits, Model};
use crate::sampler::argmax;
use flexkern::backend::tensor_ops::TensorOps;
use flexkern::DType;

/// How many of the largest logits must agree.
pub const TOP: usize = 5;

/// Tolerances of the comparison, in logit units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Reference logits closer than this are a near-tie: their order (and a top-5 boundary
    /// between them) may differ on the device.
    pub tie: f32,
    /// Largest allowed `|ref - dev|` over the vocabulary ...
    pub max_abs: f32,
    /// ... plus this fraction of the position's largest `|ref|` (paths that round
    /// activations err in proportion to the logits' scale).
    pub max_rel: f32,
}

impl Tolerance {
    /// The bound on `max |ref - dev|` at a position whose largest `|ref|` is `max_ref`.
    pub fn bound(&self, max_ref: f32) -> f32 {
        self.max_abs + self.max_rel * max_ref
    }
}

/// One position's comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct PositionCheck {
    /// Position in the sequence (0 = the first prompt token).
    pub pos: usize,
    /// Whether the position is in the prompt (else its logits pick a generated token).
    pub prompt: bool,
    /// The reference's top 5 ids, largest first (ties by lower id).
    pub ref_top: Vec<u32>,
    pub dev_top: Vec<u32>,
    pub max_abs: f32,
    pub rms: f32,
    /// Largest `|ref|`, the scale `max_abs` is read against.
    pub max_ref: f32,
    /// Why the position failed; `None` when it passed.
    pub failure: Option<String>,
}

/// The whole run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckSummary {
    pub positions: usize,
    pub failed: usize,
    pub max_abs: f32,
    /// Position of `max_abs`.
    pub max_abs_pos: usize,
    /// Root mean square of every logit difference of every position.
    pub rms: f32,
    pub max_ref: f32,
    /// The reference's greedy tokens (what both sides were fed after the prompt).
    pub tokens: Vec<u32>,
}

/// The `k` largest entries of `logits`, largest first, ties by lower id. Non-finite values
/// must have been rejected before.
pub fn top_ids(logits: &[f32], k: usize) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let cmp = |a: &u32, b: &u32| {
        logits[*b as usize]
            .total_cmp(&logits[*a as usize])
            .then(a.cmp(b))
    };
    let k = k.min(ids.len());
    if k > 0 && k < ids.len() {
        ids.select_nth_unstable_by(k - 1, cmp);
    }
    ids.truncate(k);
    ids.sort_by(cmp);
    ids
}

/// Compares one position's logits under `tol`. Errors only on mismatched or empty inputs; a
/// numerical disagreement is a failed `PositionCheck`.
pub fn compare(
    pos: usize,
    reference: &[f32],
    device: &[f32],
    tol: &Tolerance,
) -> Result<PositionCheck> {
    if reference.is_empty() || reference.len() != device.len() {
        return Err(ModelError::InvalidArgument {
            arg: "device",
            msg: format!(
                "{} device logits for {} reference logits (must be equal and non-empty)",
                device.len(),
                reference.len()
            ),
        });
    }
    let mut c = PositionCheck {
        pos,
        prompt: false,
        ref_top: Vec::new(),
        dev_top: Vec::new(),
        max_abs: 0.0,
        rms: 0.0,
        max_ref: 0.0,
        failure: None,
    };
    let mut sq = 0f64;
    for (&r, &d) in reference.iter().zip(device) {
        if !r.is_finite() || !d.is_finite() {
            c.max_abs = f32::INFINITY;
            c.rms = f32::INFINITY;
            c.failure = Some(format!("non-finite logit (ref {r}, dev {d})"));
            return Ok(c);
        }
        let e = (r - d).abs();
        c.max_abs = c.max_abs.max(e);
        c.max_ref = c.max_ref.max(r.abs());
        sq += f64::from(e) * f64::from(e);
    }
    c.rms = (sq / reference.len() as f64).sqrt() as f32;
    c.ref_top = top_ids(reference, TOP);
    c.dev_top = top_ids(device, TOP);
    c.failure = top_rule(reference, &c.ref_top, &c.dev_top, tol.tie);
    if c.failure.is_none() && c.max_abs > tol.bound(c.max_ref) {
        c.failure = Some(format!(
            "max |diff| {:.3e} over the bound {:.3e}",
            c.max_abs,
            tol.bound(c.max_ref)
        ));
    }
    Ok(c)
}

/// The top-5 set and order rule (module docs); the first violation, if any.
fn top_rule(reference: &[f32], r: &[u32], d: &[u32], tie: f32) -> Option<String> {
    let lr = |id: u32| reference[id as usize];
    let edge = lr(*r.last()?);
    for &x in d.iter().filter(|x| !r.contains(x)) {
        if lr(x) < edge - tie {
            return Some(format!(
                "id {x} entered the top {TOP} (ref logit {} < 5th {edge} - tie)",
                lr(x)
            ));
        }
    }
    for &y in r.iter().filter(|y| !d.contains(y)) {
        if lr(y) > edge + tie {
            return Some(format!(
                "id {y} left the top {TOP} (ref logit {} > 5th {edge} + tie)",
                lr(y)
            ));
        }
    }
    let rank = |id: u32| d.iter().position(|&x| x == id);
    for (i, &a) in r.iter().enumerate() {
        for &b in &r[i + 1..] {
            if let (Some(ra), Some(rb)) = (rank(a), rank(b)) {
                if lr(a) - lr(b) > tie && ra > rb {
                    return Some(format!(
                        "ids {a} and {b} swapped (ref gap {} > tie)",
                        lr(a) - lr(b)
                    ));
                }
            }
        }
    }
    None
}

/// Runs `prompt` and then `tokens` greedy tokens of `reference` on both models (f32 KV
/// caches), feeding `device` the reference's tokens, and compares every position's logits;
/// `on_position` sees each comparison as it is made. The first generated token comes from the
/// prompt's last logits, each later one from a one-token decode step (the path generation
/// takes on both sides).
pub fn check_models<R: TensorOps, D: TensorOps>(
    reference: &Model<'_, R>,
    device: &Model<'_, D>,
    prompt: &[u32],
    tokens: usize,
    tol: &Tolerance,
    on_position: impl FnMut(&PositionCheck),
) -> Result<CheckSummary> {
    check_models_around(
        reference,
        device,
        prompt,
        tokens,
        tol,
        |step| step(),
        on_position,
    )
}

/// A device step, handed to `check_models_around`'s wrapper.
pub type Step<'s> = &'s mut dyn FnMut() -> Result<Vec<f32>>;

/// As `check_models`, with each device step run by `around` (which must call it once): a
/// process-wide kernel switch set for the device's steps only, for instance.
pub fn check_models_around<R: TensorOps, D: TensorOps>(
    reference: &Model<'_, R>,
    device: &Model<'_, D>,
    prompt: &[u32],
    tokens: usize,
    tol: &Tolerance,
    mut around: impl FnMut(Step<'_>) -> Result<Vec<f32>>,
    mut on_position: impl FnMut(&PositionCheck),
) -> Result<CheckSummary> {
    let vocab = reference.config.vocab;
    if device.config.vocab != vocab {
        return Err(ModelError::InvalidArgument {
            arg: "device",
            msg: format!("vocabularies differ: {} and {vocab}", device.config.vocab),
        });
    }
    if prompt.is_empty() {
        return Err(ModelError::InvalidArgument {
            arg: "prompt",
            msg: "no prompt tokens".into(),
        });
    }
    // The last generated token is never fed.
    let len = prompt.len().saturating_add(tokens.saturating_sub(1));
    let mut rc = reference.new_cache_with(len, DType::F32)?;
    let mut dc = device.new_cache_with(len, DType::F32)?;
    if rc.max_len() < len || dc.max_len() < len {
        return Err(ModelError::ContextFull {
            needed: len,
            max: rc.max_len().min(dc.max_len()),
        });
    }
    let mut s = CheckSummary::default();
    let mut sq = 0f64;
    let mut feed = prompt.to_vec();
    while s.tokens.len() < tokens || s.positions == 0 {
        let r = reference.forward(&mut rc, &feed, Logits::All)?;
        let d = around(&mut || device.forward(&mut dc, &feed, Logits::All))?;
        if d.len() != r.len() || r.len() != feed.len() * vocab {
            return Err(ModelError::InvalidArgument {
                arg: "device",
                msg: format!(
                    "{} device logits, {} reference logits for {} tokens of vocab {vocab}",
                    d.len(),
                    r.len(),
                    feed.len()
                ),
            });
        }
        for (i, (rl, dl)) in r.chunks_exact(vocab).zip(d.chunks_exact(vocab)).enumerate() {
            let pos = s.positions;
            let mut c = compare(pos, rl, dl, tol)?;
            c.prompt = pos + 1 < prompt.len();
            if c.failure.is_some() {
                s.failed += 1;
            }
            if c.max_abs > s.max_abs {
                s.max_abs = c.max_abs;
                s.max_abs_pos = pos;
            }
            s.max_ref = s.max_ref.max(c.max_ref);
            sq += f64::from(c.rms) * f64::from(c.rms);
            s.positions += 1;
            on_position(&c);
            if i + 1 == feed.len() && tokens > 0 {
                s.tokens.push(argmax(rl) as u32);
            }
        }
        if s.tokens.len() >= tokens {
            break;
        }
        feed = vec![*s.tokens.last().expect("a token was just picked")];
    }
    s.rms = (sq / s.positions.max(1) as f64).sqrt() as f32;
    Ok(s)
}

#[cfg(test)]
mod tests;
