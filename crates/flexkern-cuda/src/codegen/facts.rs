//! What the code generator knows about each value of a lowered program before emitting it:
//! whether it is the same for every element of a launch (built from lifted constants alone), and
//! the range an integer value stays in while every hook variable is below [`SMALL_VARS`].
//!
//! Both pick cheaper instructions with the CPU's results: a division by an invariant becomes a
//! multiplication by its reciprocal, computed once; an integer proven within +-2^22 converts to
//! float on the full-rate pipes (`fk_i2f_small`) instead of the quarter-rate `I2F.S64` that
//! competes with the softmax's exponentials; one proven within 32 bits is held in an int.

use flexkern::expr::{BinOp, Ty, UnOp, Var};
use flexkern::variant::lowered::{Lowered, LoweredOp};

/// Every hook variable (batch, head, positions, lengths, token index) of an element a kernel
/// keeps, and every lifted integer constant, is below this in magnitude when the host sets
/// `FK_SMALL_VARS` (`attention::kernel::small_vars`, `prepare_with`).
pub const SMALL_VARS: i64 = 1 << 21;
/// `fk_i2f_small` is exact on `[-I2F_SMALL, I2F_SMALL)`.
pub const I2F_SMALL: i64 = 1 << 22;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fact {
    /// Built from constants and lifted parameters only: one value for the whole launch.
    pub invariant: bool,
    /// Inclusive bounds of an integer value under `FK_SMALL_VARS` (None: unknown or not an int).
    pub range: Option<(i128, i128)>,
}

/// One fact per instruction of `l`.
pub fn facts(l: &Lowered) -> Vec<Fact> {
    let insts = l.insts();
    let mut out: Vec<Fact> = Vec::with_capacity(insts.len());
    for inst in insts {
        let f = |r: usize| out[r];
        let fact = match inst.op {
            LoweredOp::Var(v) => Fact {
                invariant: false,
                range: match v {
                    Var::Score => None,
                    // Negative where a query is longer than its keys (`SeqLens::q_pos0`).
                    Var::QPos => Some((1 - SMALL_VARS as i128, SMALL_VARS as i128 - 1)),
                    _ => Some((0, SMALL_VARS as i128 - 1)),
                },
            },
            // A window's size, a chunk's length: small too, or the host sets no FK_SMALL_VARS
            // (so `q_pos - window` is compared in 32 bits at a window's edge tiles).
            LoweredOp::IntParam(_) => Fact {
                invariant: true,
                range: Some((1 - SMALL_VARS as i128, SMALL_VARS as i128 - 1)),
            },
            LoweredOp::FloatParam(_) | LoweredOp::Bool(_) => Fact {
                invariant: true,
                range: None,
            },
            LoweredOp::Load { index, .. } => Fact {
                invariant: f(index).invariant,
                range: None,
            },
            LoweredOp::Unary(op, a) => Fact {
                invariant: f(a).invariant,
                range: (inst.ty == Ty::Int)
                    .then(|| unary(op, f(a).range))
                    .flatten(),
            },
            LoweredOp::Binary(op, a, b) => Fact {
                invariant: f(a).invariant && f(b).invariant,
                range: (inst.ty == Ty::Int)
                    .then(|| binary(op, f(a).range, f(b).range))
                    .flatten(),
            },
            LoweredOp::Select(c, a, b) => Fact {
                invariant: f(c).invariant && f(a).invariant && f(b).invariant,
                range: match (f(a).range, f(b).range) {
                    (Some((a0, a1)), Some((b0, b1))) => Some((a0.min(b0), a1.max(b1))),
                    _ => None,
                },
            },
        };
        out.push(fact);
    }
    out
}

/// A range that still fits i64 (where the wrapping arithmetic cannot have wrapped).
fn fit(lo: i128, hi: i128) -> Option<(i128, i128)> {
    (lo >= i64::MIN as i128 && hi <= i64::MAX as i128).then_some((lo, hi))
}

fn unary(op: UnOp, a: Option<(i128, i128)>) -> Option<(i128, i128)> {
    let (a0, a1) = a?;
    match op {
        UnOp::Neg => fit(-a1, -a0),
        UnOp::Abs if a0 >= 0 => Some((a0, a1)),
        UnOp::Abs if a1 <= 0 => fit(-a1, -a0),
        UnOp::Abs => fit(0, (-a0).max(a1)),
        _ => None,
    }
}

fn binary(op: BinOp, a: Option<(i128, i128)>, b: Option<(i128, i128)>) -> Option<(i128, i128)> {
    let ((a0, a1), (b0, b1)) = (a?, b?);
    match op {
        BinOp::Add => fit(a0 + b0, a1 + b1),
        BinOp::Sub => fit(a0 - b1, a1 - b0),
        BinOp::Mul => {
            let p = [a0 * b0, a0 * b1, a1 * b0, a1 * b1];
            fit(*p.iter().min()?, *p.iter().max()?)
        }
        BinOp::Min => Some((a0.min(b0), a1.min(b1))),
        BinOp::Max => Some((a0.max(b0), a1.max(b1))),
        _ => None,
    }
}

/// Whether an integer of this range fits 32 bits (held as `fk_n`, an int under FK_SMALL_VARS).
pub fn narrow(range: Option<(i128, i128)>) -> bool {
    range.is_some_and(|(lo, hi)| lo >= i32::MIN as i128 && hi <= i32::MAX as i128)
}

/// Whether `fk_i2f_small` converts every value of this range exactly.
pub fn small_int(range: Option<(i128, i128)>) -> bool {
    range.is_some_and(|(lo, hi)| lo >= -(I2F_SMALL as i128) && hi < I2F_SMALL as i128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexkern::builtins::{alibi, alibi_slopes, causal, sliding_window, softcap};
    use flexkern::expr::{float, int, kv_pos, q_pos};

    fn lowered(v: flexkern::Variant) -> (Option<Lowered>, Option<Lowered>) {
        let c = v.compile().unwrap();
        (
            c.mask.as_ref().map(Lowered::new),
            c.score.as_ref().map(Lowered::new),
        )
    }

    #[test]
    fn alibi_distance_is_small_and_softcap_divisor_invariant() {
        let (_, s) = lowered(flexkern::Variant::full().score(alibi(alibi_slopes(8))));
        let s = s.unwrap();
        let f = facts(&s);
        let conv = s
            .insts()
            .iter()
            .position(|i| matches!(i.op, LoweredOp::Unary(UnOp::ToFloat, _)))
            .unwrap();
        let LoweredOp::Unary(_, a) = s.insts()[conv].op else {
            unreachable!()
        };
        assert_eq!(
            f[a].range,
            Some((1 - SMALL_VARS as i128, 2 * SMALL_VARS as i128 - 2))
        );
        assert!(small_int(f[a].range) && narrow(f[a].range));
        assert!(!f[a].invariant);

        let (_, s) = lowered(flexkern::Variant::full().score(softcap(30.0)));
        let s = s.unwrap();
        let f = facts(&s);
        let div = s
            .insts()
            .iter()
            .find_map(|i| match i.op {
                LoweredOp::Binary(BinOp::Div, a, b) => Some((a, b)),
                _ => None,
            })
            .unwrap();
        assert!(!f[div.0].invariant && f[div.1].invariant);
    }

    #[test]
    fn products_and_unknowns_leave_the_small_range() {
        // (kv_pos - q_pos) * 4 spans +-2^23: past what fk_i2f_small converts exactly.
        let e = (kv_pos() - q_pos()) * int(4);
        let (m, _) = lowered(flexkern::Variant::full().mask(e.to_float().lt(float(1.0))));
        let m = m.unwrap();
        let f = facts(&m);
        let conv = m
            .insts()
            .iter()
            .find_map(|i| match i.op {
                LoweredOp::Unary(UnOp::ToFloat, a) => Some(a),
                _ => None,
            })
            .unwrap();
        assert!(!small_int(f[conv].range));
        // A lifted constant's value is not part of the structure, but FK_SMALL_VARS promises it
        // small: a window's `q_pos - w` fits 32 bits.
        let (m, _) = lowered(flexkern::Variant::full().mask(sliding_window(64)));
        let m = m.unwrap();
        let f = facts(&m);
        let mut params = 0;
        for (i, inst) in m.insts().iter().enumerate() {
            if let LoweredOp::IntParam(_) = inst.op {
                let r = (1 - SMALL_VARS as i128, SMALL_VARS as i128 - 1);
                assert!(f[i].invariant && f[i].range == Some(r));
                params += 1;
            }
            if let LoweredOp::Binary(BinOp::Sub, _, _) = inst.op {
                assert!(narrow(f[i].range), "{:?}", f[i].range);
            }
        }
        assert_eq!(params, 1);
        let (m, _) = lowered(flexkern::Variant::full().mask(causal()));
        assert!(facts(&m.unwrap()).iter().all(|x| !x.invariant));
        assert_eq!(binary(BinOp::Add, None, Some((0, 1))), None);
        assert_eq!(
            binary(
                BinOp::Mul,
                Some((i64::MAX as i128, i64::MAX as i128)),
                Some((2, 2))
            ),
            None
        );
        assert_eq!(unary(UnOp::Abs, Some((-5, 3))), Some((0, 5)));
        assert!(narrow(Some((i32::MIN as i128, i32::MAX as i128))));
        assert!(!narrow(Some((0, i32::MAX as i128 + 1))) && !narrow(None));
    }
}
