//! `flexkern attn` end to end: .npy files in, O / LSE out, checked against the f64 oracle on
//! the same inputs, through the contiguous and the paged (shuffled, quantized) paths.

use flexkern::builtins::{alibi, causal, sliding_window, softcap};
use flexkern::npy;
use flexkern::verify::{rel_err, Rng};
use flexkern::{reference, AttentionArgs, TensorView, Variant};
use std::path::{Path, PathBuf};
use std::process::Command;

fn write(dir: &Path, name: &str, shape: &[usize], data: &[f32]) -> PathBuf {
    let p = dir.join(name);
    npy::write_f32(&p, shape, data).unwrap();
    p
}

fn random(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.uniform()).collect()
}

#[test]
fn attn_command_matches_the_oracle() {
    let dir = std::env::temp_dir().join(format!("flexkern-cli-attn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(42);
    let (hq, hkv, d) = (4, 2, 16);
    let (cu_q, cu_kv) = ([0u64, 5, 12], [0u64, 25, 40]);
    let (q, k, v) = (
        random(&mut rng, 12 * hq * d),
        random(&mut rng, 40 * hkv * d),
        random(&mut rng, 40 * hkv * d),
    );
    let slopes = vec![0.5f32, 0.25, 0.125, 0.0625];
    let sinks = vec![0.3f32, -0.2, 1.0, 0.0];
    let files = [
        write(&dir, "q.npy", &[12, hq, d], &q),
        write(&dir, "k.npy", &[40, hkv, d], &k),
        write(&dir, "v.npy", &[40, hkv, d], &v),
        write(&dir, "alibi.npy", &[hq], &slopes),
        write(&dir, "sinks.npy", &[hq], &sinks),
    ];
    let variant = Variant::full()
        .mask(causal())
        .mask(sliding_window(8))
        .score(softcap(20.0))
        .score(alibi(slopes.clone()))
        .sinks(sinks.clone());
    let args = AttentionArgs::new(
        TensorView::contiguous(q.as_slice(), &[12, hq, d]),
        TensorView::contiguous(k.as_slice(), &[40, hkv, d]),
        TensorView::contiguous(v.as_slice(), &[40, hkv, d]),
    )
    .ragged(&cu_q, &cu_kv)
    .variant(variant);
    let (_, want) = reference::of_args(&args).unwrap();

    let bin = env!("CARGO_BIN_EXE_flexkern");
    for (extra, tol) in [
        (vec![], 1e-5),
        (vec!["--page-size", "3"], 1e-5),
        (vec!["--page-size", "16", "--kv-dtype", "fp8e4m3"], 0.15),
    ] {
        let (out, lse) = (dir.join("o.npy"), dir.join("lse.npy"));
        let _ = std::fs::remove_file(&out);
        let status = Command::new(bin)
            .args(["attn", "--q"])
            .arg(&files[0])
            .arg("--k")
            .arg(&files[1])
            .arg("--v")
            .arg(&files[2])
            .arg("--out")
            .arg(&out)
            .arg("--lse")
            .arg(&lse)
            .args([
                "--cu-q-lens",
                "0,5,12",
                "--cu-kv-lens",
                "0,25,40",
                "--mask",
                "causal",
                "--mask",
                "sliding:8",
                "--softcap",
                "20",
            ])
            .arg("--alibi")
            .arg(&files[3])
            .arg("--sinks")
            .arg(&files[4])
            .args(&extra)
            .status()
            .unwrap();
        assert!(status.success(), "{extra:?}");
        let o = npy::read(&out).unwrap();
        assert_eq!(o.shape, vec![12, hq, d]);
        let l = npy::read(&lse).unwrap();
        assert_eq!(l.shape, vec![12, hq]);
        // fp8 KV is compared loosely here: its exact check against the oracle on the
        // dequantized cache lives in the library's paged tests.
        assert!(
            rel_err(&o.to_f32(), &want.o) <= tol,
            "{extra:?}: O error {}",
            rel_err(&o.to_f32(), &want.o)
        );
        assert!(
            rel_err(&l.to_f32(), &want.lse) <= tol,
            "{extra:?}: LSE error"
        );
    }

    // Bad input: a clear error and a non-zero exit, no output file.
    let out = dir.join("bad.npy");
    let r = Command::new(bin)
        .args(["attn", "--q"])
        .arg(&files[0])
        .arg("--k")
        .arg(&files[1])
        .arg("--v")
        .arg(&files[2])
        .arg("--out")
        .arg(&out)
        .args(["--mask", "sliding:x"])
        .output()
        .unwrap();
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("sliding"));
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).ok();
}
