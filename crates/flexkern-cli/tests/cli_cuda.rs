//! `--device cuda` from the binary: on a machine without an NVIDIA driver (CI) every entry point
//! prints why and exits 3 (never a panic); with one, `verify --device cuda --quick` passes.

mod common;

use common::flexkern as run;

#[test]
fn cuda_commands_skip_with_a_typed_error_or_pass() {
    let driver = flexkern_cuda::runtime::driver_present();
    let mut cases = vec![
        &["verify", "--device", "cuda", "--quick"][..],
        &[
            "bench", "attn", "--device", "cuda", "--quick", "--only", "B1 ",
        ],
        &[
            "bench",
            "gemv",
            "--device",
            "cuda",
            "--quick",
            "--formats",
            "q4_0",
            "--n",
            "512",
        ],
    ];
    // `run` needs the default model, which a GPU machine may not hold: checked without one.
    if !driver {
        cases.push(&["run", "--device", "cuda", "--prompt", "hi", "-n", "2"]);
    }
    for args in cases {
        let (code, out, err) = run(args);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        if driver {
            assert_eq!(code, 0, "{args:?}: {out}{err}");
        } else {
            assert_eq!(code, 3, "{args:?}: {out}{err}");
            assert!(
                out.contains("--device cuda: SKIPPED (no CUDA device"),
                "{out}"
            );
            assert!(err.contains("no CUDA device"), "{err}");
        }
    }
}
