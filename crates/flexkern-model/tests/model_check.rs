//! `check::check_models` on a synthetic SmolLM2-135M-shaped model: the precise CPU path against
//! the default one (integer kernels on the repacked layout) agrees under the near-tie rule, and
//! a model with other weights fails the check.

use flexkern::CpuBackend;
use flexkern_gguf::GgufFile;
use flexkern_model::synth::{self, Recipe, Shape, SynthSpec, TokenizerSource};
use flexkern_model::{check_models, Model, Precision, Tolerance};

fn synth_file(seed: u64) -> GgufFile {
    let spec = SynthSpec {
        shape: Shape::from_name("smollm2-135m").unwrap(),
        recipe: Recipe::from_name("q4_0").unwrap(),
        seed,
        vocab: Some(512),
    };
    let plan = synth::plan(&spec, &TokenizerSource::Bytes).unwrap();
    GgufFile::from_bytes(synth::write(plan, seed, Vec::new(), |_, _| {}).unwrap()).unwrap()
}

const PROMPT: &[u32] = &[84, 104, 101, 32, 116, 104, 114, 101, 101];

#[test]
fn precise_and_default_cpu_paths_agree() {
    let f = synth_file(11);
    let r = Model::load_with(&f, CpuBackend, Precision::Precise, |_, _| {}).unwrap();
    let d = Model::load_with(&f, CpuBackend, Precision::Default, |_, _| {}).unwrap();
    let tol = Tolerance {
        tie: 0.05,
        max_abs: 0.25,
        max_rel: 0.0,
    };
    let mut seen = Vec::new();
    let s = check_models(&r, &d, PROMPT, 12, &tol, |c| seen.push(c.clone())).unwrap();
    eprintln!("{s:?}");
    for c in &seen {
        eprintln!("{c:?}");
    }
    assert_eq!(s.positions, PROMPT.len() + 11);
    assert_eq!(seen.len(), s.positions);
    assert_eq!(s.tokens.len(), 12);
    assert_eq!(s.failed, 0, "{seen:?}");
    assert!(
        s.max_abs > 0.0 && s.max_abs.is_finite(),
        "different kernels differ"
    );
    assert!(seen.iter().take(PROMPT.len() - 1).all(|c| c.prompt));
    assert!(!seen[PROMPT.len() - 1].prompt);
    // The same path on both sides is exact.
    let s = check_models(&r, &r, PROMPT, 4, &tol, |_| {}).unwrap();
    assert_eq!((s.failed, s.max_abs, s.rms), (0, 0.0, 0.0));
}

#[test]
fn other_weights_fail_the_check() {
    let (f, g) = (synth_file(11), synth_file(12));
    let r = Model::load_with(&f, CpuBackend, Precision::Precise, |_, _| {}).unwrap();
    let d = Model::load_with(&g, CpuBackend, Precision::Precise, |_, _| {}).unwrap();
    let tol = Tolerance {
        tie: 0.05,
        max_abs: 0.25,
        max_rel: 0.0,
    };
    let s = check_models(&r, &d, PROMPT, 4, &tol, |_| {}).unwrap();
    assert!(s.failed > 0, "{s:?}");
    assert_eq!(s.positions, PROMPT.len() + 3);
}

#[test]
fn bad_arguments_are_named() {
    let f = synth_file(11);
    let r = Model::load_with(&f, CpuBackend, Precision::Precise, |_, _| {}).unwrap();
    let tol = Tolerance {
        tie: 0.05,
        max_abs: 0.25,
        max_rel: 0.0,
    };
    let e = check_models(&r, &r, &[], 4, &tol, |_| {}).unwrap_err();
    assert!(e.to_string().contains("`prompt`"), "{e}");
    let e = check_models(&r, &r, &[600], 4, &tol, |_| {}).unwrap_err();
    assert!(e.to_string().contains("600"), "{e}");
    let e = check_models(&r, &r, PROMPT, 1 << 40, &tol, |_| {}).unwrap_err();
    assert!(e.to_string().contains("context"), "{e}");
}
