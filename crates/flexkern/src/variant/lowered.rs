//! The public, read-only view of a compiled variant program, for backends that translate it to
//! their own source (a GPU code generator), and its structural key.
//!
//! The view is the register program of `program.rs` in SSA order: instruction `i` defines value
//! `i`, its operands are earlier values. Integer and float constants are *lifted* into parameter
//! arrays, so `sliding_window(4096)` and `sliding_window(2048)` lower to the same instructions and
//! differ only in `int_params`; captured tensors are listed by name, type and length and read
//! through `Load`. [`Lowered::key`] names the structure alone: equal keys may share one compiled
//! kernel, with the parameters and captures passed at launch.
//!
//! Semantics every backend must keep (the CPU's, see `expr.rs`):
//! - `Int` is i64 with wrapping `+ - *` and negation; `/` truncates and `%` takes the dividend's
//!   sign; both give 0 when dividing by 0 (and `MIN / -1` wraps to `MIN`, `MIN % -1` is 0).
//! - `<<` and `>>` (arithmetic) give 0 for shift amounts outside `0..64`.
//! - `Float` is f32 in kernels (constants rounded from f64 to f32 once, here); `/` is IEEE;
//!   `min`/`max` return the other operand when one is NaN; comparisons with NaN are false.
//! - `ToFloat` rounds an i64 to the nearest f32.
//! - A `Load` outside the capture gives 0 (bounds are proven before launch; this is a guard).
//! - Identical sub-expressions (equal constants included) share one value: two equal
//!   constants of one variant lift to a single parameter.

use super::expr::{BinOp, Capture, CaptureData, Ty, UnOp, Var};
use super::program::{Op, Program};
use std::fmt::{self, Write as _};
use std::sync::Arc;

/// One instruction of the lowered program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoweredOp {
    Var(Var),
    /// `int_params[i]`.
    IntParam(usize),
    /// `float_params[i]`.
    FloatParam(usize),
    Bool(bool),
    /// `captures[capture][value index]`.
    Load {
        capture: usize,
        index: usize,
    },
    Unary(UnOp, usize),
    Binary(BinOp, usize, usize),
    /// `cond ? a : b`.
    Select(usize, usize, usize),
}

/// An instruction and the type of the value it defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Inst {
    pub op: LoweredOp,
    pub ty: Ty,
}

/// A captured tensor as the program sees it.
#[derive(Clone, Debug)]
pub struct CaptureRef {
    pub name: String,
    pub ty: Ty,
    pub len: usize,
    pub data: Arc<Capture>,
}

impl CaptureRef {
    /// Int captures as i64 (empty for float captures).
    pub fn ints(&self) -> &[i64] {
        match &self.data.data {
            CaptureData::Int(v) => v,
            CaptureData::Float(_) => &[],
        }
    }
    /// Float captures as f32 (empty for int captures).
    pub fn floats(&self) -> &[f32] {
        match &self.data.data {
            CaptureData::Float(v) => v,
            CaptureData::Int(_) => &[],
        }
    }
}

/// A compiled mask or score program, constants lifted.
#[derive(Clone, Debug)]
pub struct Lowered {
    insts: Vec<Inst>,
    captures: Vec<CaptureRef>,
    int_params: Vec<i64>,
    float_params: Vec<f32>,
}

/// The structure of a lowered program: instructions, types and capture types, without captured
/// data, capture lengths or lifted constants. Readable text; `hash64` for file names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LoweredKey(pub String);

impl LoweredKey {
    /// FNV-1a of the text: stable across runs and builds (unlike `DefaultHasher`).
    pub fn hash64(&self) -> u64 {
        fnv1a(self.0.as_bytes())
    }
}

/// 64-bit FNV-1a, the stable hash behind structural keys.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Lowered {
    pub fn new(p: &Program) -> Lowered {
        let (ops, tys) = p.ssa();
        let mut out = Lowered {
            insts: Vec::with_capacity(ops.len()),
            captures: p
                .captures()
                .iter()
                .map(|c| CaptureRef {
                    name: c.name.clone(),
                    ty: c.ty(),
                    len: c.len(),
                    data: c.clone(),
                })
                .collect(),
            int_params: Vec::new(),
            float_params: Vec::new(),
        };
        for (op, &ty) in ops.iter().zip(tys) {
            let op = match *op {
                Op::Var(v) => LoweredOp::Var(v),
                Op::Int(v) => {
                    out.int_params.push(v);
                    LoweredOp::IntParam(out.int_params.len() - 1)
                }
                Op::Float(bits) => {
                    out.float_params.push(f64::from_bits(bits) as f32);
                    LoweredOp::FloatParam(out.float_params.len() - 1)
                }
                Op::Bool(v) => LoweredOp::Bool(v),
                Op::Load(c, i) => LoweredOp::Load {
                    capture: c,
                    index: i,
                },
                Op::Un(o, a) => LoweredOp::Unary(o, a),
                Op::Bin(o, a, b) => LoweredOp::Binary(o, a, b),
                Op::Select(c, a, b) => LoweredOp::Select(c, a, b),
            };
            out.insts.push(Inst { op, ty });
        }
        out
    }

    /// Instructions in SSA order; the last one is the program's result.
    pub fn insts(&self) -> &[Inst] {
        &self.insts
    }
    pub fn captures(&self) -> &[CaptureRef] {
        &self.captures
    }
    pub fn int_params(&self) -> &[i64] {
        &self.int_params
    }
    pub fn float_params(&self) -> &[f32] {
        &self.float_params
    }
    /// Type of the result (Bool for masks, Float for score mods).
    pub fn result_ty(&self) -> Ty {
        self.insts.last().map_or(Ty::Bool, |i| i.ty)
    }
    /// Free variables read, in first-use order.
    pub fn vars(&self) -> Vec<Var> {
        let mut out = Vec::new();
        for i in &self.insts {
            if let LoweredOp::Var(v) = i.op {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        out
    }

    pub fn key(&self) -> LoweredKey {
        let mut s = String::new();
        for c in &self.captures {
            let _ = write!(s, "cap:{:?};", c.ty);
        }
        let _ = write!(s, "{self}");
        LoweredKey(s)
    }
}

/// One instruction a line: `%3: Int = Binary(Sub, %1, %2)`, parameters as `i[0]` / `f[0]`.
impl fmt::Display for Lowered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, inst) in self.insts.iter().enumerate() {
            write!(f, "%{i}: {:?} = ", inst.ty)?;
            match inst.op {
                LoweredOp::Var(v) => write!(f, "{}", v.name())?,
                LoweredOp::IntParam(k) => write!(f, "i[{k}]")?,
                LoweredOp::FloatParam(k) => write!(f, "f[{k}]")?,
                LoweredOp::Bool(b) => write!(f, "{b}")?,
                LoweredOp::Load { capture, index } => write!(f, "cap{capture}[%{index}]")?,
                LoweredOp::Unary(o, a) => write!(f, "{o:?}(%{a})")?,
                LoweredOp::Binary(o, a, b) => write!(f, "{o:?}(%{a}, %{b})")?,
                LoweredOp::Select(c, a, b) => write!(f, "select(%{c}, %{a}, %{b})")?,
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variant::builtins::{alibi, alibi_slopes, causal, document, sliding_window};
    use crate::variant::Variant;

    fn mask_of(v: &Variant) -> Lowered {
        Lowered::new(v.compile().unwrap().mask.as_ref().unwrap())
    }

    #[test]
    fn window_sizes_share_a_key_and_differ_in_parameters() {
        let a = mask_of(&Variant::full().mask(causal()).mask(sliding_window(4096)));
        let b = mask_of(&Variant::full().mask(causal()).mask(sliding_window(2048)));
        assert_eq!(a.key(), b.key());
        assert_eq!(a.key().hash64(), b.key().hash64());
        assert_ne!(a.int_params(), b.int_params());
        assert!(a.int_params().contains(&4096) && b.int_params().contains(&2048));
        let c = mask_of(&Variant::full().mask(causal()));
        assert_ne!(a.key(), c.key());
    }

    #[test]
    fn captures_are_listed_not_keyed() {
        let a = mask_of(&Variant::full().mask(document(vec![0, 0, 1, 1])));
        let b = mask_of(&Variant::full().mask(document(vec![0, 1, 1, 2, 2, 2])));
        assert_eq!(a.key(), b.key());
        assert_eq!(a.captures().len(), 1);
        assert_eq!(a.captures()[0].len, 4);
        assert_eq!(a.captures()[0].ty, Ty::Int);
        assert_eq!(b.captures()[0].ints(), &[0, 1, 1, 2, 2, 2]);
        assert_eq!(a.result_ty(), Ty::Bool);
        assert!(a.vars().contains(&Var::QToken) || a.vars().contains(&Var::QPos));
    }

    #[test]
    fn score_program_lifts_floats_and_reads_score() {
        let v = Variant::full().score(alibi(alibi_slopes(4)));
        let l = Lowered::new(v.compile().unwrap().score.as_ref().unwrap());
        assert_eq!(l.result_ty(), Ty::Float);
        assert!(l.vars().contains(&Var::Score));
        assert_eq!(l.captures()[0].ty, Ty::Float);
        assert_eq!(l.captures()[0].floats().len(), 4);
        // Every instruction reads only earlier values (SSA order).
        for (i, inst) in l.insts().iter().enumerate() {
            let reads: Vec<usize> = match inst.op {
                LoweredOp::Load { index, .. } => vec![index],
                LoweredOp::Unary(_, a) => vec![a],
                LoweredOp::Binary(_, a, b) => vec![a, b],
                LoweredOp::Select(c, a, b) => vec![c, a, b],
                _ => vec![],
            };
            assert!(reads.iter().all(|&r| r < i), "{l}");
        }
    }
}
