//! Interval analysis of the IR over a box of (b, h, q_pos, kv_pos) ranges.
//!
//! It classifies a BlockMask tile as all-true / all-false / unknown without touching its
//! elements (causal, windows, chunks, prefix-LM resolve exactly; unknown tiles are then
//! evaluated exactly), and proves that every capture index stays in bounds.

use super::expr::{BinOp, CaptureData, Expr, UnOp, Var};

/// Ranges of the free variables (inclusive bounds).
#[derive(Clone, Copy, Debug)]
pub struct Domain {
    pub batch: (i64, i64),
    pub head: (i64, i64),
    pub q_pos: (i64, i64),
    pub kv_pos: (i64, i64),
    pub q_len: (i64, i64),
    pub kv_len: (i64, i64),
    pub q_token: (i64, i64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tri {
    False,
    True,
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum AVal {
    Int(i64, i64),
    Float(f64, f64),
    Bool(Tri),
}

const FULL_INT: AVal = AVal::Int(i64::MIN, i64::MAX);

/// Exact min/max of a capture over an index range is computed when the range is at most this long.
const SCAN_LIMIT: i64 = 1 << 14;

/// A capture index that may fall outside its tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfBounds {
    pub capture: String,
    pub len: usize,
    pub index: (i64, i64),
}

/// Evaluates a Bool expression over the domain.
pub fn classify(e: &Expr, d: &Domain) -> Tri {
    match eval(e, d, &mut Vec::new()) {
        AVal::Bool(t) => t,
        _ => Tri::Unknown,
    }
}

/// Every capture load whose index range is not provably inside the capture.
pub fn check_bounds(e: &Expr, d: &Domain) -> Vec<OutOfBounds> {
    let mut oob = Vec::new();
    eval(e, d, &mut oob);
    oob
}

fn eval(e: &Expr, d: &Domain, oob: &mut Vec<OutOfBounds>) -> AVal {
    match e {
        Expr::Var(v) => {
            let r = match v {
                Var::Batch => d.batch,
                Var::Head => d.head,
                Var::QPos => d.q_pos,
                Var::KvPos => d.kv_pos,
                Var::QLen => d.q_len,
                Var::KvLen => d.kv_len,
                Var::QToken => d.q_token,
                Var::Score => return AVal::Float(f64::NEG_INFINITY, f64::INFINITY),
            };
            AVal::Int(r.0, r.1)
        }
        Expr::Int(v) => AVal::Int(*v, *v),
        Expr::Float(v) => AVal::Float(*v, *v),
        Expr::Bool(v) => AVal::Bool(if *v { Tri::True } else { Tri::False }),
        Expr::Load(c, i) => {
            let AVal::Int(lo, hi) = eval(i, d, oob) else {
                return FULL_INT;
            };
            let len = c.len() as i64;
            if lo < 0 || hi >= len {
                oob.push(OutOfBounds {
                    capture: c.name.clone(),
                    len: c.len(),
                    index: (lo, hi),
                });
            }
            let (lo, hi) = (lo.max(0), hi.min(len - 1));
            if lo > hi {
                return match c.data {
                    CaptureData::Int(_) => AVal::Int(0, 0),
                    CaptureData::Float(_) => AVal::Float(0.0, 0.0),
                };
            }
            let (lo, hi) = if hi - lo < SCAN_LIMIT {
                (lo as usize, hi as usize)
            } else {
                (0, len as usize - 1)
            };
            match &c.data {
                CaptureData::Int(v) => {
                    let s = &v[lo..=hi];
                    AVal::Int(*s.iter().min().unwrap(), *s.iter().max().unwrap())
                }
                CaptureData::Float(v) => {
                    let s = &v[lo..=hi];
                    if s.iter().any(|x| x.is_nan()) {
                        return AVal::Float(f64::NEG_INFINITY, f64::INFINITY);
                    }
                    let mn = s.iter().fold(f32::INFINITY, |a, &b| a.min(b));
                    let mx = s.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                    AVal::Float(mn as f64, mx as f64)
                }
            }
        }
        Expr::Unary(op, a) => {
            let a = eval(a, d, oob);
            match (op, a) {
                (UnOp::Not, AVal::Bool(t)) => AVal::Bool(match t {
                    Tri::True => Tri::False,
                    Tri::False => Tri::True,
                    Tri::Unknown => Tri::Unknown,
                }),
                (UnOp::Neg, AVal::Int(l, h)) => match (h.checked_neg(), l.checked_neg()) {
                    (Some(a), Some(b)) => AVal::Int(a, b),
                    _ => FULL_INT,
                },
                (UnOp::Abs, AVal::Int(l, h)) => match (l.checked_abs(), h.checked_abs()) {
                    (Some(la), Some(ha)) if l >= 0 => AVal::Int(la, ha),
                    (Some(la), Some(ha)) if h <= 0 => AVal::Int(ha, la),
                    (Some(la), Some(ha)) => AVal::Int(0, la.max(ha)),
                    _ => FULL_INT,
                },
                (UnOp::ToFloat, AVal::Int(l, h)) => AVal::Float(l as f64, h as f64),
                (UnOp::Neg, AVal::Float(l, h)) => AVal::Float(-h, -l),
                (UnOp::Tanh, AVal::Float(l, h)) => AVal::Float(l.tanh(), h.tanh()),
                (UnOp::Exp, AVal::Float(l, h)) => AVal::Float(l.exp(), h.exp()),
                _ => unknown_like(&a),
            }
        }
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval(a, d, oob), eval(b, d, oob));
            binary(*op, a, b)
        }
        Expr::Select(c, a, b) => {
            let (c, a, b) = (eval(c, d, oob), eval(a, d, oob), eval(b, d, oob));
            match c {
                AVal::Bool(Tri::True) => a,
                AVal::Bool(Tri::False) => b,
                _ => union(a, b),
            }
        }
    }
}

fn unknown_like(a: &AVal) -> AVal {
    match a {
        AVal::Int(..) => FULL_INT,
        AVal::Float(..) => AVal::Float(f64::NEG_INFINITY, f64::INFINITY),
        AVal::Bool(_) => AVal::Bool(Tri::Unknown),
    }
}

fn union(a: AVal, b: AVal) -> AVal {
    match (a, b) {
        (AVal::Int(a0, a1), AVal::Int(b0, b1)) => AVal::Int(a0.min(b0), a1.max(b1)),
        (AVal::Float(a0, a1), AVal::Float(b0, b1)) => AVal::Float(a0.min(b0), a1.max(b1)),
        (AVal::Bool(x), AVal::Bool(y)) if x == y => AVal::Bool(x),
        (x, _) => unknown_like(&x),
    }
}

fn tri(always: bool, never: bool) -> AVal {
    AVal::Bool(if always {
        Tri::True
    } else if never {
        Tri::False
    } else {
        Tri::Unknown
    })
}

fn binary(op: BinOp, a: AVal, b: AVal) -> AVal {
    use BinOp::*;
    match (a, b) {
        (AVal::Bool(x), AVal::Bool(y)) => AVal::Bool(match op {
            And => match (x, y) {
                (Tri::False, _) | (_, Tri::False) => Tri::False,
                (Tri::True, Tri::True) => Tri::True,
                _ => Tri::Unknown,
            },
            Or => match (x, y) {
                (Tri::True, _) | (_, Tri::True) => Tri::True,
                (Tri::False, Tri::False) => Tri::False,
                _ => Tri::Unknown,
            },
            Eq | Ne if x != Tri::Unknown && y != Tri::Unknown => {
                if (x == y) == (op == Eq) {
                    Tri::True
                } else {
                    Tri::False
                }
            }
            _ => Tri::Unknown,
        }),
        (AVal::Int(a0, a1), AVal::Int(b0, b1)) => match op {
            Add => match (a0.checked_add(b0), a1.checked_add(b1)) {
                (Some(l), Some(h)) => AVal::Int(l, h),
                _ => FULL_INT,
            },
            Sub => match (a0.checked_sub(b1), a1.checked_sub(b0)) {
                (Some(l), Some(h)) => AVal::Int(l, h),
                _ => FULL_INT,
            },
            Mul => {
                let ps = [
                    a0.checked_mul(b0),
                    a0.checked_mul(b1),
                    a1.checked_mul(b0),
                    a1.checked_mul(b1),
                ];
                if ps.iter().all(|p| p.is_some()) {
                    let ps = ps.map(|p| p.unwrap());
                    AVal::Int(*ps.iter().min().unwrap(), *ps.iter().max().unwrap())
                } else {
                    FULL_INT
                }
            }
            // Truncating division by a positive constant is monotone.
            Div if b0 == b1 && b0 > 0 => AVal::Int(a0 / b0, a1 / b0),
            Rem if b0 == b1 && b0 > 0 => {
                if a0 >= 0 && a0 / b0 == a1 / b0 {
                    AVal::Int(a0 % b0, a1 % b0)
                } else if a0 >= 0 {
                    AVal::Int(0, b0 - 1)
                } else {
                    AVal::Int(-(b0 - 1), b0 - 1)
                }
            }
            Min => AVal::Int(a0.min(b0), a1.min(b1)),
            Max => AVal::Int(a0.max(b0), a1.max(b1)),
            Eq => tri(a0 == a1 && b0 == b1 && a0 == b0, a1 < b0 || b1 < a0),
            Ne => tri(a1 < b0 || b1 < a0, a0 == a1 && b0 == b1 && a0 == b0),
            Lt => tri(a1 < b0, a0 >= b1),
            Le => tri(a1 <= b0, a0 > b1),
            Gt => tri(a0 > b1, a1 <= b0),
            Ge => tri(a0 >= b1, a1 < b0),
            BitAnd if a0 >= 0 && b0 >= 0 => AVal::Int(0, a1.min(b1)),
            Shr if a0 >= 0 && b0 >= 0 => AVal::Int(
                if b1 >= 64 { 0 } else { a0 >> b1 },
                if b0 >= 64 { 0 } else { a1 >> b0 },
            ),
            _ if a0 == a1 && b0 == b1 => {
                // Both singletons: compute exactly with the program's semantics.
                let v = match op {
                    Div => {
                        if b0 == 0 {
                            0
                        } else {
                            a0.wrapping_div(b0)
                        }
                    }
                    Rem => {
                        if b0 == 0 {
                            0
                        } else {
                            a0.wrapping_rem(b0)
                        }
                    }
                    BitAnd => a0 & b0,
                    BitOr => a0 | b0,
                    Shl => {
                        if (0..64).contains(&b0) {
                            a0 << b0
                        } else {
                            0
                        }
                    }
                    Shr => {
                        if (0..64).contains(&b0) {
                            a0 >> b0
                        } else {
                            0
                        }
                    }
                    _ => return FULL_INT,
                };
                AVal::Int(v, v)
            }
            _ => FULL_INT,
        },
        (AVal::Float(a0, a1), AVal::Float(b0, b1)) => match op {
            Add => AVal::Float(a0 + b0, a1 + b1),
            Sub => AVal::Float(a0 - b1, a1 - b0),
            Lt => tri(a1 < b0, a0 >= b1),
            Le => tri(a1 <= b0, a0 > b1),
            Gt => tri(a0 > b1, a1 <= b0),
            Ge => tri(a0 >= b1, a1 < b0),
            Min => AVal::Float(a0.min(b0), a1.min(b1)),
            Max => AVal::Float(a0.max(b0), a1.max(b1)),
            Eq | Ne => AVal::Bool(Tri::Unknown),
            _ => AVal::Float(f64::NEG_INFINITY, f64::INFINITY),
        },
        (x, _) => match op {
            Eq | Ne | Lt | Le | Gt | Ge | And | Or => AVal::Bool(Tri::Unknown),
            _ => unknown_like(&x),
        },
    }
}
