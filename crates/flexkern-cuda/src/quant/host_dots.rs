//! The integer dots of `kernels/quant_blocks.cuh` (`dot_q8` against Q8_0 activation codes,
//! `dot_q8k` against Q8_K ones: the bit tricks that assemble each format's codes for dp4a)
//! compiled for the host with g++ (`fk_dp4a` there is plain integer arithmetic) and checked
//! unit by unit against an f64 dot of flexkern-quant's dequantized weights with the codes'
//! values. A unit's error bound is a few ulps of its magnitude, far below one misplaced code's
//! share, so a wrong bit anywhere in a layout or an assembly fails here without a GPU.

use super::*;
use flexkern::verify::Rng;
use std::io::Write as _;
use std::process::{Command, Stdio};

/// `run<F, K>`: every unit's dot of n rows against the activation codes `xq` (k int8), with
/// per unit (K 0, Q8_0) its block's scale and code sum, or (K 1, Q8_K) the 256-block's scale
/// and the sums of 16.
const HARNESS: &str = r#"
template <class F, int K>
void run(const FkMat& m, i64 n, i64 k, const signed char* xq, const float* dx, const int* sums, float* out) {
  const i64 units = k / F::UE;
  for (i64 row = 0; row < n; ++row)
    for (i64 u = 0; u < units; ++u) {
      int x8[F::UE / 4];
      for (int i = 0; i < F::UE / 4; ++i) {
        u32 w = 0;
        for (int b = 0; b < 4; ++b) w |= (u32)(u8)xq[u * F::UE + 4 * i + b] << (8 * b);
        x8[i] = (int)w;
      }
      float v;
      if constexpr (K == 0) v = F::dot_q8(m, row, u, x8, dx[u * F::UE / 32], sums[u * F::UE / 32]);
      else v = F::dot_q8k(m, row, u, x8, dx[u * F::UE / 256], sums + u * F::UE / 16);
      out[row * units + u] = v;
    }
}
int main(int argc, char** argv) {
  FkHarness h;
  if (!h.open(argc, argv)) return 2;
  const i64 n = h.n, k = h.k;
  const FkMat& m = h.m;
  std::vector<signed char> xq(k);
  std::vector<float> dx(k / 32), out(n * k / 32);
  std::vector<int> sums(k / 16);
  if (fread(xq.data(), 1, k, stdin) != (size_t)k) return 3;
  if (fread(dx.data(), 4, k / 32, stdin) != (size_t)(k / 32)) return 3;
  if (fread(sums.data(), 4, k / 16, stdin) != (size_t)(k / 16)) return 3;
  i64 units = 0;
  switch (h.code) {
FK_CASES
    default: return 4;
  }
  fwrite(out.data(), 4, n * units, stdout);
  return 0;
}
"#;

/// The formats with an integer dot, their activations (0: Q8_0, 1: Q8_K) and a k they hold.
fn cases() -> Vec<(Format, u8)> {
    let mlx = |bits, group, s| Format::mlx(bits, group, s).expect("catalogued MLX format");
    vec![
        (Format::Q4_0, 0),
        (Format::Q8_0, 0),
        (mlx(4, 64, MlxScale::F16), 0),
        (mlx(4, 32, MlxScale::BF16), 0),
        (mlx(8, 128, MlxScale::F16), 0),
        (Format::Q4K, 1),
        (Format::Q6K, 1),
    ]
}

#[test]
fn integer_dots_match_f64_unit_by_unit_on_the_host() {
    if Command::new("g++").arg("--version").output().is_err() {
        eprintln!("integer_dots_match_f64_unit_by_unit_on_the_host: g++ not found, skipped");
        return;
    }
    let (n, k) = (3usize, 1024usize);
    let switch: String = cases()
        .iter()
        .enumerate()
        .map(|(i, (f, acts))| {
            let t = unit_type(*f, k).unwrap();
            format!(
                "    case {i}: run<{t}, {acts}>(m, n, k, xq.data(), dx.data(), sums.data(), out.data()); units = k / {t}::UE; break;\n"
            )
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("fk_int_dots_{}", std::process::id()));
    let exe = super::tests::host_harness(&dir, "dots", HARNESS, &switch);
    let mut rng = Rng::new(37);
    for (code, (f, acts)) in cases().into_iter().enumerate() {
        let w: Vec<f32> = (0..n * k).map(|_| rng.uniform() * 2.0 - 1.0).collect();
        let bytes = flexkern_quant::quantize(f, &w, n, k).unwrap();
        let deq = flexkern_quant::dequantize(f, &bytes, n, k).unwrap();
        // Activation codes over the whole int8 range (-127..127, as the quantizers give), a
        // scale per 32 (Q8_0: an f16 value) or per 256 (Q8_K), and the sums the dots take.
        let xq: Vec<i8> = (0..k)
            .map(|_| ((rng.uniform() * 255.0).floor() as i32 - 127).clamp(-127, 127) as i8)
            .collect();
        let per = if acts == 0 { 32 } else { 256 };
        let mut dx = vec![0.0f32; k / 32];
        for s in dx.iter_mut().take(k / per) {
            *s = half::f16::from_f32(0.001 + rng.uniform() * 0.02).to_f32();
        }
        let mut sums = vec![0i32; k / 16];
        let group = if acts == 0 { 32 } else { 16 };
        for (i, s) in sums.iter_mut().take(k / group).enumerate() {
            *s = xq[i * group..(i + 1) * group]
                .iter()
                .map(|&c| c as i32)
                .sum();
        }
        let g = layout::geometry(f, n, k);
        let dev = layout::to_device(f, &bytes).into_owned();
        let mut child = Command::new(&exe)
            .args([
                code.to_string(),
                n.to_string(),
                k.to_string(),
                g.row_bytes.to_string(),
                g.groups.to_string(),
                dev.len().to_string(),
                g.s.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = dev.clone();
        input.extend(xq.iter().map(|&c| c as u8));
        input.extend_from_slice(bytemuck::cast_slice(&dx));
        input.extend_from_slice(bytemuck::cast_slice(&sums));
        child.stdin.take().unwrap().write_all(&input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{f}: harness exited {}", out.status);
        let got: &[f32] = bytemuck::cast_slice(&out.stdout);
        let ue = unit_elems(f);
        assert_eq!(got.len(), n * k / ue, "{f}: output length");
        for (i, &v) in got.iter().enumerate() {
            let (row, u) = (i / (k / ue), i % (k / ue));
            let (mut exact, mut mag) = (0.0f64, 0.0f64);
            for e in u * ue..(u + 1) * ue {
                let p = deq[row * k + e] as f64 * xq[e] as f64 * dx[e / per] as f64;
                exact += p;
                mag += p.abs();
            }
            // The unit's integer sums are exact; a few roundings of its floats remain.
            let tol = 8.0 * f32::EPSILON as f64 * mag + 1e-30;
            assert!(
                v.is_finite() && (v as f64 - exact).abs() <= tol,
                "{f}: row {row} unit {u} dot {v} vs {exact} (tol {tol:e})"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
