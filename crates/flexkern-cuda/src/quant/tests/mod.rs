//! Checks that need no GPU: every format's unit decode compiled for the host with g++ against
//! flexkern-quant's `dequantize` (bit for bit) and its dot against an f64 dot over those
//! weights; every kernel configuration compiled by NVRTC for sm_90a with ptxas's register and
//! spill report. Each skips with a message when its compiler is missing.

use super::*;
use flexkern::verify::Rng;
use std::io::Write as _;
use std::process::{Command, Stdio};

mod plan;

/// The host harness: `run<F>` decodes every unit of n rows exactly and dots each row with x.
const HARNESS: &str = r#"
template <class F>
void run(const FkMat& m, i64 n, i64 k, const float* x, float* deq, float* dot) {
  const i64 units = k / F::UE;
  for (i64 row = 0; row < n; ++row) {
    float acc = 0.0f;
    for (i64 u = 0; u < units; ++u) {
      float q[F::UE], s[F::G], o[F::G];
      F::unit(m, row, u, q, s, o);
      fk_unit_decode<F>(q, s, o, deq + row * k + u * F::UE);
      acc += fk_unit_dot<F>(q, s, o, FkXArr{x + u * F::UE});
    }
    if constexpr (FkHasTail<F>::value) {
      for (i64 e = units * F::UE; e < k; ++e) {
        deq[row * k + e] = F::elem(m, row, e);
        acc += deq[row * k + e] * x[e];
      }
    }
    dot[row] = acc;
  }
}
int main(int argc, char** argv) {
  FkHarness h;
  if (!h.open(argc, argv)) return 2;
  const i64 n = h.n, k = h.k;
  const FkMat& m = h.m;
  std::vector<float> x(k), deq(n * k), dot(n);
  if (fread(x.data(), 4, k, stdin) != (size_t)k) return 3;
  switch (h.code) {
FK_CASES
    default: return 4;
  }
  fwrite(deq.data(), 4, n * k, stdout);
  fwrite(dot.data(), 4, n, stdout);
  return 0;
}
"#;

/// What every host harness's `main` starts with: the case code and shape from its arguments
/// (code, n, k, row bytes, side groups, weight bytes, side offset), then the weights in the
/// device layout from stdin.
const HARNESS_ARGS: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <vector>
struct FkHarness {
  int code = 0;
  i64 n = 0, k = 0;
  std::vector<u8> w;
  FkMat m{};
  bool open(int argc, char** argv) {
    if (argc != 8) return false;
    code = atoi(argv[1]);
    n = atoll(argv[2]), k = atoll(argv[3]);
    const i64 row_bytes = atoll(argv[4]), groups = atoll(argv[5]), wbytes = atoll(argv[6]),
              soff = atoll(argv[7]);
    w.resize(wbytes + 64);
    if (fread(w.data(), 1, wbytes, stdin) != (size_t)wbytes) return false;
    m = FkMat{w.data(), w.data() + soff, row_bytes, groups};
    return true;
  }
};
"#;

/// `harness` (a C++ `main` whose `FK_CASES` becomes `cases`) after the generated layout header
/// and the unit types, compiled by g++ as the host checks need it (no FMA contraction) into
/// `dir`; the executable's path. Shared by this file's decode check and `host_dots.rs`.
pub(super) fn host_harness(
    dir: &std::path::Path,
    name: &str,
    harness: &str,
    cases: &str,
) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let (src, exe) = (dir.join(format!("{name}.cpp")), dir.join(name));
    let text = format!(
        "{}\n{}\n{}\n{}",
        layout::header().replace("#pragma once", ""),
        BLOCKS.replace("#pragma once", ""),
        HARNESS_ARGS,
        harness.replace("FK_CASES", cases)
    );
    std::fs::write(&src, text).unwrap();
    let out = Command::new("g++")
        .args(["-std=c++17", "-O1", "-ffp-contract=off", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("g++ runs");
    assert!(
        out.status.success(),
        "{name}: harness compile failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Random weights with rows at three magnitudes (tiny ones give subnormal f16 scales).
fn weights(rng: &mut Rng, n: usize, k: usize) -> Vec<f32> {
    (0..n * k)
        .map(|i| {
            let mag = [1.0f32, 1e-6, 30.0][(i / k) % 3];
            (rng.uniform() * 2.0 - 1.0) * mag
        })
        .collect()
}

#[test]
fn unit_decode_matches_flexkern_quant_on_the_host() {
    if Command::new("g++").arg("--version").output().is_err() {
        eprintln!("unit_decode_matches_flexkern_quant_on_the_host: g++ not found, skipped");
        return;
    }
    // Every format at a K it holds; plain floats also at odd K (the tail) and unaligned rows.
    let mut cases: Vec<(Format, String, usize)> = Vec::new();
    for f in gpu_formats() {
        let qk = f.block_elems().max(32);
        let ks: Vec<usize> = match f {
            Format::F32 | Format::F16 | Format::BF16 => vec![37, 40, 64],
            _ => vec![2 * qk.max(256) / qk * qk],
        };
        for k in ks {
            cases.push((f, unit_type(f, k).unwrap(), k));
        }
    }
    let mut types: Vec<(Format, String)> = Vec::new();
    for (f, t, _) in &cases {
        if !types.iter().any(|(_, u)| u == t) {
            types.push((*f, t.clone()));
        }
    }
    let dir = std::env::temp_dir().join(format!("fk_quant_harness_{}", std::process::id()));
    let switch: String = types
        .iter()
        .enumerate()
        .map(|(i, (_, t))| {
            format!("    case {i}: run<{t}>(m, n, k, x.data(), deq.data(), dot.data()); break;\n")
        })
        .collect();
    let t0 = std::time::Instant::now();
    let exe = host_harness(&dir, "harness", HARNESS, &switch);
    eprintln!(
        "harness: {} unit types compiled in {:.1} s",
        types.len(),
        t0.elapsed().as_secs_f64()
    );
    let mut rng = Rng::new(14);
    let n = 3;
    for (f, t, k) in &cases {
        let code = types.iter().position(|(_, u)| u == t).unwrap();
        let w = weights(&mut rng, n, *k);
        let bytes = flexkern_quant::quantize(*f, &w, n, *k).unwrap();
        let want = flexkern_quant::dequantize(*f, &bytes, n, *k).unwrap();
        let x: Vec<f32> = (0..*k).map(|_| rng.uniform() * 2.0 - 1.0).collect();
        // The device layout (planar formats rearranged) and its geometry, as upload makes them.
        let g = layout::geometry(*f, n, *k);
        let (row_bytes, groups, soff) = (g.row_bytes, g.groups, g.s);
        let bytes = layout::to_device(*f, &bytes).into_owned();
        let mut child = Command::new(&exe)
            .args([
                code.to_string(),
                n.to_string(),
                k.to_string(),
                row_bytes.to_string(),
                groups.to_string(),
                bytes.len().to_string(),
                soff.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = bytes.clone();
        input.extend_from_slice(bytemuck::cast_slice(&x));
        child.stdin.take().unwrap().write_all(&input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{f} ({t}): harness exited {}",
            out.status
        );
        let got: &[f32] = bytemuck::cast_slice(&out.stdout);
        assert_eq!(got.len(), n * k + n, "{f}: output length");
        let (deq, dot) = got.split_at(n * k);
        for (i, (g, w)) in deq.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{f} ({t}) k={k}: weight {i} (row {}, col {}) decodes to {g}, flexkern-quant {w}",
                i / k,
                i % k
            );
        }
        for r in 0..n {
            let row = &want[r * k..(r + 1) * k];
            let exact: f64 = row.iter().zip(&x).map(|(&a, &b)| a as f64 * b as f64).sum();
            let mag: f64 = row
                .iter()
                .zip(&x)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            // Any f32 summation order of k products: (k + 8) ulps of the magnitude sum.
            let tol = (*k as f64 + 8.0) * f32::EPSILON as f64 * mag;
            let err = (dot[r] as f64 - exact).abs();
            assert!(
                err <= tol && dot[r].is_finite(),
                "{f} ({t}) k={k}: row {r} dot {} vs {exact} (err {err:e}, tol {tol:e})",
                dot[r]
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every format's kernels compile for sm_90a without spilling or a stack frame (local
/// memory). By default a representative set (every fixed format's single-row GEMV, the
/// largest-register configurations, a few embeddings); `FK_GEMV_COMPILE_ALL=1` compiles every format in every configuration verify
/// uses (312 modules, 331 s on two busy cores). Last full run (NVRTC 13, sm_90a): no spills and
/// no stack frame anywhere; registers 46-128 for the single-row GEMVs (128 is the launch bounds'
/// cap), 70-127 single-row gate+up, 102-168 plain MB 16, 116-224 gate+up MB 16, 91-200
/// down-with-SwiGLU MB 16, 26-80 embeddings; the slowest module 9.9 s (down, MB 16).
#[test]
fn kernels_compile_with_nvrtc_without_spills() {
    if !crate::runtime::nvrtc_present() {
        eprintln!("kernels_compile_with_nvrtc_without_spills: libnvrtc not found, skipped");
        return;
    }
    let all = std::env::var("FK_GEMV_COMPILE_ALL").is_ok_and(|v| v == "1");
    let heavy = [
        Format::F32,
        Format::F16,
        Format::Q5K,
        Format::Q4K,
        Format::Q6K,
        Format::Q4_0,
        Format::Q8_0,
    ];
    let mut report = Vec::new();
    for f in gpu_formats() {
        let mlx = matches!(f, Format::MlxAffine { .. });
        // MLX: a width of the float path, and the integer dot's two widths (both scale types).
        let mlx_kept = [
            Format::mlx(3, 32, flexkern_quant::MlxScale::F16).unwrap(),
            Format::mlx(4, 64, flexkern_quant::MlxScale::F16).unwrap(),
            Format::mlx(8, 32, flexkern_quant::MlxScale::BF16).unwrap(),
        ];
        if !all && mlx && !mlx_kept.contains(&f) {
            continue;
        }
        let k = 4096;
        let unit = unit_type(f, k).unwrap();
        let mut srcs = Vec::new();
        if all || matches!(f, Format::F16 | Format::Q3K | Format::MlxAffine { .. }) {
            srcs.push(embed_source(&unit));
        }
        for (mb, rows, mode) in [
            (1, 2, Mode::Plain),
            (1, 1, Mode::GateUp),
            (1, 1, Mode::Stack),
            (16, 1, Mode::Plain),
            (16, 1, Mode::GateUp),
            (16, 1, Mode::DownSwiglu),
        ] {
            if !all
                && (mb, mode) != (1, Mode::Plain)
                && !heavy.contains(&f)
                && !mlx_kept.contains(&f)
            {
                continue;
            }
            let staged = crate::quant::choose::staged(f, mb);
            // Stacked launches: the streamed kernel (below) and the direct one.
            let direct = if mode == Mode::Stack {
                vec![None]
            } else {
                vec![None, staged]
            };
            for staged in direct.into_iter().collect::<std::collections::HashSet<_>>() {
                let cfg = GemvConfig {
                    unit: unit.clone(),
                    mb,
                    rows,
                    mode,
                    xvec: true,
                    staged,
                    dp4a: false,
                    stream: None,
                    acc: false,
                    rope: false,
                    norm: false,
                    unroll: if staged.is_none() {
                        crate::quant::choose::direct_unroll(f, mb)
                    } else {
                        1
                    },
                    xs: staged.is_none() && crate::quant::choose::direct_stages_x(f, mb, k),
                };
                // The integer-dot form where it applies (Q8_0 / Q4_0, staged, not down).
                if staged.is_some() && crate::quant::choose::dp4a_applies(f, mode, k) {
                    srcs.push(
                        GemvConfig {
                            dp4a: true,
                            ..cfg.clone()
                        }
                        .source(),
                    );
                }
                if staged.is_none() {
                    // Single rows normalized in the kernel (FK_DNORM).
                    let dnorm = crate::quant::choose::direct_normalizes(f);
                    if mb == 1 && mode != Mode::DownSwiglu && dnorm {
                        srcs.push(
                            GemvConfig {
                                norm: true,
                                rows: 1,
                                ..cfg.clone()
                            }
                            .source(),
                        );
                    }
                }
                // Plain products also add into y (the residual add in the epilogue).
                if mode == Mode::Plain {
                    srcs.push(
                        GemvConfig {
                            acc: true,
                            ..cfg.clone()
                        }
                        .source(),
                    );
                }
                srcs.push(cfg.source());
            }
            // The streamed single-row kernel, with f32 and (where the format has the integer
            // dot) Q8_0 activations, at a short and a long row (MLX: the integer dot only).
            if mb == 1 && mode != Mode::DownSwiglu && (staged.is_some() || mlx) {
                for (k, quantized) in [(4096, false), (14336, false), (4096, true), (14336, true)] {
                    if quantized && crate::quant::StreamActs::for_format(f).is_none() {
                        continue;
                    }
                    let nm = if mode == Mode::GateUp { 2 } else { 1 };
                    let hopper = crate::quant::choose::GemvTarget::hopper();
                    let plans = crate::quant::Stream::plan(f, k, nm, quantized, 233472).map(|st| {
                        [
                            st,
                            st.with_bulk(f, mode, 14336, k, nm, &hopper),
                            st.for_device(f, mode, 14336, k, nm, &hopper),
                        ]
                    });
                    // The register batches and, where Hopper takes them, the bulk ring and the
                    // clusters.
                    for st in plans
                        .into_iter()
                        .flatten()
                        .collect::<std::collections::HashSet<_>>()
                    {
                        // Stacked Q, K, V also with RoPE and the KV append in the epilogue.
                        let ropes: &[bool] = if mode == Mode::Stack {
                            &[false, true]
                        } else {
                            &[false]
                        };
                        for &rope in ropes {
                            srcs.push(
                                GemvConfig {
                                    unit: unit.clone(),
                                    mb,
                                    rows: 1,
                                    mode,
                                    xvec: true,
                                    staged,
                                    dp4a: quantized,
                                    stream: Some(st),
                                    acc: mode == Mode::Plain,
                                    rope,
                                    norm: false,
                                    unroll: 1,
                                    xs: false,
                                }
                                .source(),
                            );
                        }
                    }
                }
            }
        }
        let mut spilled = Vec::new();
        for src in srcs {
            let t = std::time::Instant::now();
            let (bin, log) = crate::runtime::compile::compile_verbose(&src, "sm_90a")
                .unwrap_or_else(|e| panic!("{}: {e}", src.name));
            assert!(!bin.is_empty());
            // FK_DUMP=dir keeps every cubin (comparing a change's SASS module by module).
            if let Ok(dir) = std::env::var("FK_DUMP") {
                std::fs::write(format!("{dir}/{}.cubin", src.name), &bin).unwrap();
            }
            let (regs, spills, stack) = crate::runtime::compile::ptxas_resources(&log);
            report.push(format!(
                "{}: {regs} registers, {spills} spill bytes, {stack} stack bytes, {:.0} ms",
                src.name,
                t.elapsed().as_secs_f64() * 1e3
            ));
            if spills + stack > 0 {
                spilled.push(format!("{}: {log}", src.name));
            }
        }
        // Every spilling module named at once, not only the first.
        assert!(
            spilled.is_empty(),
            "modules that spill or use a stack:\n{}",
            spilled.join("\n")
        );
    }
    for r in &report {
        eprintln!("{r}");
    }
}

#[test]
fn bad_formats_and_shapes_are_typed_errors() {
    assert!(unit_type(Format::Q8K, 256)
        .unwrap_err()
        .to_string()
        .contains("format"));
    assert!(unit_type(Format::Q4_0, 48)
        .unwrap_err()
        .to_string()
        .contains("`k`"));
    assert!(unit_type(Format::F16, 0).is_err());
    assert_eq!(unit_type(Format::F16, 37).unwrap(), "FkFloat<1, 2>");
    assert_eq!(unit_type(Format::F32, 37).unwrap(), "FkFloat<0, 4>");
    assert_eq!(unit_type(Format::BF16, 4096).unwrap(), "FkFloat<2, 16>");
}

/// Development aid: compiles the module `FK_GEMV_SCRATCH` names (a .cu file) and prints
/// ptxas's report. Ignored by default.
#[test]
#[ignore]
fn scratch_compile() {
    let Ok(path) = std::env::var("FK_GEMV_SCRATCH") else {
        return;
    };
    let body = std::fs::read_to_string(path).unwrap();
    let src = crate::runtime::compile::KernelSource {
        name: "scratch".into(),
        source: body.replace("FK_PRELUDE", &prelude()),
    };
    match crate::runtime::compile::compile_verbose(&src, "sm_90a") {
        Ok((_, log)) => eprintln!("{log}"),
        Err(e) => eprintln!("{e}"),
    }
}

/// Not a check: writes the streamed single-row GEMV's cubin (plain, Q8_0 or Q8_K activations,
/// the plan for `FK_DUMP_N` x `FK_DUMP_K`, default 14336 x 4096) for each format
/// `FK_DUMP_FORMATS` names (default q4_0,q4_k,q6_k,q8_0) into `$FK_DUMP`, for reading its SASS
/// with nvdisasm. Run: `FK_DUMP=dir cargo test
/// --release -p flexkern-cuda --lib dump_gemv_cubins -- --ignored --nocapture` (needs libnvrtc).
#[test]
#[ignore]
fn dump_gemv_cubins() {
    let Ok(dir) = std::env::var("FK_DUMP") else {
        eprintln!("dump_gemv_cubins: set FK_DUMP to a directory");
        return;
    };
    let names = std::env::var("FK_DUMP_FORMATS").unwrap_or("q4_0,q4_k,q6_k,q8_0".into());
    let k: usize = std::env::var("FK_DUMP_K").map_or(4096, |v| v.parse().unwrap());
    let n: usize = std::env::var("FK_DUMP_N").map_or(14336, |v| v.parse().unwrap());
    // FK_DUMP_MODE: plain (default), gateup, stack (with RoPE) or acc (plain, y +=).
    let how = std::env::var("FK_DUMP_MODE").unwrap_or("plain".into());
    let mode = match how.as_str() {
        "gateup" => Mode::GateUp,
        "stack" => Mode::Stack,
        _ => Mode::Plain,
    };
    for name in names.split(',') {
        let f: Format = name.parse().unwrap();
        let hopper = crate::quant::choose::GemvTarget::hopper();
        let st = crate::quant::Stream::plan(f, k, mode.matrices(), true, hopper.smem_per_sm)
            .unwrap()
            .for_device(f, mode, n, k, mode.matrices(), &hopper);
        let mut cfg = GemvConfig::streamed(f, k, mode, Some(st)).unwrap();
        cfg.rope = how == "stack";
        cfg.acc = how == "acc";
        let src = cfg.source();
        let (bin, log) = crate::runtime::compile::compile_verbose(&src, "sm_90a").unwrap();
        let (regs, spills, stack) = crate::runtime::compile::ptxas_resources(&log);
        eprintln!(
            "{}: {regs} registers, {spills} spills, {stack} stack",
            src.name
        );
        std::fs::write(format!("{dir}/{}.cubin", src.name), bin).unwrap();
    }
}
