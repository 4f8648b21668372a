//! The variant expression IR: a small typed expression language for `mask_mod` and `score_mod`.
//!
//! One description serves every backend: the CPU compiles it to a register program
//! (`program.rs`) evaluated over whole tiles, the block-mask builder reasons about it with
//! interval arithmetic (`interval.rs`), the f64 oracle walks the tree itself
//! (`reference/interp.rs`), and a GPU backend prints it as source.
//!
//! # Semantics every backend keeps
//! The oracle's interpreter is the executable form of this list; its differential test holds the
//! register program to it.
//! - **Types.** `Int` is i64, `Bool` is a truth value, `Float` is f32 in kernels and f64 in the
//!   oracle (a score mod sees f32 scores there; float constants and captures are rounded to the
//!   evaluating type, f32 captures widen exactly). Nothing converts implicitly: operands of a
//!   binary op and the arms of a `select` have one type.
//! - **Integer arithmetic** is two's-complement and wraps where C leaves overflow undefined:
//!   `i64::MAX + 1 == i64::MIN`, `-i64::MIN == i64::MIN`, `abs(i64::MIN) == i64::MIN`.
//! - **Division** truncates toward zero (C99); `x / 0 == 0`; `i64::MIN / -1 == i64::MIN`.
//! - **Remainder** takes the sign of the dividend (C99 `%`: `-7 % 2 == -1`, `7 % -2 == 1`);
//!   `x % 0 == 0`; `i64::MIN % -1 == 0`.
//! - **Shifts**: `<<` and arithmetic (sign-filling) `>>` by an amount in `0..64`; any other
//!   amount, negative or >= 64, gives 0 (also for a negative `x >> 64`). Hardware that masks
//!   the amount (x86, PTX) needs the guard. `&` and `|` act on the two's-complement bits.
//! - **Comparisons**: integers exactly. Floats by IEEE 754: every comparison with a NaN is
//!   false except `!=`, which is true; `-0.0 == 0.0`. Bools: `==`, `!=`, `and`, `or`.
//! - **Casts**: `to_float` is the only one: int to the evaluating float type, rounded to nearest
//!   (in kernels, integers above 2^24 lose low bits). There is no float to int cast.
//! - **Float operations** follow IEEE 754 in the evaluating type: `1 / 0 == inf`,
//!   `log(0) == -inf`, `log(-1)`, `sqrt(-1)` and `0 / 0` are NaN, NaN operands give NaN.
//!   `min`/`max` are IEEE minNum/maxNum (CUDA `fminf`/`fmaxf`): a NaN operand yields the other
//!   one; which zero `min(-0.0, 0.0)` returns is unspecified. `exp`, `log`, `sqrt` are correctly
//!   rounded or libm-accurate; kernels may use a fast `tanh` within 4e-7 relative error.
//! - **Loads** index a 1-D capture with an i64. `prepare` proves by interval analysis that every
//!   load (in both arms of every `select`) stays inside its capture for every position the call
//!   can produce, and rejects the variant otherwise; evaluators still read 0 outside, so no
//!   evaluation ever reads out of bounds.
//! - **No short-circuit**: `select` evaluates both arms and `and`/`or` both operands. The IR has
//!   no side effects and never traps, so this only matters for the bounds proof above (an arm
//!   that is never chosen must still be valid) and lets backends evaluate branch-free.
//! - **Positions** are logical: query `i` of a sequence with lengths `q_len`, `kv_len` sits at
//!   `kv_len - q_len + i`, negative when `q_len > kv_len`.
//!
//! # Masks, scores and NaN
//! The score mod runs on every visited position, then the mask: a masked position's score is
//! never used, whatever its value (NaN included). Among kept positions, a score of `-inf` has
//! weight 0; a row with no kept position (and no sink) gives O = 0 and LSE = -inf. A kept score
//! that is NaN makes that row's O and LSE NaN, never "masked", so a score mod that breaks shows;
//! a kept `+inf` does too (the softmax takes `inf - inf`). Use large finite values to force
//! attention to a key.

use std::fmt;
use std::ops;
use std::sync::Arc;

/// Value types of the IR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Int,
    Float,
    Bool,
}

/// Free variables a mod may read. Positions are logical: a query at index `i` of a sequence with
/// q length Lq and KV length Lk sits at position `Lk - Lq + i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Var {
    /// The raw score (score_mod only): `(q . k) * scale` after earlier score mods.
    Score,
    /// Sequence index in the batch.
    Batch,
    /// Query head.
    Head,
    /// Query position.
    QPos,
    /// Key/value position.
    KvPos,
    /// This sequence's query length.
    QLen,
    /// This sequence's KV length.
    KvLen,
    /// Row of the query in the packed Q tensor (`cu_q_lens[b] + i`): indexes per-token captures.
    QToken,
}

impl Var {
    pub fn ty(self) -> Ty {
        match self {
            Var::Score => Ty::Float,
            _ => Ty::Int,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Var::Score => "score",
            Var::Batch => "b",
            Var::Head => "h",
            Var::QPos => "q_pos",
            Var::KvPos => "kv_pos",
            Var::QLen => "q_len",
            Var::KvLen => "kv_len",
            Var::QToken => "q_token",
        }
    }
}

/// Data a mod captures: document ids, ALiBi slopes, bias tables, tree bitmasks.
#[derive(Clone, Debug, PartialEq)]
pub enum CaptureData {
    Int(Vec<i64>),
    Float(Vec<f32>),
}

/// A named captured tensor (1-D; index arithmetic in the expression addresses more dims).
#[derive(Debug, PartialEq)]
pub struct Capture {
    pub name: String,
    pub data: CaptureData,
}

impl Capture {
    pub fn len(&self) -> usize {
        match &self.data {
            CaptureData::Int(v) => v.len(),
            CaptureData::Float(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn ty(&self) -> Ty {
        match &self.data {
            CaptureData::Int(_) => Ty::Int,
            CaptureData::Float(_) => Ty::Float,
        }
    }
}

/// A handle to a captured tensor, used to build `Load` expressions.
#[derive(Clone, Debug)]
pub struct Tensor(pub Arc<Capture>);

impl Tensor {
    pub fn int(name: &str, data: Vec<i64>) -> Tensor {
        Tensor(Arc::new(Capture {
            name: name.to_string(),
            data: CaptureData::Int(data),
        }))
    }
    pub fn float(name: &str, data: Vec<f32>) -> Tensor {
        Tensor(Arc::new(Capture {
            name: name.to_string(),
            data: CaptureData::Float(data),
        }))
    }
    /// `self[index]`.
    pub fn at(&self, index: Expr) -> Expr {
        Expr::Load(self.0.clone(), Box::new(index))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Abs,
    Not,
    /// Float functions.
    Tanh,
    Exp,
    Log,
    Sqrt,
    /// Int to float.
    ToFloat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Int: truncating division (0 when dividing by 0). Float: IEEE.
    Div,
    /// Int: remainder with the sign of the dividend (0 when dividing by 0).
    Rem,
    Min,
    Max,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    /// Int bit operations (shift amounts outside 0..64 give 0).
    BitAnd,
    BitOr,
    Shl,
    Shr,
}

/// An expression node. Build with the helpers below and ordinary operators.
#[derive(Clone, Debug)]
pub enum Expr {
    Var(Var),
    Int(i64),
    Float(f64),
    Bool(bool),
    Load(Arc<Capture>, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `cond ? a : b`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
}

pub fn score() -> Expr {
    Expr::Var(Var::Score)
}
pub fn b() -> Expr {
    Expr::Var(Var::Batch)
}
pub fn h() -> Expr {
    Expr::Var(Var::Head)
}
pub fn q_pos() -> Expr {
    Expr::Var(Var::QPos)
}
pub fn kv_pos() -> Expr {
    Expr::Var(Var::KvPos)
}
pub fn q_len() -> Expr {
    Expr::Var(Var::QLen)
}
pub fn kv_len() -> Expr {
    Expr::Var(Var::KvLen)
}
pub fn q_token() -> Expr {
    Expr::Var(Var::QToken)
}
pub fn int(v: i64) -> Expr {
    Expr::Int(v)
}
pub fn float(v: f64) -> Expr {
    Expr::Float(v)
}
pub fn boolean(v: bool) -> Expr {
    Expr::Bool(v)
}
pub fn select(c: Expr, a: Expr, b: Expr) -> Expr {
    Expr::Select(Box::new(c), Box::new(a), Box::new(b))
}

impl Expr {
    fn bin(self, op: BinOp, o: Expr) -> Expr {
        Expr::Binary(op, Box::new(self), Box::new(o))
    }
    fn un(self, op: UnOp) -> Expr {
        Expr::Unary(op, Box::new(self))
    }
    pub fn eq(self, o: Expr) -> Expr {
        self.bin(BinOp::Eq, o)
    }
    pub fn ne(self, o: Expr) -> Expr {
        self.bin(BinOp::Ne, o)
    }
    pub fn lt(self, o: Expr) -> Expr {
        self.bin(BinOp::Lt, o)
    }
    pub fn le(self, o: Expr) -> Expr {
        self.bin(BinOp::Le, o)
    }
    pub fn gt(self, o: Expr) -> Expr {
        self.bin(BinOp::Gt, o)
    }
    pub fn ge(self, o: Expr) -> Expr {
        self.bin(BinOp::Ge, o)
    }
    pub fn and(self, o: Expr) -> Expr {
        self.bin(BinOp::And, o)
    }
    pub fn or(self, o: Expr) -> Expr {
        self.bin(BinOp::Or, o)
    }
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Expr {
        self.un(UnOp::Not)
    }
    pub fn min(self, o: Expr) -> Expr {
        self.bin(BinOp::Min, o)
    }
    pub fn max(self, o: Expr) -> Expr {
        self.bin(BinOp::Max, o)
    }
    pub fn clamp(self, lo: Expr, hi: Expr) -> Expr {
        self.max(lo).min(hi)
    }
    pub fn abs(self) -> Expr {
        self.un(UnOp::Abs)
    }
    pub fn tanh(self) -> Expr {
        self.un(UnOp::Tanh)
    }
    pub fn exp(self) -> Expr {
        self.un(UnOp::Exp)
    }
    pub fn log(self) -> Expr {
        self.un(UnOp::Log)
    }
    pub fn sqrt(self) -> Expr {
        self.un(UnOp::Sqrt)
    }
    pub fn to_float(self) -> Expr {
        self.un(UnOp::ToFloat)
    }

    /// The expression's type, or an error naming the ill-typed node.
    pub fn ty(&self) -> Result<Ty, String> {
        Ok(match self {
            Expr::Var(v) => v.ty(),
            Expr::Int(_) => Ty::Int,
            Expr::Float(_) => Ty::Float,
            Expr::Bool(_) => Ty::Bool,
            Expr::Load(c, i) => {
                if i.ty()? != Ty::Int {
                    return Err(format!("index of capture `{}` must be Int", c.name));
                }
                c.ty()
            }
            Expr::Unary(op, a) => {
                let t = a.ty()?;
                match (op, t) {
                    (UnOp::Neg | UnOp::Abs, Ty::Int | Ty::Float) => t,
                    (UnOp::Not, Ty::Bool) => Ty::Bool,
                    (UnOp::Tanh | UnOp::Exp | UnOp::Log | UnOp::Sqrt, Ty::Float) => Ty::Float,
                    (UnOp::ToFloat, Ty::Int) => Ty::Float,
                    _ => return Err(format!("{op:?} does not apply to {t:?} in `{self}`")),
                }
            }
            Expr::Binary(op, a, b) => {
                let (ta, tb) = (a.ty()?, b.ty()?);
                if ta != tb {
                    return Err(format!(
                        "{op:?} mixes {ta:?} and {tb:?} in `{self}` (use to_float)"
                    ));
                }
                use BinOp::*;
                match (op, ta) {
                    (Add | Sub | Mul | Div | Min | Max, Ty::Int | Ty::Float) => ta,
                    (Rem | BitAnd | BitOr | Shl | Shr, Ty::Int) => Ty::Int,
                    (Eq | Ne, _) => Ty::Bool,
                    (Lt | Le | Gt | Ge, Ty::Int | Ty::Float) => Ty::Bool,
                    (And | Or, Ty::Bool) => Ty::Bool,
                    _ => return Err(format!("{op:?} does not apply to {ta:?} in `{self}`")),
                }
            }
            Expr::Select(c, a, b) => {
                if c.ty()? != Ty::Bool {
                    return Err(format!("select condition must be Bool in `{self}`"));
                }
                let (ta, tb) = (a.ty()?, b.ty()?);
                if ta != tb {
                    return Err(format!("select branches are {ta:?} and {tb:?} in `{self}`"));
                }
                ta
            }
        })
    }

    /// Calls `f` on every node, children first.
    pub fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        match self {
            Expr::Load(_, i) | Expr::Unary(_, i) => i.visit(f),
            Expr::Binary(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Select(c, a, b) => {
                c.visit(f);
                a.visit(f);
                b.visit(f);
            }
            _ => {}
        }
        f(self);
    }

    pub fn uses(&self, v: Var) -> bool {
        let mut found = false;
        self.visit(&mut |e| found |= matches!(e, Expr::Var(x) if *x == v));
        found
    }

    /// The distinct captures this expression reads, in first-use order.
    pub fn captures(&self) -> Vec<Arc<Capture>> {
        let mut out: Vec<Arc<Capture>> = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Load(c, _) = e {
                if !out.iter().any(|x| Arc::ptr_eq(x, c)) {
                    out.push(c.clone());
                }
            }
        });
        out
    }

    /// Replaces `Var::Score` by `inner` (chaining score mods).
    pub fn substitute_score(&self, inner: &Expr) -> Expr {
        match self {
            Expr::Var(Var::Score) => inner.clone(),
            Expr::Load(c, i) => Expr::Load(c.clone(), Box::new(i.substitute_score(inner))),
            Expr::Unary(op, a) => Expr::Unary(*op, Box::new(a.substitute_score(inner))),
            Expr::Binary(op, a, b) => Expr::Binary(
                *op,
                Box::new(a.substitute_score(inner)),
                Box::new(b.substitute_score(inner)),
            ),
            Expr::Select(c, a, b) => Expr::Select(
                Box::new(c.substitute_score(inner)),
                Box::new(a.substitute_score(inner)),
                Box::new(b.substitute_score(inner)),
            ),
            other => other.clone(),
        }
    }
}

macro_rules! arith {
    ($tr:ident, $m:ident, $op:ident) => {
        impl ops::$tr for Expr {
            type Output = Expr;
            fn $m(self, o: Expr) -> Expr {
                self.bin(BinOp::$op, o)
            }
        }
        impl ops::$tr<i64> for Expr {
            type Output = Expr;
            fn $m(self, o: i64) -> Expr {
                self.bin(BinOp::$op, Expr::Int(o))
            }
        }
        impl ops::$tr<f64> for Expr {
            type Output = Expr;
            fn $m(self, o: f64) -> Expr {
                self.bin(BinOp::$op, Expr::Float(o))
            }
        }
    };
}
arith!(Add, add, Add);
arith!(Sub, sub, Sub);
arith!(Mul, mul, Mul);
arith!(Div, div, Div);
arith!(Rem, rem, Rem);
arith!(BitAnd, bitand, BitAnd);
arith!(BitOr, bitor, BitOr);
arith!(Shl, shl, Shl);
arith!(Shr, shr, Shr);

impl ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        self.un(UnOp::Neg)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Var(v) => write!(f, "{}", v.name()),
            Expr::Int(v) => write!(f, "{v}"),
            Expr::Float(v) => write!(f, "{v:?}"),
            Expr::Bool(v) => write!(f, "{v}"),
            Expr::Load(c, i) => write!(f, "{}[{i}]", c.name),
            Expr::Unary(op, a) => write!(f, "{op:?}({a})"),
            Expr::Binary(op, a, b) => write!(f, "{op:?}({a}, {b})"),
            Expr::Select(c, a, b) => write!(f, "select({c}, {a}, {b})"),
        }
    }
}
