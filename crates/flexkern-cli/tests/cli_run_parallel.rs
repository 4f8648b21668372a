//! `flexkern run --prompt-file FILE --parallel N` through the binary on a tiny random model:
//! output grouped per prompt in file order, each prompt's greedy text equal to `run --prompt`
//! of that line alone (and its token ids, `--json`), the baseline run reported, and bad
//! combinations refused by name.

mod common;

use common::flexkern;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    common::scratch("parallel")
}

/// A 2-layer GQA tiny llama (see `common::tiny_llama`).
fn tiny_model(path: &Path) {
    let t = common::Tiny {
        layers: 2,
        d: 32,
        ff: 64,
        heads: 4,
        kv_heads: 2,
        context: 128,
        seed: 9,
    };
    common::tiny_llama(path, &t);
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
