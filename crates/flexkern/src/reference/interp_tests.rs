//! The oracle's interpreter against the documented semantics, and against the kernels' register
//! program on random expression trees (differential: the two evaluators share no code).

use super::{Interp, Point};
use crate::variant::expr::*;
use crate::variant::program::{Program, Scratch, TileCtx};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;

fn at(q_pos: i64, kv_pos: i64) -> Point {
    Point {
        q_pos,
        kv_pos,
        q_len: 10,
        kv_len: 20,
        ..Point::default()
    }
}

fn int_of(e: Expr) -> i64 {
    Interp::new(&e, Ty::Int).unwrap().int(&at(3, 5))
}

#[test]
fn integer_semantics_are_the_documented_ones() {
    assert_eq!(int_of(int(7) / int(0)), 0);
    assert_eq!(int_of(int(7) % int(0)), 0);
    assert_eq!(int_of(int(-7) / int(2)), -3, "truncating division");
    assert_eq!(
        int_of(int(-7) % int(2)),
        -1,
        "remainder takes the dividend's sign"
    );
    assert_eq!(int_of(int(7) % int(-2)), 1);
    assert_eq!(int_of(int(i64::MIN) / int(-1)), i64::MIN, "wraps");
    assert_eq!(int_of(int(i64::MIN) % int(-1)), 0);
    assert_eq!(int_of(int(i64::MAX) + 1), i64::MIN);
    assert_eq!(int_of(-int(i64::MIN)), i64::MIN);
    assert_eq!(int_of(int(i64::MIN).abs()), i64::MIN);
    assert_eq!(int_of(int(1) << int(63)), i64::MIN);
    assert_eq!(int_of(int(1) << int(64)), 0);
    assert_eq!(int_of(int(1) << int(-1)), 0);
    assert_eq!(int_of(int(-8) >> int(1)), -4, "arithmetic shift");
    assert_eq!(int_of(int(-8) >> int(64)), 0);
    let t = Tensor::int("t", vec![10, 20, 30]);
    assert_eq!(int_of(t.at(int(2))), 30);
    assert_eq!(int_of(t.at(int(3))), 0, "outside the capture reads 0");
    assert_eq!(int_of(t.at(int(-1))), 0);
    assert_eq!(int_of(t.at(int(i64::MIN))), 0);
    assert_eq!(int_of(select(q_pos().lt(kv_pos()), q_pos(), kv_pos())), 3);
}

#[test]
fn float_semantics_are_the_documented_ones() {
    let f = |e: Expr, s: f64| {
        let p = Point {
            score: s,
            ..at(3, 5)
        };
        Interp::new(&e, Ty::Float).unwrap().score(&p)
    };
    let b = |e: Expr| Interp::new(&e, Ty::Bool).unwrap().mask(&at(3, 5));
    assert_eq!(f(score().min(float(f64::NAN)), 2.0), 2.0, "minNum");
    assert_eq!(f(float(f64::NAN).max(score()), 2.0), 2.0, "maxNum");
    assert!(f(score() + 1.0, f64::NAN).is_nan());
    assert!(f(score().log(), -1.0).is_nan());
    assert_eq!(f(float(1.0) / score(), 0.0), f64::INFINITY);
    assert_eq!(f(int(i64::MAX).to_float(), 0.0), 9.223_372_036_854_776e18);
    let t = Tensor::float("t", vec![0.1]);
    assert_eq!(
        f(t.at(int(0)), 0.0),
        0.1f32 as f64,
        "captures widen exactly"
    );
    let nan = || float(f64::NAN);
    assert!(!b(nan().eq(nan())) && b(nan().ne(nan())));
    assert!(!b(nan().lt(float(1.0))) && !b(nan().ge(float(1.0))));
    assert!(b(kv_pos().gt(q_pos()).and(boolean(true).eq(boolean(true)))));
}

#[test]
fn ill_typed_expressions_are_errors() {
    assert!(Interp::new(&(q_pos() + float(1.0)), Ty::Int).is_err());
    assert!(Interp::new(&q_pos(), Ty::Bool).is_err());
    assert!(Interp::new(&score().not(), Ty::Bool).is_err());
}

/// Random well-typed trees over every op of the IR, with edge-case constants.
struct Gen {
    rng: StdRng,
    ints: Tensor,
    floats: Tensor,
    /// Which ops and leaves were produced (the coverage check).
    seen: HashSet<String>,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut rng = StdRng::seed_from_u64(seed);
        let ints = (0..37)
            .map(|i| match i % 9 {
                0 => i64::MIN,
                1 => i64::MAX,
                2 => -1,
                _ => rng.gen_range(-300..300),
            })
            .collect();
        let floats = (0..29)
            .map(|i| match i % 10 {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => -0.0,
                3 => f32::MAX,
                _ => rng.gen_range(-4.0..4.0),
            })
            .collect();
        Gen {
            rng,
            ints: Tensor::int("ids", ints),
            floats: Tensor::float("bias", floats),
            seen: HashSet::new(),
        }
    }

    fn mark(&mut self, what: impl std::fmt::Debug) {
        self.seen.insert(format!("{what:?}"));
    }

    fn expr(&mut self, ty: Ty, depth: u32) -> Expr {
        if depth == 0 || self.rng.gen_bool(0.2) {
            return self.leaf(ty);
        }
        let d = depth - 1;
        match ty {
            Ty::Int => match self.rng.gen_range(0..10) {
                0 => {
                    let op = [UnOp::Neg, UnOp::Abs][self.rng.gen_range(0..2)];
                    self.mark(op);
                    Expr::Unary(op, Box::new(self.expr(Ty::Int, d)))
                }
                1 => self.select(Ty::Int, d),
                2 => {
                    self.mark("load int");
                    let i = self.index(d);
                    self.ints.at(i)
                }
                _ => {
                    use BinOp::*;
                    let ops = [Add, Sub, Mul, Div, Rem, Min, Max, BitAnd, BitOr, Shl, Shr];
                    let op = ops[self.rng.gen_range(0..ops.len())];
                    self.binary(op, Ty::Int, d)
                }
            },
            Ty::Float => match self.rng.gen_range(0..10) {
                0 | 1 => {
                    use UnOp::*;
                    let op = [Neg, Abs, Tanh, Exp, Log, Sqrt][self.rng.gen_range(0..6)];
                    self.mark(op);
                    Expr::Unary(op, Box::new(self.expr(Ty::Float, d)))
                }
                2 => {
                    self.mark(UnOp::ToFloat);
                    self.expr(Ty::Int, d).to_float()
                }
                3 => self.select(Ty::Float, d),
                4 => {
                    self.mark("load float");
                    let i = self.index(d);
                    self.floats.at(i)
                }
                _ => {
                    use BinOp::*;
                    let op = [Add, Sub, Mul, Div, Min, Max][self.rng.gen_range(0..6)];
                    self.binary(op, Ty::Float, d)
                }
            },
            Ty::Bool => match self.rng.gen_range(0..8) {
                0 => {
                    self.mark(UnOp::Not);
                    self.expr(Ty::Bool, d).not()
                }
                1 => self.select(Ty::Bool, d),
                2 | 3 => {
                    let op =
                        [BinOp::And, BinOp::Or, BinOp::Eq, BinOp::Ne][self.rng.gen_range(0..4)];
                    self.binary(op, Ty::Bool, d)
                }
                _ => {
                    use BinOp::*;
                    let op = [Eq, Ne, Lt, Le, Gt, Ge][self.rng.gen_range(0..6)];
                    let t = if self.rng.gen_bool(0.6) {
                        Ty::Int
                    } else {
                        Ty::Float
                    };
                    self.mark((op, t));
                    Expr::Binary(op, Box::new(self.expr(t, d)), Box::new(self.expr(t, d)))
                }
            },
        }
    }

    fn binary(&mut self, op: BinOp, ty: Ty, d: u32) -> Expr {
        self.mark((op, ty));
        Expr::Binary(op, Box::new(self.expr(ty, d)), Box::new(self.expr(ty, d)))
    }

    fn select(&mut self, ty: Ty, d: u32) -> Expr {
        self.mark(("select", ty));
        select(self.expr(Ty::Bool, d), self.expr(ty, d), self.expr(ty, d))
    }

    /// Mostly small indexes (in and just outside the captures), sometimes any int tree.
    fn index(&mut self, d: u32) -> Expr {
        if self.rng.gen_bool(0.7) {
            let v = [q_pos(), kv_pos(), h(), b(), q_token()][self.rng.gen_range(0..5)].clone();
            v % int(self.rng.gen_range(1..45)) - int(self.rng.gen_range(0..3))
        } else {
            self.expr(Ty::Int, d)
        }
    }

    fn leaf(&mut self, ty: Ty) -> Expr {
        match ty {
            Ty::Int => {
                if self.rng.gen_bool(0.5) {
                    use Var::*;
                    let v =
                        [Batch, Head, QPos, KvPos, QLen, KvLen, QToken][self.rng.gen_range(0..7)];
                    self.mark(v);
                    Expr::Var(v)
                } else {
                    let edge = [
                        0,
                        1,
                        -1,
                        2,
                        3,
                        7,
                        31,
                        32,
                        63,
                        64,
                        65,
                        -64,
                        i64::MIN,
                        i64::MAX,
                    ];
                    int(match self.rng.gen_range(0..3) {
                        0 => edge[self.rng.gen_range(0..edge.len())],
                        1 => self.rng.gen_range(-100..100),
                        _ => self.rng.gen(),
                    })
                }
            }
            Ty::Float => {
                if self.rng.gen_bool(0.5) {
                    self.mark(Var::Score);
                    score()
                } else {
                    let edge = [
                        0.0,
                        -0.0,
                        1.0,
                        -1.5,
                        0.5,
                        1e300,
                        -1e-300,
                        f64::INFINITY,
                        f64::NEG_INFINITY,
                        f64::NAN,
                    ];
                    float(if self.rng.gen_bool(0.5) {
                        edge[self.rng.gen_range(0..edge.len())]
                    } else {
                        self.rng.gen_range(-10.0..10.0)
                    })
                }
            }
            Ty::Bool => boolean(self.rng.gen()),
        }
    }

    fn tile(&mut self) -> TileCtx {
        let r = &mut self.rng;
        TileCtx {
            batch: r.gen_range(0..4),
            head: r.gen_range(0..8),
            q_len: r.gen_range(0..300),
            kv_len: r.gen_range(0..300),
            q_pos0: r.gen_range(-40..200),
            q_token0: r.gen_range(0..200),
            rows: r.gen_range(1..5),
            kv_pos0: r.gen_range(0..200),
            cols: r.gen_range(1..9),
        }
    }
}

fn point(t: &TileCtx, r: usize, c: usize, score: f64) -> Point {
    Point {
        score,
        batch: t.batch,
        head: t.head,
        q_pos: t.q_pos0 + r as i64,
        kv_pos: t.kv_pos0 + c as i64,
        q_len: t.q_len,
        kv_len: t.kv_len,
        q_token: t.q_token0 + r as i64,
    }
}

/// Equal, both NaN, or within rounding (the evaluators use the same f64 operations, so in
/// practice they agree bit for bit).
fn same_float(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Runs the program of `e` (type `ty`) in f64 over `t` and checks every element against the
/// interpreter. Int trees are read through two exact Float programs (high and low 32 bits).
fn check(e: &Expr, ty: Ty, t: &TileCtx, scores: &[f64]) {
    let n = t.rows * t.cols;
    let elems = (0..t.rows).flat_map(|r| (0..t.cols).map(move |c| (r, c)));
    let mut s = Scratch::<f64>::default();
    match ty {
        Ty::Bool => {
            let it = Interp::new(e, ty).unwrap();
            let want: Vec<bool> = elems
                .map(|(r, c)| it.mask(&point(t, r, c, scores[r * t.cols + c])))
                .collect();
            // As a mask (which cannot read `score`) and as the condition of a score program.
            if !e.uses(Var::Score) {
                let mut got = vec![false; n];
                Program::compile(e, ty)
                    .unwrap()
                    .eval_mask(t, &mut s, &mut got);
                assert_eq!(got, want, "`{e}` over {t:?}");
            }
            let sel = select(e.clone(), float(1.0), float(0.0));
            let mut got = scores[..n].to_vec();
            Program::compile(&sel, Ty::Float)
                .unwrap()
                .apply_score(t, &mut s, &mut got);
            let got: Vec<bool> = got.iter().map(|&x| x == 1.0).collect();
            assert_eq!(got, want, "`{e}` over {t:?} with scores {scores:?}");
        }
        Ty::Float => {
            let (prog, it) = (
                Program::compile(e, ty).unwrap(),
                Interp::new(e, ty).unwrap(),
            );
            let mut got = scores[..n].to_vec();
            prog.apply_score(t, &mut s, &mut got);
            for (i, (r, c)) in elems.enumerate() {
                let want = it.score(&point(t, r, c, scores[i]));
                assert!(
                    same_float(got[i], want),
                    "`{e}` at ({r}, {c}) of {t:?} (score {}): program {}, interpreter {want}",
                    scores[i],
                    got[i]
                );
            }
        }
        Ty::Int => {
            let it = Interp::new(e, ty).unwrap();
            let hi = (e.clone() >> int(32)).to_float();
            let lo = (e.clone() & int(0xffff_ffff)).to_float();
            let (ph, pl) = (
                Program::compile(&hi, Ty::Float).unwrap(),
                Program::compile(&lo, Ty::Float).unwrap(),
            );
            let (mut gh, mut gl) = (scores[..n].to_vec(), scores[..n].to_vec());
            ph.apply_score(t, &mut s, &mut gh);
            pl.apply_score(t, &mut s, &mut gl);
            for (i, (r, c)) in elems.enumerate() {
                let v = it.int(&point(t, r, c, scores[i]));
                let want = ((v >> 32) as f64, (v & 0xffff_ffff) as f64);
                assert_eq!((gh[i], gl[i]), want, "`{e}` = {v} at ({r}, {c}) of {t:?}");
            }
        }
    }
}

#[test]
fn interpreter_and_program_agree_on_random_trees() {
    let mut g = Gen::new(12);
    for round in 0..6000 {
        let ty = [Ty::Bool, Ty::Float, Ty::Int][round % 3];
        let depth = g.rng.gen_range(1..7);
        let e = g.expr(ty, depth);
        let t = g.tile();
        let scores: Vec<f64> = (0..t.rows * t.cols)
            .map(|i| match i % 11 {
                0 => f64::NAN,
                1 => f64::NEG_INFINITY,
                _ => g.rng.gen_range(-20.0..20.0),
            })
            .collect();
        check(&e, ty, &t, &scores);
    }
    // Every op, variable and select type was drawn: the comparison covers the whole IR.
    let mut want: Vec<String> = Vec::new();
    for v in [
        Var::Score,
        Var::Batch,
        Var::Head,
        Var::QPos,
        Var::KvPos,
        Var::QLen,
        Var::KvLen,
        Var::QToken,
    ] {
        want.push(format!("{v:?}"));
    }
    use UnOp::*;
    for op in [Neg, Abs, Not, Tanh, Exp, Log, Sqrt, ToFloat] {
        want.push(format!("{op:?}"));
    }
    use BinOp::*;
    let int_ops = [
        Add, Sub, Mul, Div, Rem, Min, Max, BitAnd, BitOr, Shl, Shr, Eq, Ne, Lt, Le, Gt, Ge,
    ];
    for op in int_ops {
        want.push(format!("{:?}", (op, Ty::Int)));
    }
    for op in [Add, Sub, Mul, Div, Min, Max, Eq, Ne, Lt, Le, Gt, Ge] {
        want.push(format!("{:?}", (op, Ty::Float)));
    }
    for op in [And, Or, Eq, Ne] {
        want.push(format!("{:?}", (op, Ty::Bool)));
    }
    for t in [Ty::Int, Ty::Float, Ty::Bool] {
        want.push(format!("{:?}", ("select", t)));
    }
    want.push(format!("{:?}", "load int"));
    want.push(format!("{:?}", "load float"));
    let missing: Vec<&String> = want.iter().filter(|w| !g.seen.contains(*w)).collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
}
