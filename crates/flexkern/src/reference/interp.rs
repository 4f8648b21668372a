//! The oracle's own evaluator of the variant IR: walks the `Expr` tree one element at a time in
//! f64, following the semantics documented in `variant/expr.rs`. It shares nothing with the
//! register program the kernels run (`variant/program.rs`), so a bug in one evaluator shows up
//! as a disagreement instead of hiding in both.

use crate::error::{Error, Result};
use crate::variant::expr::{BinOp, CaptureData, Expr, Ty, UnOp, Var};

/// The free variables at one (query, key) element.
#[derive(Clone, Copy, Debug, Default)]
pub struct Point {
    pub score: f64,
    pub batch: i64,
    pub head: i64,
    pub q_pos: i64,
    pub kv_pos: i64,
    pub q_len: i64,
    pub kv_len: i64,
    pub q_token: i64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// A type-checked expression ready to evaluate.
#[derive(Clone, Debug)]
pub struct Interp {
    expr: Expr,
}

impl Interp {
    /// Type-checks `e` (it must have type `want`).
    pub fn new(e: &Expr, want: Ty) -> Result<Interp> {
        let ty = e.ty().map_err(Error::Expr)?;
        if ty != want {
            return Err(Error::Expr(format!(
                "expected a {want:?} expression, got {ty:?}: `{e}`"
            )));
        }
        Ok(Interp { expr: e.clone() })
    }

    /// The value of a Bool expression at `p`.
    pub fn mask(&self, p: &Point) -> bool {
        match eval(&self.expr, p) {
            Val::Bool(x) => x,
            v => unreachable!("type-checked Bool, got {v:?}"),
        }
    }

    /// The value of a Float expression at `p`.
    pub fn score(&self, p: &Point) -> f64 {
        match eval(&self.expr, p) {
            Val::Float(x) => x,
            v => unreachable!("type-checked Float, got {v:?}"),
        }
    }

    /// The value of an Int expression at `p`.
    pub fn int(&self, p: &Point) -> i64 {
        match eval(&self.expr, p) {
            Val::Int(x) => x,
            v => unreachable!("type-checked Int, got {v:?}"),
        }
    }
}

fn eval(e: &Expr, p: &Point) -> Val {
    match e {
        Expr::Var(v) => match v {
            Var::Score => Val::Float(p.score),
            Var::Batch => Val::Int(p.batch),
            Var::Head => Val::Int(p.head),
            Var::QPos => Val::Int(p.q_pos),
            Var::KvPos => Val::Int(p.kv_pos),
            Var::QLen => Val::Int(p.q_len),
            Var::KvLen => Val::Int(p.kv_len),
            Var::QToken => Val::Int(p.q_token),
        },
        Expr::Int(x) => Val::Int(*x),
        Expr::Float(x) => Val::Float(*x),
        Expr::Bool(x) => Val::Bool(*x),
        Expr::Load(c, i) => {
            let Val::Int(i) = eval(i, p) else {
                unreachable!("type-checked index")
            };
            // Outside the capture reads 0 (`prepare` proves every index in bounds first).
            let at = usize::try_from(i).ok();
            match &c.data {
                CaptureData::Int(v) => Val::Int(at.and_then(|i| v.get(i)).copied().unwrap_or(0)),
                CaptureData::Float(v) => {
                    Val::Float(at.and_then(|i| v.get(i)).map_or(0.0, |&x| f64::from(x)))
                }
            }
        }
        Expr::Unary(op, a) => unary(*op, eval(a, p)),
        Expr::Binary(op, a, b) => binary(*op, eval(a, p), eval(b, p)),
        Expr::Select(c, a, b) => {
            // Pure expressions: evaluating only the chosen arm gives what evaluating both does.
            let Val::Bool(c) = eval(c, p) else {
                unreachable!("type-checked condition")
            };
            eval(if c { a } else { b }, p)
        }
    }
}

fn unary(op: UnOp, a: Val) -> Val {
    match (op, a) {
        (UnOp::Neg, Val::Int(x)) => Val::Int(x.wrapping_neg()),
        (UnOp::Abs, Val::Int(x)) => Val::Int(x.wrapping_abs()),
        (UnOp::Neg, Val::Float(x)) => Val::Float(-x),
        (UnOp::Abs, Val::Float(x)) => Val::Float(x.abs()),
        (UnOp::Not, Val::Bool(x)) => Val::Bool(!x),
        (UnOp::Tanh, Val::Float(x)) => Val::Float(x.tanh()),
        (UnOp::Exp, Val::Float(x)) => Val::Float(x.exp()),
        (UnOp::Log, Val::Float(x)) => Val::Float(x.ln()),
        (UnOp::Sqrt, Val::Float(x)) => Val::Float(x.sqrt()),
        (UnOp::ToFloat, Val::Int(x)) => Val::Float(x as f64),
        (op, a) => unreachable!("type-checked: {op:?} of {a:?}"),
    }
}

fn binary(op: BinOp, a: Val, b: Val) -> Val {
    use BinOp::*;
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => match op {
            Add => Val::Int(x.wrapping_add(y)),
            Sub => Val::Int(x.wrapping_sub(y)),
            Mul => Val::Int(x.wrapping_mul(y)),
            // Truncating, like C; by zero gives 0; i64::MIN / -1 wraps.
            Div => Val::Int(x.checked_div(y).unwrap_or(if y == 0 { 0 } else { x })),
            // The dividend's sign; by zero gives 0; i64::MIN % -1 is 0.
            Rem => Val::Int(x.checked_rem(y).unwrap_or(0)),
            Min => Val::Int(x.min(y)),
            Max => Val::Int(x.max(y)),
            BitAnd => Val::Int(x & y),
            BitOr => Val::Int(x | y),
            // Arithmetic shifts; amounts outside 0..64 give 0.
            Shl => Val::Int(
                u32::try_from(y)
                    .ok()
                    .and_then(|s| x.checked_shl(s))
                    .unwrap_or(0),
            ),
            Shr => Val::Int(
                u32::try_from(y)
                    .ok()
                    .and_then(|s| x.checked_shr(s))
                    .unwrap_or(0),
            ),
            Eq => Val::Bool(x == y),
            Ne => Val::Bool(x != y),
            Lt => Val::Bool(x < y),
            Le => Val::Bool(x <= y),
            Gt => Val::Bool(x > y),
            Ge => Val::Bool(x >= y),
            And | Or => unreachable!("type-checked: {op:?} of Int"),
        },
        (Val::Float(x), Val::Float(y)) => match op {
            Add => Val::Float(x + y),
            Sub => Val::Float(x - y),
            Mul => Val::Float(x * y),
            Div => Val::Float(x / y),
            // IEEE minNum/maxNum: a NaN operand yields the other one.
            Min => Val::Float(x.min(y)),
            Max => Val::Float(x.max(y)),
            // Ordered comparisons: false when either is NaN (`Ne` true).
            Eq => Val::Bool(x == y),
            Ne => Val::Bool(x != y),
            Lt => Val::Bool(x < y),
            Le => Val::Bool(x <= y),
            Gt => Val::Bool(x > y),
            Ge => Val::Bool(x >= y),
            _ => unreachable!("type-checked: {op:?} of Float"),
        },
        (Val::Bool(x), Val::Bool(y)) => match op {
            And => Val::Bool(x && y),
            Or => Val::Bool(x || y),
            Eq => Val::Bool(x == y),
            Ne => Val::Bool(x != y),
            _ => unreachable!("type-checked: {op:?} of Bool"),
        },
        (a, b) => unreachable!("type-checked: {op:?} of {a:?} and {b:?}"),
    }
}

#[cfg(test)]
#[path = "interp_tests.rs"]
mod tests;
