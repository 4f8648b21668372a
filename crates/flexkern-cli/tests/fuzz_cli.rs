//! Bounded fuzzing of the binary (issue 16): random `attn`, `quantize`, `dequantize` and `gemv`
//! argument combinations over a pool of good, odd and corrupt input files. Every run must exit
//! 0, 1 (our typed error), 2 (clap's usage error) or 3 (no CUDA device, for `--device=cuda`),
//! never by a signal, within a deadline, and every error must name a flag, an argument or the
//! file it is about.
//!
//! `FLEXKERN_FUZZ_SECS` sets the time budget per test (default 4; `scripts/test.sh` gives it
//! more); `FLEXKERN_FUZZ_SEED` the seed (default: fixed, so a failure reproduces).

use flexkern::npy;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn budget() -> Duration {
    let s = std::env::var("FLEXKERN_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4.0);
    Duration::from_secs_f64(s)
}

fn rng() -> StdRng {
    let seed = std::env::var("FLEXKERN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    StdRng::seed_from_u64(seed)
}

/// Runs the binary with a deadline and checks the outcome; returns the exit code.
fn check(args: &[String]) -> i32 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flexkern"))
        .args(args)
        .env("FLEXKERN_MAX_ALLOC_BYTES", (1u64 << 30).to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("hang: flexkern {}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let Some(code) = out.status.code() else {
        panic!(
            "signal {:?}: flexkern {}\n{err}",
            out.status,
            args.join(" ")
        );
    };
    // Exit 3 is the documented "no CUDA device" outcome, legal only where CUDA was asked for.
    let no_cuda =
        code == 3 && args.iter().any(|a| a == "--device=cuda") && err.contains("no CUDA device");
    assert!(
        (matches!(code, 0..=2) || no_cuda) && !err.contains("panicked"),
        "exit {code}: flexkern {}\n{err}",
        args.join(" ")
    );
    if code == 1 {
        let names = err.contains("--")
            || err.contains("argument")
            || args.iter().any(|a| {
                let v = a.split_once('=').map_or(a.as_str(), |(_, v)| v);
                v.len() > 4 && err.contains(v)
            });
        assert!(
            names,
            "the error names nothing: flexkern {}\n{err}",
            args.join(" ")
        );
    }
    code
}

struct Pool {
    dir: PathBuf,
    files: Vec<String>,
}

impl Pool {
    fn new(name: &str) -> Pool {
        let dir = std::env::temp_dir().join(format!("flexkern-fuzz-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Pool {
            dir,
            files: Vec::new(),
        }
    }
    fn npy(&mut self, shape: &[usize], data: &[f32]) {
        let p = self.dir.join(format!("{}.npy", self.files.len()));
        npy::write_f32(&p, shape, data).unwrap();
        self.files.push(p.display().to_string());
    }
    fn raw(&mut self, bytes: &[u8]) {
        let p = self.dir.join(format!("{}.bin", self.files.len()));
        std::fs::write(&p, bytes).unwrap();
        self.files.push(p.display().to_string());
    }
    fn pick(&self, r: &mut StdRng) -> String {
        if r.gen_ratio(1, 20) {
            return "/nonexistent/x.npy".into();
        }
        self.files[r.gen_range(0..self.files.len())].clone()
    }
    fn out(&self, r: &mut StdRng) -> String {
        match r.gen_range(0..20) {
            0 => "/nonexistent/dir/o.npy".into(),
            1 => self.dir.display().to_string(),
            _ => self.dir.join("out.npy").display().to_string(),
        }
    }
}

fn vals(r: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| match r.gen_range(0..50) {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => 1e30,
            _ => r.gen_range(-2.0..2.0),
        })
        .collect()
}

/// Numbers users type: small, zero, negative, huge, garbage.
fn number(r: &mut StdRng) -> String {
    match r.gen_range(0..12) {
        0 => "0".into(),
        1 => "-1".into(),
        2 => u64::MAX.to_string(),
        3 => i64::MAX.to_string(),
        4 => "nan".into(),
        5 => "inf".into(),
        6 => "x".into(),
        7 => "".into(),
        _ => r.gen_range(1..40).to_string(),
    }
}

fn list(r: &mut StdRng) -> String {
    let n = r.gen_range(0..4);
    let mut acc = 0u64;
    let mut v = vec!["0".to_string()];
    for _ in 0..n {
        acc += r.gen_range(0..8);
        v.push(if r.gen_ratio(1, 8) {
            number(r)
        } else {
            acc.to_string()
        });
    }
    v.join(",")
}

fn mask(r: &mut StdRng, pool: &Pool) -> String {
    let name = [
        "causal",
        "sliding",
        "local",
        "chunked",
        "prefix-lm",
        "document",
        "bogus",
    ];
    let mut s = name[r.gen_range(0..name.len())].to_string();
    if s == "document" {
        return format!("document:{}", pool.pick(r));
    }
    for _ in 0..r.gen_range(0..4) {
        s.push(':');
        s.push_str(&number(r));
    }
    s
}

fn flag(args: &mut Vec<String>, f: &str, v: String) {
    args.push(format!("--{f}={v}"));
}

#[test]
fn attn_argument_combinations() {
    let mut r = rng();
    let mut pool = Pool::new("attn");
    for shape in [
        vec![8, 2, 4],
        vec![8, 1, 4],
        vec![6, 2, 4],
        vec![8, 2, 3],
        vec![8, 4, 4],
        vec![0, 2, 4],
        vec![8, 0, 4],
        vec![8, 2, 0],
        vec![2],
        vec![4, 8],
        vec![3, 2, 4, 4],
    ] {
        let n = shape.iter().product();
        let v = vals(&mut r, n);
        pool.npy(&shape, &v);
    }
    pool.npy(&[1_000_000, 1_000_000, 0], &[]);
    pool.raw(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'");
    pool.raw(b"not an npy");
    let t = Instant::now();
    let mut runs = 0;
    while t.elapsed() < budget() || runs < 20 {
        let mut a: Vec<String> = vec!["attn".into()];
        for f in ["q", "k", "v"] {
            flag(&mut a, f, pool.pick(&mut r));
        }
        flag(&mut a, "out", pool.out(&mut r));
        for _ in 0..r.gen_range(0..4) {
            match r.gen_range(0..11) {
                0 | 1 => flag(&mut a, "mask", mask(&mut r, &pool)),
                2 => flag(&mut a, "softcap", number(&mut r)),
                3 => flag(&mut a, "scale", number(&mut r)),
                4 => {
                    flag(&mut a, "cu-q-lens", list(&mut r));
                    flag(&mut a, "cu-kv-lens", list(&mut r));
                }
                5 => flag(&mut a, "page-size", number(&mut r)),
                6 => {
                    let t = ["int8", "fp8e4m3", "fp8e5m2", "f16", "q4", ""];
                    flag(&mut a, "kv-dtype", t[r.gen_range(0..t.len())].into())
                }
                7 => flag(&mut a, "alibi", pool.pick(&mut r)),
                8 => flag(&mut a, "sinks", pool.pick(&mut r)),
                9 => flag(&mut a, "lse", pool.out(&mut r)),
                _ => flag(
                    &mut a,
                    "device",
                    ["cpu", "cuda", "x"][r.gen_range(0..3)].into(),
                ),
            }
        }
        check(&a);
        runs += 1;
    }
    eprintln!("{runs} attn runs");
}

#[test]
fn quantized_argument_combinations() {
    let mut r = rng();
    let mut pool = Pool::new("gemv");
    for shape in [
        vec![4, 256],
        vec![2, 64],
        vec![256],
        vec![3, 32],
        vec![1, 0],
        vec![0, 32],
    ] {
        let n = shape.iter().product();
        let v = vals(&mut r, n);
        pool.npy(&shape, &v);
    }
    // Raw weights: a Q4_0 [4, 256] and odd lengths.
    pool.raw(&vec![0x11u8; 4 * 8 * 18]);
    pool.raw(&[]);
    pool.raw(&[1, 2, 3]);
    let formats = [
        "q4_0",
        "q4_1",
        "q8_0",
        "q4_k",
        "q6_k",
        "q2_k",
        "f16",
        "bf16",
        "f32",
        "mlx:4:64",
        "mlx:8:32:bf16",
        "mlx:3:0",
        "q9",
        "",
    ];
    let t = Instant::now();
    let mut runs = 0;
    while t.elapsed() < budget() || runs < 20 {
        let mut a: Vec<String> = Vec::new();
        let f = formats[r.gen_range(0..formats.len())].to_string();
        let shape = format!("{},{}", number(&mut r), number(&mut r));
        match r.gen_range(0..3) {
            0 => {
                a.push("quantize".into());
                flag(&mut a, "format", f);
                flag(&mut a, "in", pool.pick(&mut r));
                flag(&mut a, "out", pool.dir.join("w.bin").display().to_string());
            }
            1 => {
                a.push("dequantize".into());
                flag(&mut a, "format", f);
                flag(&mut a, "in", pool.pick(&mut r));
                flag(&mut a, "shape", shape);
                flag(&mut a, "out", pool.out(&mut r));
            }
            _ => {
                a.push("gemv".into());
                flag(&mut a, "format", f);
                flag(&mut a, "weight", pool.pick(&mut r));
                flag(&mut a, "shape", shape);
                flag(&mut a, "x", pool.pick(&mut r));
                flag(&mut a, "out", pool.out(&mut r));
            }
        }
        check(&a);
        runs += 1;
    }
    eprintln!("{runs} quantized runs");
}

#[test]
fn the_checker_sees_signals_and_nameless_errors() {
    // The harness itself must be able to fail: a clean run passes, an unknown subcommand is
    // clap's exit 2.
    assert_eq!(check(&["--version".into()]), 0);
    assert_eq!(check(&["no-such-command".into()]), 2);
    let _ = Path::new("");
}
