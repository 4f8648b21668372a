//! `flexkern verify-model` through the binary on a small synthetic model: both CPU paths pass
//! against the precise reference (AVX2 and portable kernels), a bound the default path cannot
//! meet fails with exit 1, bad tolerances are named, `--device cuda` without a GPU exits 3.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Runs the binary with `envs` (and not the caller's FLEXKERN_FORCE_SCALAR).
fn flexkern(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    common::flexkern_with(args, Duration::from_secs(300), |c| {
        c.env_remove("FLEXKERN_FORCE_SCALAR");
        for (k, v) in envs {
            c.env(k, v);
        }
    })
}

/// A SmolLM2-135M-shaped Q4_0 model with a 512-byte vocabulary, written once per run.
fn model() -> &'static Path {
    static M: OnceLock<PathBuf> = OnceLock::new();
    M.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("flexkern-vm-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let out = d.join("m.gguf");
        let o = out.display().to_string();
        let args = [
            "synth-model",
            "--shape",
            "smollm2-135m",
            "--format",
            "q4_0",
            "--tokenizer",
            "bytes",
            "--vocab",
            "512",
            "--out",
            &o,
        ];
        let (code, _, err) = flexkern(&args, &[]);
        assert_eq!(code, 0, "{err}");
        out
    })
}

fn verify(extra: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let m = model().display().to_string();
    let mut args = vec!["verify-model", "--model", &m, "--tokens", "6"];
    args.extend_from_slice(extra);
    flexkern(&args, envs)
}

#[test]
fn both_cpu_paths_pass_on_both_kernel_sets() {
    for envs in [&[][..], &[("FLEXKERN_FORCE_SCALAR", "1")][..]] {
        for path in ["portable", "default"] {
            let (code, out, err) = verify(&["--cpu-path", path], envs);
            assert_eq!(code, 0, "{path} {envs:?}: {out}{err}");
            // The prompt "The three laws of robotics are" is 30 byte tokens (this tokenizer has no
            // BOS): 30 positions, then 5 decode steps.
            let last = out.lines().last().unwrap();
            assert!(
                last.starts_with("verify-model: 35 positions, 0 failed") && last.ends_with("pass"),
                "{out}"
            );
            assert_eq!(out.lines().filter(|l| l.starts_with("pos ")).count(), 35);
        }
    }
}

#[test]
fn a_bound_the_default_path_cannot_meet_fails() {
    let args = ["--cpu-path", "default", "--max-diff", "0", "--max-rel", "0"];
    let (code, out, err) = verify(&args, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("FAIL: max |diff|") && out.contains("| FAIL"),
        "{out}"
    );
    assert!(err.contains("positions failed"), "{err}");
}

#[test]
fn bad_arguments_are_named() {
    let (code, _, err) = verify(&["--tie=-1"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("--tie"), "{err}");
    let (code, _, err) = verify(&["--max-rel", "nan"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("--max-rel"), "{err}");
    let m = model().display().to_string();
    let args = ["verify-model", "--model", &m, "--tokens", "100000000"];
    let (code, _, err) = flexkern(&args, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("context"), "{err}");
    let (code, _, err) = flexkern(&["verify-model", "--model", "/nonexistent.gguf"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent.gguf"), "{err}");
}

#[test]
fn cuda_without_a_gpu_exits_3() {
    let (code, out, err) = verify(&["--device", "cuda"], &[]);
    // 3: no CUDA device; on a GPU machine the check itself runs and must pass.
    assert!(code == 3 || code == 0, "{code}: {out}{err}");
    if code == 3 {
        assert!(out.contains("verify-model --device cuda: SKIPPED"), "{out}");
    }
}
