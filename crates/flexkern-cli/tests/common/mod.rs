//! What the binary's tests share: running `flexkern` with a deadline (a signal or a hang fails
//! the test) and a scratch directory per test process.
#![allow(dead_code)] // each test file uses part of it

use flexkern_gguf::{GgmlType, GgufWriter, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary with no model cache in reach and `configure` applied to the command (env,
/// working directory); returns (exit code, stdout, stderr). A signal or a run past `deadline`
/// fails the test.
pub fn flexkern_with(
    args: &[&str],
    deadline: Duration,
    configure: impl FnOnce(&mut Command),
) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flexkern"));
    cmd.args(args)
        .env("FLEXKERN_CACHE", "/nonexistent")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    configure(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > deadline {
            let _ = child.kill();
            panic!("flexkern {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("flexkern {args:?} died by a signal: {:?}", out.status));
    let s = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (code, s(out.stdout), s(out.stderr))
}

/// [`flexkern_with`] with a 5-minute deadline and nothing else configured.
pub fn flexkern(args: &[&str]) -> (i32, String, String) {
    flexkern_with(args, Duration::from_secs(300), |_| {})
}

/// A fresh directory `flexkern-<name>-<pid>` under the system's temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flexkern-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The shape of [`tiny_llama`]'s model.
pub struct Tiny {
    pub layers: u32,
    pub d: u64,
    pub ff: u64,
    pub heads: u32,
    pub kv_heads: u32,
    pub context: u32,
    pub seed: u32,
}

/// Writes a tiny llama with an SPM byte tokenizer (bytes + a few pieces) and random f32
/// weights; the EOS row of the tied output is zero (logit 0, below the best of the others), so
/// greedy decoding does not stop early.
pub fn tiny_llama(path: &Path, t: &Tiny) {
    let mut tokens: Vec<String> = vec!["<s>".into(), "</s>".into()];
    let mut types = vec![3, 3];
    tokens.extend((0..256).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    tokens.extend(["▁", "h", "i", "▁h", "▁hi"].map(String::from));
    types.resize(tokens.len(), 1);
    let vocab = tokens.len() as u64;
    let (d, ff) = (t.d, t.ff);
    let dkv = d * t.kv_heads as u64 / t.heads as u64;
    let mut w = GgufWriter::new();
    let meta: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.block_count", Value::U32(t.layers)),
        ("llama.embedding_length", Value::U32(d as u32)),
        ("llama.feed_forward_length", Value::U32(ff as u32)),
        ("llama.attention.head_count", Value::U32(t.heads)),
        ("llama.attention.head_count_kv", Value::U32(t.kv_heads)),
        ("llama.context_length", Value::U32(t.context)),
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", Value::str_array(&tokens)),
        ("tokenizer.ggml.token_type", Value::i32_array(&types)),
        (
            "tokenizer.ggml.scores",
            Value::f32_array(&vec![-1.0; vocab as usize]),
        ),
        ("tokenizer.ggml.bos_token_id", Value::U32(0)),
        ("tokenizer.ggml.eos_token_id", Value::U32(1)),
    ];
    for (k, v) in meta {
        w.add_metadata(k, v).unwrap();
    }
    let mut seed = t.seed;
    let mut add = |name: &str, dims: &[u64], zero_row: Option<usize>| {
        let n: u64 = dims.iter().product();
        let mut vals: Vec<f32> = (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect();
        if let Some(r) = zero_row {
            vals[r * dims[0] as usize..(r + 1) * dims[0] as usize].fill(0.0);
        }
        let bytes = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.add_tensor(name, dims, GgmlType::F32, bytes).unwrap();
    };
    add("token_embd.weight", &[d, vocab], Some(1));
    add("output_norm.weight", &[d], None);
    for l in 0..t.layers {
        let n = |t: &str| format!("blk.{l}.{t}");
        add(&n("attn_norm.weight"), &[d], None);
        add(&n("attn_q.weight"), &[d, d], None);
        add(&n("attn_k.weight"), &[d, dkv], None);
        add(&n("attn_v.weight"), &[d, dkv], None);
        add(&n("attn_output.weight"), &[d, d], None);
        add(&n("ffn_norm.weight"), &[d], None);
        add(&n("ffn_gate.weight"), &[d, ff], None);
        add(&n("ffn_up.weight"), &[d, ff], None);
        add(&n("ffn_down.weight"), &[ff, d], None);
    }
    std::fs::write(path, w.to_bytes()).unwrap();
}
