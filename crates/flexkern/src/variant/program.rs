//! The IR compiled to a register program and evaluated over whole tiles.
//!
//! Each instruction runs across every lane of a tile (rows = queries, columns = keys) in a tight
//! loop, so interpretation overhead is paid once per tile, not per element. The same program runs
//! in f32 (kernels) and f64 (the oracle) through the `Real` trait.

use super::expr::{BinOp, Capture, CaptureData, Expr, Ty, UnOp, Var};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// Float type a program evaluates in.
pub trait Real: Copy + PartialOrd + Send + Sync + 'static + std::fmt::Debug {
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn from_i64(x: i64) -> Self;
    fn tanh(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    fn neg(self) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    fn max(self, o: Self) -> Self;
}

macro_rules! impl_real {
    ($t:ty, $tanh:path) => {
        impl Real for $t {
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_i64(x: i64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn min(self, o: Self) -> Self {
                <$t>::min(self, o)
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                <$t>::max(self, o)
            }
        }
    };
}
impl_real!(f32, tanh_f32);
impl_real!(f64, f64::tanh);

/// 2^x in f32 without a libm call (kernels apply score programs to whole tiles, and loops over
/// this vectorize): round to nearest by the 1.5 * 2^23 trick, the Cephes exp2f polynomial on the
/// remainder (relative error ~2e-7), and 2^n built in the exponent bits.
#[inline(always)]
fn exp2_f32(x: f32) -> f32 {
    let x = x.clamp(-126.0, 126.0);
    let n = (x + 12_582_912.0) - 12_582_912.0;
    let f = x - n;
    let p = 1.535_336_2e-4f32;
    let p = p * f + 1.339_887_4e-3;
    let p = p * f + 9.618_437e-3;
    let p = p * f + 5.550_332_5e-2;
    let p = p * f + 2.402_264_8e-1;
    let p = p * f + 6.931_472e-1;
    let p = p * f + 1.0;
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// tanh in f32, branch-free: (1 - e) / (1 + e) with e = e^(-2|x|) (no overflow), an odd Taylor
/// polynomial below |x| = 0.25 where that form cancels; NaN stays NaN.
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let e = exp2_f32(a * (-2.0 * std::f32::consts::LOG2_E));
    let big = (1.0 - e) / (1.0 + e);
    let a2 = a * a;
    let poly =
        1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0 + a2 * (62.0 / 2835.0))));
    let t = if a < 0.25 { a * poly } else { big };
    t.copysign(x)
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    Var(Var),
    Int(i64),
    Float(u64), // f64 bits, so `Op` can be a hash key
    Bool(bool),
    Load(usize, usize),
    Un(UnOp, usize),
    Bin(BinOp, usize, usize),
    Select(usize, usize, usize),
}

impl Eq for Op {}
impl std::hash::Hash for Op {
    fn hash<H: std::hash::Hasher>(&self, s: &mut H) {
        format!("{self:?}").hash(s)
    }
}

/// A compiled expression. Register `i` holds the value of instruction `i` (SSA form).
#[derive(Clone, Debug)]
pub struct Program {
    ops: Vec<Op>,
    tys: Vec<Ty>,
    captures: Vec<Arc<Capture>>,
    expr: Expr,
}

/// Where a tile sits: one sequence, one head, `rows` consecutive queries, `cols` consecutive keys.
#[derive(Clone, Copy, Debug)]
pub struct TileCtx {
    pub batch: i64,
    pub head: i64,
    pub q_len: i64,
    pub kv_len: i64,
    pub q_pos0: i64,
    pub q_token0: i64,
    pub rows: usize,
    pub kv_pos0: i64,
    pub cols: usize,
}

/// Reusable per-thread buffers for tile evaluation.
#[derive(Default)]
pub struct Scratch<F> {
    ints: Vec<Vec<i64>>,
    floats: Vec<Vec<F>>,
    bools: Vec<Vec<bool>>,
}

impl Program {
    /// Type-checks `expr` (which must have type `want`) and compiles it, merging common subexpressions.
    pub fn compile(expr: &Expr, want: Ty) -> Result<Program> {
        let ty = expr.ty().map_err(Error::Expr)?;
        if ty != want {
            return Err(Error::Expr(format!(
                "expected a {want:?} expression, got {ty:?}: `{expr}`"
            )));
        }
        let mut p = Program {
            ops: Vec::new(),
            tys: Vec::new(),
            captures: expr.captures(),
            expr: expr.clone(),
        };
        let mut memo = HashMap::new();
        p.lower(expr, &mut memo);
        Ok(p)
    }

    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    pub fn captures(&self) -> &[Arc<Capture>] {
        &self.captures
    }

    pub fn uses(&self, v: Var) -> bool {
        self.ops.contains(&Op::Var(v))
    }

    /// The typed SSA program, read-only (`lowered.rs` builds its public view from it).
    pub(crate) fn ssa(&self) -> (&[Op], &[Ty]) {
        (&self.ops, &self.tys)
    }

    fn lower(&mut self, e: &Expr, memo: &mut HashMap<Op, usize>) -> usize {
        let (op, ty) = match e {
            Expr::Var(v) => (Op::Var(*v), v.ty()),
            Expr::Int(v) => (Op::Int(*v), Ty::Int),
            Expr::Float(v) => (Op::Float(v.to_bits()), Ty::Float),
            Expr::Bool(v) => (Op::Bool(*v), Ty::Bool),
            Expr::Load(c, i) => {
                let ri = self.lower(i, memo);
                let ci = self
                    .captures
                    .iter()
                    .position(|x| Arc::ptr_eq(x, c))
                    .expect("capture listed");
                (Op::Load(ci, ri), c.ty())
            }
            Expr::Unary(op, a) => {
                let ra = self.lower(a, memo);
                let ty = match op {
                    UnOp::Not => Ty::Bool,
                    UnOp::ToFloat => Ty::Float,
                    _ => self.tys[ra],
                };
                (Op::Un(*op, ra), ty)
            }
            Expr::Binary(op, a, b) => {
                let (ra, rb) = (self.lower(a, memo), self.lower(b, memo));
                use BinOp::*;
                let ty = match op {
                    Eq | Ne | Lt | Le | Gt | Ge | And | Or => Ty::Bool,
                    _ => self.tys[ra],
                };
                (Op::Bin(*op, ra, rb), ty)
            }
            Expr::Select(c, a, b) => {
                let (rc, ra, rb) = (
                    self.lower(c, memo),
                    self.lower(a, memo),
                    self.lower(b, memo),
                );
                (Op::Select(rc, ra, rb), self.tys[ra])
            }
        };
        if let Some(&r) = memo.get(&op) {
            return r;
        }
        self.ops.push(op.clone());
        self.tys.push(ty);
        memo.insert(op, self.ops.len() - 1);
        self.ops.len() - 1
    }

    /// Evaluates a Bool program over the tile: `out[r * cols + c]`.
    pub fn eval_mask<F: Real>(&self, t: &TileCtx, s: &mut Scratch<F>, out: &mut [bool]) {
        let n = t.rows * t.cols;
        self.run(t, s, None);
        out[..n].copy_from_slice(&s.bools[self.ops.len() - 1][..n]);
    }

    /// Applies a Float score program in place to `scores[r * cols + c]`.
    pub fn apply_score<F: Real>(&self, t: &TileCtx, s: &mut Scratch<F>, scores: &mut [F]) {
        let n = t.rows * t.cols;
        self.run(t, s, Some(&scores[..n]));
        scores[..n].copy_from_slice(&s.floats[self.ops.len() - 1][..n]);
    }

    fn run<F: Real>(&self, t: &TileCtx, s: &mut Scratch<F>, score: Option<&[F]>) {
        let n = t.rows * t.cols;
        let k = self.ops.len();
        s.ints.resize_with(k, Vec::new);
        s.floats.resize_with(k, Vec::new);
        s.bools.resize_with(k, Vec::new);
        for (i, op) in self.ops.iter().enumerate() {
            match self.tys[i] {
                Ty::Int => {
                    let mut dst = std::mem::take(&mut s.ints[i]);
                    dst.resize(n, 0);
                    self.int_op(op, t, s, &mut dst);
                    s.ints[i] = dst;
                }
                Ty::Float => {
                    let mut dst = std::mem::take(&mut s.floats[i]);
                    dst.resize(n, F::from_f64(0.0));
                    self.float_op(op, s, score, &mut dst);
                    s.floats[i] = dst;
                }
                Ty::Bool => {
                    let mut dst = std::mem::take(&mut s.bools[i]);
                    dst.resize(n, false);
                    self.bool_op(op, s, &mut dst);
                    s.bools[i] = dst;
                }
            }
        }
    }

    fn int_op<F: Real>(&self, op: &Op, t: &TileCtx, s: &Scratch<F>, dst: &mut [i64]) {
        let cols = t.cols;
        match op {
            Op::Var(v) => match v {
                Var::QPos | Var::QToken => {
                    let base = if *v == Var::QPos {
                        t.q_pos0
                    } else {
                        t.q_token0
                    };
                    for (r, row) in dst.chunks_mut(cols.max(1)).enumerate() {
                        row.fill(base + r as i64);
                    }
                }
                Var::KvPos => {
                    for row in dst.chunks_mut(cols.max(1)) {
                        for (c, x) in row.iter_mut().enumerate() {
                            *x = t.kv_pos0 + c as i64;
                        }
                    }
                }
                Var::Batch => dst.fill(t.batch),
                Var::Head => dst.fill(t.head),
                Var::QLen => dst.fill(t.q_len),
                Var::KvLen => dst.fill(t.kv_len),
                Var::Score => unreachable!("type-checked"),
            },
            Op::Int(v) => dst.fill(*v),
            Op::Load(c, i) => {
                if let CaptureData::Int(data) = &self.captures[*c].data {
                    for (d, &ix) in dst.iter_mut().zip(&s.ints[*i]) {
                        *d = if ix >= 0 && (ix as u64) < data.len() as u64 {
                            data[ix as usize]
                        } else {
                            0
                        };
                    }
                }
            }
            Op::Un(op, a) => {
                let a = &s.ints[*a];
                for (d, &x) in dst.iter_mut().zip(a) {
                    *d = match op {
                        UnOp::Neg => x.wrapping_neg(),
                        _ => x.wrapping_abs(),
                    };
                }
            }
            Op::Bin(op, a, b) => {
                let (a, b) = (&s.ints[*a], &s.ints[*b]);
                match op {
                    BinOp::Add => map2(dst, a, b, |x, y| x.wrapping_add(y)),
                    BinOp::Sub => map2(dst, a, b, |x, y| x.wrapping_sub(y)),
                    BinOp::Mul => map2(dst, a, b, |x, y| x.wrapping_mul(y)),
                    BinOp::Div => {
                        map2(dst, a, b, |x, y| if y == 0 { 0 } else { x.wrapping_div(y) })
                    }
                    BinOp::Rem => {
                        map2(dst, a, b, |x, y| if y == 0 { 0 } else { x.wrapping_rem(y) })
                    }
                    BinOp::Min => map2(dst, a, b, |x, y| x.min(y)),
                    BinOp::Max => map2(dst, a, b, |x, y| x.max(y)),
                    BinOp::BitAnd => map2(dst, a, b, |x, y| x & y),
                    BinOp::BitOr => map2(dst, a, b, |x, y| x | y),
                    BinOp::Shl => map2(
                        dst,
                        a,
                        b,
                        |x, y| if (0..64).contains(&y) { x << y } else { 0 },
                    ),
                    BinOp::Shr => map2(
                        dst,
                        a,
                        b,
                        |x, y| if (0..64).contains(&y) { x >> y } else { 0 },
                    ),
                    _ => unreachable!("type-checked"),
                }
            }
            Op::Select(c, a, b) => {
                let (c, a, b) = (&s.bools[*c], &s.ints[*a], &s.ints[*b]);
                for i in 0..dst.len() {
                    dst[i] = if c[i] { a[i] } else { b[i] };
                }
            }
            Op::Float(_) | Op::Bool(_) => unreachable!("type-checked"),
        }
    }

    fn float_op<F: Real>(&self, op: &Op, s: &Scratch<F>, score: Option<&[F]>, dst: &mut [F]) {
        match op {
            Op::Var(_) => dst.copy_from_slice(score.expect("score program given scores")),
            Op::Float(bits) => dst.fill(F::from_f64(f64::from_bits(*bits))),
            Op::Load(c, i) => {
                if let CaptureData::Float(data) = &self.captures[*c].data {
                    for (d, &ix) in dst.iter_mut().zip(&s.ints[*i]) {
                        let v = if ix >= 0 && (ix as u64) < data.len() as u64 {
                            data[ix as usize]
                        } else {
                            0.0
                        };
                        *d = F::from_f64(v as f64);
                    }
                }
            }
            Op::Un(UnOp::ToFloat, a) => {
                for (d, &x) in dst.iter_mut().zip(&s.ints[*a]) {
                    *d = F::from_i64(x);
                }
            }
            Op::Un(op, a) => {
                let a = &s.floats[*a];
                match op {
                    UnOp::Neg => map1(dst, a, F::neg),
                    UnOp::Abs => map1(dst, a, F::abs),
                    UnOp::Tanh => map1(dst, a, F::tanh),
                    UnOp::Exp => map1(dst, a, F::exp),
                    UnOp::Log => map1(dst, a, F::ln),
                    UnOp::Sqrt => map1(dst, a, F::sqrt),
                    _ => unreachable!("type-checked"),
                }
            }
            Op::Bin(op, a, b) => {
                let (a, b) = (&s.floats[*a], &s.floats[*b]);
                match op {
                    BinOp::Add => map2(dst, a, b, F::add),
                    BinOp::Sub => map2(dst, a, b, F::sub),
                    BinOp::Mul => map2(dst, a, b, F::mul),
                    BinOp::Div => map2(dst, a, b, F::div),
                    BinOp::Min => map2(dst, a, b, F::min),
                    BinOp::Max => map2(dst, a, b, F::max),
                    _ => unreachable!("type-checked"),
                }
            }
            Op::Select(c, a, b) => {
                let (c, a, b) = (&s.bools[*c], &s.floats[*a], &s.floats[*b]);
                for i in 0..dst.len() {
                    dst[i] = if c[i] { a[i] } else { b[i] };
                }
            }
            Op::Int(_) | Op::Bool(_) => unreachable!("type-checked"),
        }
    }

    fn bool_op<F: Real>(&self, op: &Op, s: &Scratch<F>, dst: &mut [bool]) {
        match op {
            Op::Bool(v) => dst.fill(*v),
            Op::Un(UnOp::Not, a) => {
                for (d, &x) in dst.iter_mut().zip(&s.bools[*a]) {
                    *d = !x;
                }
            }
            Op::Bin(op, a, b) => match (self.tys[*a], op) {
                (Ty::Bool, _) => {
                    let (a, b) = (&s.bools[*a], &s.bools[*b]);
                    match op {
                        BinOp::And => map2(dst, a, b, |x, y| x & y),
                        BinOp::Or => map2(dst, a, b, |x, y| x | y),
                        BinOp::Eq => map2(dst, a, b, |x, y| x == y),
                        _ => map2(dst, a, b, |x, y| x != y),
                    }
                }
                (Ty::Int, _) => cmp(dst, &s.ints[*a], &s.ints[*b], *op),
                (Ty::Float, _) => cmp(dst, &s.floats[*a], &s.floats[*b], *op),
            },
            Op::Select(c, a, b) => {
                let (c, a, b) = (&s.bools[*c], &s.bools[*a], &s.bools[*b]);
                for i in 0..dst.len() {
                    dst[i] = if c[i] { a[i] } else { b[i] };
                }
            }
            _ => unreachable!("type-checked"),
        }
    }
}

#[cfg(test)]
#[test]
fn fast_f32_tanh_matches_f64() {
    for i in -40000..=40000 {
        let x = i as f32 * 1e-3;
        let want = (x as f64).tanh();
        let got = tanh_f32(x) as f64;
        assert!(
            (got - want).abs() <= 4e-7 * want.abs().max(1e-3),
            "{x}: {got} vs {want}"
        );
    }
    assert!(tanh_f32(f32::NAN).is_nan());
    assert_eq!(tanh_f32(f32::INFINITY), 1.0);
    assert_eq!(tanh_f32(-1e30), -1.0);
    assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
}

fn cmp<T: PartialOrd + Copy>(dst: &mut [bool], a: &[T], b: &[T], op: BinOp) {
    match op {
        BinOp::Eq => map2(dst, a, b, |x, y| x == y),
        BinOp::Ne => map2(dst, a, b, |x, y| x != y),
        BinOp::Lt => map2(dst, a, b, |x, y| x < y),
        BinOp::Le => map2(dst, a, b, |x, y| x <= y),
        BinOp::Gt => map2(dst, a, b, |x, y| x > y),
        _ => map2(dst, a, b, |x, y| x >= y),
    }
}

// Each instruction's loop is instantiated per operation (no call through a function pointer
// per element), so the compiler inlines and vectorizes it.
#[inline(always)]
fn map1<T: Copy, R>(dst: &mut [R], a: &[T], f: impl Fn(T) -> R) {
    for (d, &x) in dst.iter_mut().zip(a) {
        *d = f(x);
    }
}

#[inline(always)]
fn map2<T: Copy, U: Copy, R>(dst: &mut [R], a: &[T], b: &[U], f: impl Fn(T, U) -> R) {
    for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
        *d = f(x, y);
    }
}
