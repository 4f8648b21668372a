//! `flexkern run --prompt-file FILE --parallel N` through the binary on a tiny random model:
//! output grouped per prompt in file order, each prompt's greedy text equal to `run --prompt`
//! of that line alone (and its token ids, `--json`), the baseline run reported, and bad
//! combinations refused by name.

mod common;

use common::flexkern;
use flexkern_gguf::{GgmlType, GgufWriter, Value};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    common::scratch("parallel")
}

/// A 2-layer llama with an SPM byte tokenizer and random f32 weights; the EOS row of the tied
/// output is zero so greedy decoding does not stop early.
fn tiny_model(path: &Path) {
    let mut tokens: Vec<String> = vec!["<s>".into(), "</s>".into()];
    let mut types = vec![3, 3];
    tokens.extend((0..256).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    tokens.extend(["▁", "h", "i", "▁h", "▁hi"].map(String::from));
    types.resize(tokens.len(), 1);
    let vocab = tokens.len() as u64;
    let (d, ff) = (32u64, 64u64);
    let mut w = GgufWriter::new();
    let meta: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.block_count", Value::U32(2)),
        ("llama.embedding_length", Value::U32(d as u32)),
        ("llama.feed_forward_length", Value::U32(ff as u32)),
        ("llama.attention.head_count", Value::U32(4)),
        ("llama.attention.head_count_kv", Value::U32(2)),
        ("llama.context_length", Value::U32(128)),
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
    let mut seed = 9u32;
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
    for l in 0..2 {
        let n = |t: &str| format!("blk.{l}.{t}");
        add(&n("attn_norm.weight"), &[d], None);
        add(&n("attn_q.weight"), &[d, d], None);
        add(&n("attn_k.weight"), &[d, d / 2], None);
        add(&n("attn_v.weight"), &[d, d / 2], None);
        add(&n("attn_output.weight"), &[d, d], None);
        add(&n("ffn_norm.weight"), &[d], None);
        add(&n("ffn_gate.weight"), &[d, ff], None);
        add(&n("ffn_up.weight"), &[d, ff], None);
        add(&n("ffn_down.weight"), &[ff, d], None);
    }
    std::fs::write(path, w.to_bytes()).unwrap();
}

#[test]
fn parallel_output_is_grouped_and_equals_each_prompt_alone() {
    let d = dir();
    let model = d.join("tiny.gguf");
    tiny_model(&model);
    let m = model.display().to_string();
    let lines = ["hi", "h", "hi hi hi hi hi hi hi", "i h i"];
    let file = d.join("prompts.txt");
    // A blank line is not a prompt.
    std::fs::write(
        &file,
        format!("{}\n\n{}\n{}\n{}\n", lines[0], lines[1], lines[2], lines[3]),
    )
    .unwrap();
    let f = file.display().to_string();
    let common = ["-n", "12", "--temperature", "0", "--ctx", "64"];
    let run = |extra: &[&str]| {
        let mut a = vec!["run", "--model", &m];
        a.extend_from_slice(&common);
        a.extend_from_slice(extra);
        let (c, out, err) = flexkern(&a);
        assert_eq!(c, 0, "{a:?}: {err}");
        (out, err)
    };
    let (out, err) = run(&["--prompt-file", &f, "--parallel", "3", "--chunk", "2"]);
    assert!(
        err.contains("--parallel 3:") && err.contains("at most 3 active"),
        "{err}"
    );
    assert!(
        err.contains("speed-up") && err.contains("outputs identical"),
        "{err}"
    );
    let blocks: Vec<&str> = out.split("=== prompt ").skip(1).collect();
    assert_eq!(blocks.len(), lines.len(), "{out}");
    for (i, (block, line)) in blocks.iter().zip(lines).enumerate() {
        let head = format!("{} ===\n", i + 1);
        let text = block.strip_prefix(&head).unwrap_or_else(|| panic!("{out}"));
        let (alone, _) = run(&["--prompt", line]);
        assert_eq!(text, alone, "prompt {i}");
    }
    // The same through token ids: the text above is mostly U+FFFD for random bytes.
    let (json, _) = run(&[
        "--prompt-file",
        &f,
        "--parallel",
        "3",
        "--chunk",
        "2",
        "--json",
    ]);
    let json: Vec<&str> = json.lines().collect();
    assert_eq!(json.len(), lines.len());
    for (i, (got, line)) in json.iter().zip(lines).enumerate() {
        let (alone, _) = run(&["--prompt", line, "--json"]);
        let ids = |s: &str, key: &str| {
            let at = s.find(key).unwrap_or_else(|| panic!("{key} in {s}")) + key.len();
            s[at..at + s[at..].find(']').unwrap()].to_string()
        };
        assert!(got.starts_with(&format!("{{\"prompt\":{i},")), "{got}");
        assert_eq!(
            ids(got, "\"ids\":["),
            ids(&alone, "\"ids\":["),
            "prompt {i}"
        );
        assert_eq!(ids(got, "\"ids\":[").split(',').count(), 12, "{got}");
        assert_eq!(ids(got, "prompt_ids\":["), ids(&alone, "prompt_ids\":["));
    }
    let (one, err) = run(&["--prompt-file", &f, "--parallel", "1"]);
    assert_eq!(one, out);
    assert!(
        !err.contains("speed-up") && !err.contains("KV cache is full"),
        "{err}"
    );
    // Room for 16 positions: the longest prompt stops early, and it says so.
    let (c, _, err) = flexkern(&[
        "run",
        "--model",
        &m,
        "-n",
        "12",
        "--temperature",
        "0",
        "--ctx",
        "16",
        "--prompt-file",
        &f,
        "--parallel",
        "2",
    ]);
    assert_eq!(c, 0, "{err}");
    assert!(
        err.contains("prompt(s) stopped") && err.contains("--ctx 16"),
        "{err}"
    );
    // Without --parallel the file is one prompt, as before.
    let (whole, _) = run(&["--prompt-file", &f]);
    assert!(!whole.contains("=== prompt"), "{whole}");
    assert!(whole.starts_with("hi\n\nh\n"), "{whole}");
}

#[test]
fn parallel_bad_combinations_are_named() {
    let d = dir();
    let model = d.join("tiny-bad.gguf");
    tiny_model(&model);
    let m = model.display().to_string();
    let file = d.join("p.txt");
    std::fs::write(&file, "hi\nh\n").unwrap();
    let f = file.display().to_string();
    let blank = d.join("blank.txt");
    std::fs::write(&blank, "\n  \n").unwrap();
    let b = blank.display().to_string();
    for (args, needle) in [
        (vec!["--prompt-file", &f, "--parallel", "0"], "--parallel"),
        (vec!["--prompt", "hi", "--parallel", "2"], "--prompt-file"),
        (
            vec!["--prompt-file", &f, "--parallel", "2", "--chunk", "0"],
            "--chunk",
        ),
        (
            vec!["--prompt-file", &f, "--parallel", "2", "--tokenize-only"],
            "--tokenize-only",
        ),
        (vec!["--prompt-file", &b, "--parallel", "2"], "no prompts"),
        (vec!["--prompt-file", &f, "--chunk", "4"], "--parallel"),
    ] {
        let mut a = vec!["run", "--model", &m];
        a.extend_from_slice(&args);
        let (c, _, err) = flexkern(&a);
        assert_ne!(c, 0, "{a:?}");
        assert!(err.contains(needle), "{a:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
