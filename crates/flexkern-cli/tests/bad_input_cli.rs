//! Issue 16 through the binary: each bad input exits with status 1 and an error naming the
//! flag or file (never a signal, never a hang: every run has a deadline), and `run` says when
//! it stops at --ctx.

mod common;

use common::flexkern;
use flexkern::npy;
use std::path::{Path, PathBuf};

/// Asserts exit status 1 with an error mentioning every `needles`.
fn fails_naming(args: &[&str], needles: &[&str]) -> String {
    let (code, _, err) = flexkern(args);
    assert_eq!(code, 1, "flexkern {args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "flexkern {args:?}: `{n}` not in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn dir(name: &str) -> PathBuf {
    common::scratch(&format!("bad-{name}"))
}

fn npy_file(d: &Path, name: &str, shape: &[usize], data: &[f32]) -> String {
    let p = d.join(name);
    npy::write_f32(&p, shape, data).unwrap();
    p.display().to_string()
}

fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.37).sin()).collect()
}

#[test]
fn attn_bad_arguments_are_named() {
    let d = dir("attn");
    let q = npy_file(&d, "q.npy", &[8, 2, 4], &ramp(64));
    let k = npy_file(&d, "k.npy", &[8, 2, 4], &ramp(64));
    let v = npy_file(&d, "v.npy", &[8, 2, 4], &ramp(64));
    let v_short = npy_file(&d, "vs.npy", &[6, 2, 4], &ramp(48));
    let out = d.join("o.npy").display().to_string();
    let base = ["attn", "--q", &q, "--k", &k, "--v", &v, "--out", &out];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |extra: &[&str], needles: &[&str]| {
        let a = with(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        fails_naming(&a, needles);
    };
    // A zero-size dimension once sized a 64 TB output and aborted.
    let huge = npy_file(&d, "huge.npy", &[1_000_000, 1_000_000, 0], &[]);
    fails_naming(
        &["attn", "--q", &huge, "--k", &k, "--v", &v, "--out", &out],
        &["argument"],
    );
    let wide_v = npy_file(&d, "wv.npy", &[0, 2, 100_000_000], &[]);
    fails_naming(
        &["attn", "--q", &q, "--k", &k, "--v", &wide_v, "--out", &out],
        &["argument"],
    );
    for m in [
        "causal:1:2",
        "sliding:0",
        "sliding:-1",
        "chunked:0",
        "chunked:-1",
        "local:1",
        "bogus",
    ] {
        run(&["--mask", m], &["--mask"]);
    }
    for c in [
        "--softcap=0",
        "--softcap=inf",
        "--softcap=NaN",
        "--softcap=-3",
    ] {
        run(&[c], &["--softcap"]);
    }
    let three = npy_file(&d, "a3.npy", &[3], &[0.5, 0.25, 0.125]);
    run(&["--alibi", &three], &["--alibi", "3 values for 2"]);
    let nan = npy_file(&d, "an.npy", &[2], &[0.5, f32::NAN]);
    run(&["--alibi", &nan], &["--alibi", "finite"]);
    // 8 Q rows, lengths covering 5: this reported "argument `out`".
    run(
        &["--cu-q-lens", "0,5", "--cu-kv-lens", "0,8"],
        &["--cu-q-lens"],
    );
    // Paged with V shorter than K named `cu_kv_lens`, which was not given.
    let (code, _, err) = flexkern(&[
        "attn",
        "--q",
        &q,
        "--k",
        &k,
        "--v",
        &v_short,
        "--out",
        &out,
        "--page-size",
        "4",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("`v`") && !err.contains("cu_kv_lens"), "{err}");
    // Non-finite K into an int8 cache is refused, not stored as finite codes.
    let mut kn = ramp(64);
    kn[9] = f32::INFINITY;
    let kn = npy_file(&d, "kn.npy", &[8, 2, 4], &kn);
    fails_naming(
        &[
            "attn",
            "--q",
            &q,
            "--k",
            &kn,
            "--v",
            &v,
            "--out",
            &out,
            "--page-size",
            "4",
            "--kv-dtype",
            "int8",
        ],
        &["argument `k`", "finite"],
    );
    // The extremes of local: unbounded, the same output as no mask.
    let (c, _, e) = flexkern(
        &with(&["--mask", "local:9223372036854775807:9223372036854775807"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(c, 0, "{e}");
    let got = npy::read(Path::new(&out)).unwrap().to_f32();
    let (c, _, _) = flexkern(&base);
    assert_eq!(c, 0);
    assert_eq!(npy::read(Path::new(&out)).unwrap().to_f32(), got);
    // OS errors once.
    let err = fails_naming(
        &[
            "attn",
            "--q",
            "/nonexistent/q.npy",
            "--k",
            &k,
            "--v",
            &v,
            "--out",
            &out,
        ],
        &["/nonexistent/q.npy"],
    );
    assert_eq!(err.matches("os error").count(), 1, "{err}");
}

#[test]
fn bench_gemv_sizes_are_checked() {
    let q = ["bench", "gemv", "--formats", "q4_0"];
    let run = |extra: &[&str], needles: &[&str]| {
        let a: Vec<&str> = q.iter().chain(extra).copied().collect();
        fails_naming(&a, needles);
    };
    run(&["--n", "0"], &["--n"]);
    run(&["--reps", "0"], &["--reps"]);
    run(&["--k", "0"], &["--k"]);
    run(&["--k", "18446744073709551000"], &["--k", "needs"]);
    run(&["--n", "4096", "--k", "9223372036854775807"], &["--"]);
    run(&["--threads", "100000"], &["--threads"]);
    run(&["--graph"], &["--graph", "--device cuda"]);
    run(&["--in-l2"], &["--in-l2", "--device cuda"]);
    // --quick keeps what the user gave.
    let (c, out, err) = flexkern(&[
        "bench",
        "gemv",
        "--quick",
        "--formats",
        "q8_0",
        "--k",
        "256",
        "--n",
        "64",
        "--reps",
        "2",
    ]);
    assert_eq!(c, 0, "{err}");
    assert!(out.contains("q8_0 N=64 K=256"), "{out}");
    assert!(!out.contains("K=1024"), "{out}");
}

/// A one-layer tiny llama (see `common::tiny_llama`).
fn tiny_model(path: &Path) {
    let t = common::Tiny {
        layers: 1,
        d: 16,
        ff: 32,
        heads: 2,
        kv_heads: 2,
        context: 64,
        seed: 5,
    };
    common::tiny_llama(path, &t);
}

#[test]
fn run_bad_inputs_and_the_ctx_note() {
    let d = dir("run");
    let model = d.join("tiny.gguf");
    tiny_model(&model);
    let m = model.display().to_string();
    let dd = d.display().to_string();
    fails_naming(
        &["run", "--model", &dd, "--prompt", "hi"],
        &["is a directory"],
    );
    let (_, _, err) = flexkern(&["run", "--model", "/nonexistent.gguf", "--prompt", "hi"]);
    assert_eq!(err.matches("os error").count(), 1, "{err}");
    fails_naming(
        &[
            "run",
            "--model",
            &m,
            "--prompt",
            "hi",
            "--threads",
            "100000",
        ],
        &["--threads"],
    );
    fails_naming(
        &["run", "--model", &m, "--prompt", "hi", "--threads", "0"],
        &["--threads"],
    );
    // -n 40 with room for 8 positions: it stops early and says so.
    let (c, _, err) = flexkern(&[
        "run",
        "--model",
        &m,
        "--prompt",
        "hi",
        "-n",
        "40",
        "--ctx",
        "8",
        "--temperature",
        "0",
    ]);
    assert_eq!(c, 0, "{err}");
    assert!(
        err.contains("KV cache is full") && err.contains("--ctx"),
        "{err}"
    );
    // Plenty of room: no note.
    let (c, _, err) = flexkern(&[
        "run",
        "--model",
        &m,
        "--prompt",
        "hi",
        "-n",
        "4",
        "--ctx",
        "64",
        "--temperature",
        "0",
    ]);
    assert_eq!(c, 0, "{err}");
    assert!(!err.contains("KV cache is full"), "{err}");
}

/// `--precise` runs (f32 activations, f32 KV) and refuses an explicit `--kv-type`.
#[test]
fn precise_mode_runs_and_conflicts_with_kv_type() {
    let d = dir("precise");
    let model = d.join("tiny.gguf");
    tiny_model(&model);
    let m = model.display().to_string();
    let text = d.join("text.txt");
    std::fs::write(&text, "hi there hello world ".repeat(40)).unwrap();
    let t = text.display().to_string();
    let run = [
        "run",
        "--model",
        &m,
        "--prompt",
        "hi",
        "-n",
        "4",
        "--temperature",
        "0",
    ];
    let ppl = [
        "perplexity",
        "--model",
        &m,
        "--file",
        &t,
        "--ctx",
        "8",
        "--chunks",
        "2",
    ];
    for args in [&run[..], &ppl[..]] {
        let (c, out, err) = flexkern(&[args, &["--precise"]].concat());
        assert_eq!(c, 0, "{args:?} --precise: {err}");
        if args[0] == "perplexity" {
            assert!(
                out.contains("PPL = ") && err.contains("Precise"),
                "{out} {err}"
            );
        }
        let (c, _, err) = flexkern(&[args, &["--precise", "--kv-type", "f16"]].concat());
        assert_eq!(c, 2, "{args:?}: {err}");
        assert!(
            err.contains("--precise") && err.contains("--kv-type"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}
