//! Tests of the variant layer: IR semantics, interval soundness, BlockMask structure.

use super::block_mask::{BlockKind, BlockMask};
use super::builtins::*;
use super::expr::*;
use super::interval::{classify, Domain, Tri};
use super::program::{Program, Scratch, TileCtx};
use super::Variant;
use crate::attention::problem::SeqLens;
use rand::{Rng, SeedableRng};

fn tile(q0: i64, rows: usize, k0: i64, cols: usize) -> TileCtx {
    TileCtx {
        batch: 0,
        head: 1,
        q_len: 100,
        kv_len: 200,
        q_pos0: q0,
        q_token0: q0,
        rows,
        kv_pos0: k0,
        cols,
    }
}

fn eval(e: &Expr, t: &TileCtx) -> Vec<bool> {
    let p = Program::compile(e, Ty::Bool).unwrap();
    let mut out = vec![false; t.rows * t.cols];
    p.eval_mask::<f64>(t, &mut Scratch::default(), &mut out);
    out
}

#[test]
fn causal_tile_matches_definition() {
    let t = tile(10, 7, 5, 13);
    let m = eval(&causal(), &t);
    for r in 0..7 {
        for c in 0..13 {
            assert_eq!(m[r * 13 + c], 5 + c as i64 <= 10 + r as i64);
        }
    }
}

#[test]
fn integer_edge_semantics_never_panic() {
    // Division and remainder by zero give 0; shifts outside 0..64 give 0; i64 overflow wraps.
    let t = tile(0, 1, 0, 3);
    let e = ((q_pos() + 7) / (kv_pos() - kv_pos()))
        .eq(int(0))
        .and(((q_pos() + 7) % int(0)).eq(int(0)))
        .and((int(1) << int(64)).eq(int(0)))
        .and((int(-1) >> int(-3)).eq(int(0)))
        .and((int(i64::MAX) + 1).eq(int(i64::MIN)));
    assert!(eval(&e, &t).iter().all(|&x| x));
}

#[test]
fn type_errors_are_reported_not_panicked() {
    assert!(Program::compile(&(q_pos() + float(1.0)).gt(int(0)), Ty::Bool).is_err());
    assert!(Program::compile(&q_pos(), Ty::Bool).is_err());
    assert!(Program::compile(&score().tanh().gt(int(1).to_float()).not().not(), Ty::Bool).is_ok());
    assert!(Variant::full()
        .mask(score().gt(float(0.0)))
        .compile()
        .is_err());
    assert!(Variant::full().score(q_pos().lt(int(1))).compile().is_err());
}

#[test]
fn score_mods_chain_in_order() {
    // softcap then alibi: 2 * tanh(s / 2) + slope * (kv - q).
    let v = Variant::full()
        .score(softcap(2.0))
        .score(alibi(vec![0.5, 0.25]))
        .compile()
        .unwrap();
    let t = tile(3, 1, 0, 4);
    let mut s = vec![1.0f64, -3.0, 0.5, 9.0];
    let orig = s.clone();
    v.score
        .unwrap()
        .apply_score(&t, &mut Scratch::default(), &mut s);
    for c in 0..4 {
        let want = 2.0 * (orig[c] / 2.0).tanh() + 0.25 * (c as f64 - 3.0);
        assert!((s[c] - want).abs() < 1e-12, "{c}: {} vs {want}", s[c]);
    }
}

/// Interval classification must be sound: True means every element is kept, False none.
#[test]
fn interval_classification_is_sound() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let ids: Vec<i64> = (0..300).map(|i| i / 37).collect();
    let masks = vec![
        causal(),
        sliding_window(20),
        local(5, 9),
        chunked(16),
        document(ids),
        prefix_lm(30),
        block_sparse(8, 2, 3, true),
        causal().and(sliding_window(33)).or(kv_pos().lt(int(4))),
        causal().not(),
        tree((0..100).map(|i| (i * 2654435761i64) & 0xffff).collect()),
    ];
    for m in &masks {
        for _ in 0..200 {
            let (q0, k0) = (rng.gen_range(0..150i64), rng.gen_range(0..150i64));
            let (rows, cols) = (rng.gen_range(1..40usize), rng.gen_range(1..40usize));
            let d = Domain {
                batch: (0, 0),
                head: (1, 1),
                q_pos: (q0, q0 + rows as i64 - 1),
                kv_pos: (k0, k0 + cols as i64 - 1),
                q_len: (100, 100),
                kv_len: (200, 200),
                q_token: (q0, q0 + rows as i64 - 1),
            };
            let exact = eval(m, &tile(q0, rows, k0, cols));
            match classify(m, &d) {
                Tri::True => assert!(exact.iter().all(|&x| x), "{m} claimed full"),
                Tri::False => assert!(exact.iter().all(|&x| !x), "{m} claimed empty"),
                Tri::Unknown => {}
            }
        }
    }
}

#[test]
fn causal_block_mask_has_triangle_structure() {
    let lens = SeqLens::single(1000, 1000);
    let p = Program::compile(&causal(), Ty::Bool).unwrap();
    let bm = BlockMask::build(Some(&p), &lens, 8, 64, 64).unwrap();
    assert_eq!(bm.heads, 1, "causal broadcasts over heads");
    let nb = 1000usize.div_ceil(64);
    for qb in 0..nb {
        assert_eq!(
            bm.full_blocks(0, 5, qb),
            (0..qb as u32).collect::<Vec<_>>().as_slice()
        );
        assert_eq!(bm.partial_blocks(0, 5, qb), &[qb as u32]);
    }
    assert_eq!(bm.kv_num_blocks.iter().sum::<u32>() as usize, nb);
    assert_eq!(
        bm.full_kv_num_blocks.iter().sum::<u32>() as usize,
        nb * (nb - 1) / 2
    );
}

#[test]
fn block_mask_agrees_with_elementwise_mask() {
    // Ragged batch, per-head mask, decode rows and chunked prefill; kinds checked elementwise.
    let lens = SeqLens::new(&[0, 1, 40, 40, 77], &[300, 90, 0, 37]).unwrap();
    let masks = [
        causal().and(sliding_window(50)),
        causal().and(kv_pos().gt(h() * 7)),
        prefix_lm(20),
        block_sparse(16, 1, 4, true),
    ];
    for m in &masks {
        let p = Program::compile(m, Ty::Bool).unwrap();
        let bm = BlockMask::build(Some(&p), &lens, 4, 16, 32).unwrap();
        for s in 0..lens.num_seqs() {
            let (ql, kl) = (lens.q_len(s), lens.kv_len(s));
            for h in 0..4 {
                for qb in 0..ql.div_ceil(16) {
                    for kb in 0..kl.div_ceil(32) {
                        let (q0, q1) = (qb * 16, (qb * 16 + 16).min(ql));
                        let (k0, k1) = (kb * 32, (kb * 32 + 32).min(kl));
                        let t = TileCtx {
                            batch: s as i64,
                            head: h as i64,
                            q_len: ql as i64,
                            kv_len: kl as i64,
                            q_pos0: lens.q_pos0(s) + q0 as i64,
                            q_token0: (lens.q_start(s) + q0) as i64,
                            rows: q1 - q0,
                            kv_pos0: k0 as i64,
                            cols: k1 - k0,
                        };
                        let ex = eval(m, &t);
                        let want = if ex.iter().all(|&x| x) {
                            BlockKind::Full
                        } else if ex.iter().all(|&x| !x) {
                            BlockKind::Empty
                        } else {
                            BlockKind::Partial
                        };
                        assert_eq!(
                            bm.kind(s, h, qb, kb),
                            want,
                            "{m} seq {s} head {h} tile ({qb},{kb})"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn sliding_window_block_mask_visits_only_the_band() {
    let lens = SeqLens::single(4096, 4096);
    let v = Variant::full()
        .mask(causal())
        .mask(sliding_window(256))
        .compile()
        .unwrap();
    let bm = BlockMask::build(v.mask.as_ref(), &lens, 8, 64, 64).unwrap();
    // Each q block sees at most 256/64 + 1 blocks.
    let visited: u32 =
        bm.kv_num_blocks.iter().sum::<u32>() + bm.full_kv_num_blocks.iter().sum::<u32>();
    assert!(visited as usize <= 64 * 5, "{visited}");
    assert!(bm.density() < 0.09);
}
