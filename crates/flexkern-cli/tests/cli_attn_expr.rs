//! `flexkern attn --mask-expr / --score-expr / --capture / --tree`: each expression form gives
//! output identical (bit for bit) to the built-in option it restates, on random ragged inputs;
//! the tree mask matches the f64 oracle; bad expressions fail with their column.

use flexkern::builtins::tree;
use flexkern::npy;
use flexkern::verify::{rel_err, Rng};
use flexkern::{reference, AttentionArgs, TensorView, Variant};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A 1-D little-endian int64 .npy (the library writes only f32).
fn write_i64(path: &Path, data: &[i64]) {
    let mut header = format!(
        "{{'descr': '<i8', 'fortran_order': False, 'shape': ({},), }}",
        data.len()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for v in data {
        bytes.extend(v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

struct Case {
    dir: PathBuf,
    q: PathBuf,
    k: PathBuf,
    v: PathBuf,
}

impl Case {
    /// Runs `attn` on the shared inputs with `extra` arguments; returns (O, LSE) bits.
    fn run(&self, extra: &[&str]) -> (Vec<u32>, Vec<u32>) {
        let (out, lse) = (self.dir.join("o.npy"), self.dir.join("lse.npy"));
        let r = self.output(extra, &out, &lse);
        assert!(
            r.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let bits = |p: &Path| -> Vec<u32> {
            npy::read(p)
                .unwrap()
                .to_f32()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        (bits(&out), bits(&lse))
    }

    fn output(&self, extra: &[&str], out: &Path, lse: &Path) -> Output {
        Command::new(env!("CARGO_BIN_EXE_flexkern"))
            .arg("attn")
            .arg("--q")
            .arg(&self.q)
            .arg("--k")
            .arg(&self.k)
            .arg("--v")
            .arg(&self.v)
            .arg("--out")
            .arg(out)
            .arg("--lse")
            .arg(lse)
            .args(["--cu-q-lens", "0,5,12", "--cu-kv-lens", "0,25,40"])
            .args(extra)
            .output()
            .unwrap()
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

#[test]
fn expressions_match_the_builtins_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("flexkern-cli-expr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(7);
    let (hq, hkv, d) = (4, 2, 16);
    let mut random = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.uniform()).collect() };
    let (q, k, v) = (
        random(12 * hq * d),
        random(40 * hkv * d),
        random(40 * hkv * d),
    );
    let case = Case {
        q: dir.join("q.npy"),
        k: dir.join("k.npy"),
        v: dir.join("v.npy"),
        dir: dir.clone(),
    };
    npy::write_f32(&case.q, &[12, hq, d], &q).unwrap();
    npy::write_f32(&case.k, &[40, hkv, d], &k).unwrap();
    npy::write_f32(&case.v, &[40, hkv, d], &v).unwrap();
    // Document ids by position (positions run to 25 in the first sequence).
    let ids: Vec<i64> = (0..25).map(|p| p / 7).collect();
    write_i64(&dir.join("ids.npy"), &ids);
    let slopes = [0.5f32, 0.25, 0.125, 0.0625];
    npy::write_f32(&dir.join("slopes.npy"), &[hq], &slopes).unwrap();
    // Trees: sequence 0 (5 drafts) and sequence 1 (7 drafts), parents local to each.
    let parents = [-1i64, 0, 0, 1, 1, -1, 0, 1, 1, 0, 4, 5];
    write_i64(&dir.join("parents.npy"), &parents);
    let bits: Vec<i64> = {
        let mut b = vec![0i64; 12];
        for (s, e) in [(0usize, 5usize), (5, 12)] {
            for i in 0..e - s {
                let p = parents[s + i];
                b[s + i] = (1 << i) | if p < 0 { 0 } else { b[s + p as usize] };
            }
        }
        b
    };
    write_i64(&dir.join("bits.npy"), &bits);
    let (ids_p, slopes_p, parents_p, bits_p) = (
        case.path("ids.npy"),
        case.path("slopes.npy"),
        case.path("parents.npy"),
        case.path("bits.npy"),
    );
    let doc_builtin = format!("document:{ids_p}");
    let doc_cap = format!("doc={ids_p}");
    let slope_cap = format!("s={slopes_p}");
    let bits_cap = format!("bits={bits_p}");
    let pairs: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--mask", "causal"], vec!["--mask-expr", "kv_pos <= q_pos"]),
        (
            vec!["--mask", "causal", "--mask", "sliding:8"],
            vec!["--mask-expr", "kv_pos <= q_pos", "--mask-expr", "kv_pos > q_pos - 8"],
        ),
        (vec!["--mask", "causal", "--mask", "sliding:8"], vec!["--mask", "causal", "--mask-expr", "kv_pos > q_pos - 8"]),
        (vec!["--mask", "prefix-lm:9"], vec!["--mask-expr", "kv_pos <= q_pos || kv_pos < 9"]),
        (vec!["--mask", "chunked:4"], vec!["--mask-expr", "q_pos >= 0 && q_pos / 4 == kv_pos / 4"]),
        (vec!["--mask", "local:3:2"], vec!["--mask-expr", "kv_pos >= q_pos - 3 && kv_pos <= q_pos + 2"]),
        (
            vec!["--mask", &doc_builtin],
            vec!["--capture", &doc_cap, "--mask-expr", "doc[q_pos] == doc[kv_pos]"],
        ),
        (vec!["--softcap", "20"], vec!["--score-expr", "tanh(score / 20.0) * 20.0"]),
        (
            vec!["--mask", "causal", "--alibi", &slopes_p],
            vec!["--mask", "causal", "--capture", &slope_cap, "--score-expr", "score + s[h] * float(kv_pos - q_pos)"],
        ),
        (
            vec!["--tree", &parents_p],
            vec![
                "--capture",
                &bits_cap,
                "--mask-expr",
                "kv_pos < kv_len - q_len || (bits[q_token] >> (kv_pos - (kv_len - q_len)) & 1) == 1",
            ],
        ),
    ];
    for (builtin, expr) in &pairs {
        let a = case.run(builtin);
        let b = case.run(expr);
        assert!(a == b, "{builtin:?} vs {expr:?}: outputs differ");
    }

    // The tree mask against the f64 oracle with the same bits built in the library.
    let args = AttentionArgs::new(
        TensorView::contiguous(q.as_slice(), &[12, hq, d]),
        TensorView::contiguous(k.as_slice(), &[40, hkv, d]),
        TensorView::contiguous(v.as_slice(), &[40, hkv, d]),
    )
    .ragged(&[0, 5, 12], &[0, 25, 40])
    .variant(Variant::full().mask(tree(bits.clone())));
    let (_, want) = reference::of_args(&args).unwrap();
    case.run(&["--tree", &parents_p]);
    let o = npy::read(&dir.join("o.npy")).unwrap().to_f32();
    assert!(
        rel_err(&o, &want.o) <= 1e-5,
        "tree: {}",
        rel_err(&o, &want.o)
    );

    // Errors: named column, non-zero exit, no output written.
    let bad = dir.join("bad.npy");
    for (extra, needle) in [
        (
            vec!["--mask-expr", "(q_pos < kv_pos"],
            "column 16: expected `)`",
        ),
        (vec!["--mask-expr", "q_pos && 1"], "column 7"),
        (vec!["--score-expr", "score > 0"], "must be a number"),
        (
            vec!["--mask-expr", "nope[q_pos] == 1"],
            "unknown name `nope`",
        ),
        (vec!["--capture", "x"], "NAME=FILE.npy"),
        (vec!["--tree", &ids_p], "parents"),
    ] {
        let r = case.output(&extra, &bad, &dir.join("bad_lse.npy"));
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(
            !r.status.success() && err.contains(needle),
            "{extra:?}: {err}"
        );
        assert!(!bad.exists());
    }
    std::fs::remove_dir_all(&dir).ok();
}
