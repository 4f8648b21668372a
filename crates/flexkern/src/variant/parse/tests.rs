//! Parser tests: the built-ins written by hand parse to the same IR, precedence, typing, and
//! errors with their columns.

use super::*;
use crate::variant::builtins;
use crate::variant::program::{Program, Scratch, TileCtx};

fn mask(s: &str) -> Expr {
    parse_mask(s, &[]).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn same(a: &Expr, b: &Expr) {
    assert_eq!(a.to_string(), b.to_string());
}

fn mask_err(s: &str, caps: &[Tensor]) -> ParseError {
    parse_mask(s, caps).expect_err(s)
}

#[test]
fn builtins_written_by_hand_give_the_same_ir() {
    same(&mask("kv_pos <= q_pos"), &builtins::causal());
    same(&mask("kv_pos > q_pos - 8"), &builtins::sliding_window(8));
    same(
        &mask("kv_pos >= q_pos - 3 && kv_pos <= q_pos + 5"),
        &builtins::local(3, 5),
    );
    same(
        &mask("q_pos >= 0 && q_pos / 64 == kv_pos / 64"),
        &builtins::chunked(64),
    );
    same(
        &mask("kv_pos <= q_pos || kv_pos < 7"),
        &builtins::prefix_lm(7),
    );
    let ids = Tensor::int("document_ids", vec![0, 0, 1, 1]);
    same(
        &parse_mask("document_ids[q_pos] == document_ids[kv_pos]", &[ids]).unwrap(),
        &builtins::document(vec![0, 0, 1, 1]),
    );
    let bits = Tensor::int("tree_bits", vec![1, 3]);
    same(
        &parse_mask(
            "kv_pos < kv_len - q_len || (tree_bits[q_token] >> (kv_pos - (kv_len - q_len)) & 1) == 1",
            &[bits],
        )
        .unwrap(),
        &builtins::tree(vec![1, 3]),
    );
    same(
        &parse_score("tanh(score / 30.0) * 30.0", &[]).unwrap(),
        &builtins::softcap(30.0),
    );
    let slopes = Tensor::float("alibi_slopes", vec![0.5, 0.25]);
    same(
        &parse_score("score + alibi_slopes[h] * float(kv_pos - q_pos)", &[slopes]).unwrap(),
        &builtins::alibi(vec![0.5, 0.25]),
    );
}

#[test]
fn precedence_and_associativity() {
    let show = |s: &str| parse_score(s, &[]).unwrap().to_string();
    assert_eq!(show("1 + 2 * 3"), "ToFloat(Add(1, Mul(2, 3)))");
    assert_eq!(show("10 - 4 - 3"), "ToFloat(Sub(Sub(10, 4), 3))");
    assert_eq!(show("-q_pos * 2"), "ToFloat(Mul(Neg(q_pos), 2))");
    assert_eq!(show("(1 + 2) * 3"), "ToFloat(Mul(Add(1, 2), 3))");
    assert_eq!(show("score * 2"), "Mul(score, 2.0)");
    assert_eq!(show("1 << 2 + 1"), "ToFloat(Shl(1, Add(2, 1)))");
    let m = |s: &str| mask(s).to_string();
    assert_eq!(m("true || false && false"), "Or(true, And(false, false))");
    assert_eq!(m("!true && false"), "And(Not(true), false)");
    // Bit operations bind tighter than comparisons (Rust, not C).
    assert_eq!(m("q_pos & 1 == 1"), "Eq(BitAnd(q_pos, 1), 1)");
    assert_eq!(m("q_pos | 2 & 3 != 0"), "Ne(BitOr(q_pos, BitAnd(2, 3)), 0)");
    assert_eq!(
        m("select(q_pos > 3, kv_pos, 0) % 2 == 0"),
        "Eq(Rem(select(Gt(q_pos, 3), kv_pos, 0), 2), 0)"
    );
    assert_eq!(
        m("0x10 == 16 && 1_000 == 1000"),
        "And(Eq(16, 16), Eq(1000, 1000))"
    );
    assert_eq!(m("float(q_pos) < 2.5e1"), "Lt(ToFloat(q_pos), 25.0)");
}

/// Parsed expressions evaluate as arithmetic says, through the kernels' program.
#[test]
fn parsed_masks_evaluate_as_written() {
    let t = TileCtx {
        batch: 0,
        head: 2,
        q_len: 16,
        kv_len: 16,
        q_pos0: 0,
        q_token0: 0,
        rows: 16,
        kv_pos0: 0,
        cols: 16,
    };
    type Rule = fn(i64, i64) -> bool;
    let cases: [(&str, Rule); 4] = [
        ("(q_pos / 4 - kv_pos / 4) * (q_pos / 4 - kv_pos / 4) + (q_pos % 4 - kv_pos % 4) * (q_pos % 4 - kv_pos % 4) <= 2",
         |q, k| (q / 4 - k / 4).pow(2) + (q % 4 - k % 4).pow(2) <= 2),
        ("max(q_pos, kv_pos) - min(q_pos, kv_pos) < h + 1", |q, k| (q - k).abs() < 3),
        ("clamp(kv_pos, 3, 9) == kv_pos || abs(-q_pos) == 0", |q, k| (3..=9).contains(&k) || q == 0),
        ("!(q_pos < kv_pos) && -1 < 0", |q, k| q >= k),
    ];
    for (src, want) in cases {
        let p = Program::compile(&mask(src), Ty::Bool).unwrap();
        let mut out = vec![false; 256];
        p.eval_mask::<f64>(&t, &mut Scratch::default(), &mut out);
        for q in 0..16 {
            for k in 0..16 {
                assert_eq!(
                    out[q * 16 + k],
                    want(q as i64, k as i64),
                    "{src} at ({q}, {k})"
                );
            }
        }
    }
}

#[test]
fn errors_point_at_the_column() {
    let doc = Tensor::int("doc", vec![0, 1]);
    let bias = Tensor::float("bias", vec![0.5]);
    let caps = [doc, bias];
    let cases: [(&str, usize, &str); 17] = [
        ("(q_pos < kv_pos", 16, "expected `)`"),
        ("q_pos <", 8, "expected a value"),
        ("q_pos && kv_pos", 7, "`&&` needs Bool operands, got Int"),
        ("score > 0", 1, "cannot read `score`"),
        ("doc[1.5] == 0", 5, "index of `doc` must be Int"),
        ("doc == 1", 5, "must be indexed"),
        ("frob < 1", 1, "unknown name `frob`"),
        ("q_pos = 1", 7, "write `==`"),
        ("1 < 2 < 3", 7, "do not chain"),
        ("min(1) == 1", 1, "takes 2 argument(s), got 1"),
        ("", 1, "empty expression"),
        ("q_pos @ 1", 7, "unexpected character `@`"),
        ("q_pos + 1", 1, "a mask must be Bool"),
        ("q_pos < kv_pos)", 15, "unexpected `)`"),
        ("select(1, true, false)", 8, "condition must be Bool"),
        ("bias[0] % 2 == 0", 9, "`%` needs Int operands"),
        ("q_pos < 99999999999999999999", 9, "bad number"),
    ];
    for (src, col, msg) in cases {
        let e = mask_err(src, &caps);
        assert_eq!(e.column, col, "{src}: {e}");
        assert!(e.msg.contains(msg), "{src}: {e}");
        assert!(e.to_string().starts_with(&format!("column {col}: ")));
    }
    let e = parse_score("score > 1", &[]).unwrap_err();
    assert!(e.msg.contains("must be a number"), "{e}");
    let e = parse_score("tanh(true)", &[]).unwrap_err();
    assert_eq!(e.column, 6, "{e}");
    let e = parse_score("fancy(score)", &[]).unwrap_err();
    assert!(e.msg.contains("unknown function `fancy`"), "{e}");
}

#[test]
fn every_parsed_expression_type_checks_in_the_ir() {
    let caps = [
        Tensor::int("doc", vec![0; 8]),
        Tensor::float("bias", vec![0.0; 8]),
    ];
    for src in [
        "doc[q_pos] == doc[kv_pos] || bias[h] > 0.5",
        "select(kv_pos < 3, 1.5, 2) < float(q_len)",
        "-(q_pos) <= -kv_pos + 10 && exp(1) > log(2) && sqrt(4) == 2",
    ] {
        assert_eq!(parse_mask(src, &caps).unwrap().ty(), Ok(Ty::Bool), "{src}");
    }
    for src in [
        "score + bias[h]",
        "select(q_pos > kv_pos, score, -1e30)",
        "h",
    ] {
        assert_eq!(
            parse_score(src, &caps).unwrap().ty(),
            Ok(Ty::Float),
            "{src}"
        );
    }
}
