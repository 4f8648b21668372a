//! Golden-text tests of the emitted hooks (no GPU needed): regenerate a golden file with
//! `FLEXKERN_BLESS=1 cargo test -p flexkern-cuda codegen` after an intended change, and review it.

use super::generate;
use flexkern::builtins::*;
use flexkern::Variant;
use std::path::PathBuf;

fn golden(name: &str, v: Variant) -> super::VariantCode {
    let code = generate(&v.compile().unwrap());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.cuh"));
    // The static kernels/hooks.cuh is every variant's; the golden text names it once.
    assert_eq!(code.source.matches(super::HOOKS).count(), 1);
    let text = code.source.replace(super::HOOKS, "// kernels/hooks.cuh\n");
    if std::env::var_os("FLEXKERN_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing golden {path:?}"));
    assert_eq!(text, want, "emitted source for `{name}` changed");
    code
}

#[test]
fn causal_mask() {
    let c = golden("causal", Variant::full().mask(causal()));
    assert!(c.params.ints.is_empty() && c.params.captures.is_empty());
}

#[test]
fn sliding_window_lifts_the_window() {
    let a = golden(
        "sliding_causal",
        Variant::full().mask(causal()).mask(sliding_window(4096)),
    );
    let b = generate(
        &Variant::full()
            .mask(causal())
            .mask(sliding_window(2048))
            .compile()
            .unwrap(),
    );
    assert_eq!(a.source, b.source);
    assert_eq!(a.key, b.key);
    assert_eq!(a.params.ints, vec![4096]);
    assert_eq!(b.params.ints, vec![2048]);
}

#[test]
fn softcap_alibi_score() {
    let c = golden(
        "causal_softcap_alibi",
        Variant::full()
            .mask(causal())
            .score(softcap(20.0))
            .score(alibi(alibi_slopes(4))),
    );
    assert_eq!(c.params.captures.len(), 1);
    assert!(c.params.floats.contains(&20.0));
}

#[test]
fn document_and_tree_captures() {
    let c = golden(
        "document",
        Variant::full().mask(document(vec![0, 0, 1, 1, 1])),
    );
    assert_eq!(
        c.params.captures,
        vec![super::CaptureData::Int(vec![0, 0, 1, 1, 1])]
    );
    golden("tree", Variant::full().mask(tree(vec![1, 3, 5, 11])));
}

#[test]
fn identity_hooks_without_mods() {
    let c = golden("full", Variant::full());
    assert!(c.source.contains("return true;") && c.source.contains("return score;"));
    assert_eq!(c.params.bytes(), 0);
}

#[test]
fn parameter_block_layout() {
    let c = generate(
        &Variant::full()
            .mask(document(vec![3, 4]))
            .score(softcap(30.0))
            .compile()
            .unwrap(),
    );
    let blob = c.params.encode(&[0x1000]);
    assert_eq!(blob.len(), c.params.bytes());
    let ni = c.params.ints.len();
    // ints, then the capture pointer, its length, then floats.
    assert_eq!(
        u64::from_le_bytes(blob[8 * ni..8 * ni + 8].try_into().unwrap()),
        0x1000
    );
    assert_eq!(
        i64::from_le_bytes(blob[8 * ni + 8..8 * ni + 16].try_into().unwrap()),
        2
    );
    let f0 = 8 * (ni + 2);
    assert_eq!(
        f32::from_le_bytes(blob[f0..f0 + 4].try_into().unwrap()),
        c.params.floats[0]
    );
}
