use super::*;
use flexkern_gguf::GgufFile;

fn spec(shape: &str, format: &str) -> SynthSpec {
    SynthSpec {
        shape: Shape::from_name(shape).unwrap(),
        recipe: Recipe::from_name(format).unwrap(),
        seed: 1,
        vocab: Some(49152),
    }
}

fn formats_of(p: &Plan, suffix: &str) -> Vec<Format> {
    p.tensors
        .iter()
        .filter(|t| t.decl.name.ends_with(suffix))
        .map(|t| t.format)
        .collect()
}

fn format_of(p: &Plan, name: &str) -> Format {
    p.tensors
        .iter()
        .find(|t| t.decl.name == name)
        .unwrap()
        .format
}

#[test]
fn llama3_8b_has_its_published_size() {
    let p = plan(&spec("llama3-8b", "f16"), &TokenizerSource::Bytes).unwrap();
    // 32 layers of 9 tensors, embeddings, output, output norm, rope factors.
    assert_eq!(p.tensors.len(), 32 * 9 + 4);
    let params: usize = p.tensors.iter().map(|t| t.n * t.k).sum();
    // Llama-3-8B without its 128256-token embeddings: 8.03e9 - 2 * 4096 * (128256 - 49152).
    assert_eq!(params, 8_030_261_248 - 2 * 4096 * (128_256 - 49_152) + 64);
    assert_eq!(
        p.data_bytes(),
        2 * (params as u64 - 64 - 65 * 4096) + 4 * (64 + 65 * 4096)
    );
    let rope = p
        .tensors
        .iter()
        .find(|t| t.decl.name == "rope_freqs.weight")
        .unwrap();
    let Fill::Values(f) = &rope.fill else {
        panic!()
    };
    // High frequencies unscaled, low ones divided by the factor 8.
    assert_eq!((f[0], f[63], f.len()), (1.0, 8.0, 64));
}

#[test]
fn q4_k_m_mixes_like_llama_cpp() {
    let p = plan(&spec("llama3-8b", "q4_k_m"), &TokenizerSource::Bytes).unwrap();
    let more: Vec<usize> = (0..32).filter(|&i| use_more_bits(i, 32)).collect();
    assert_eq!(
        more,
        [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    );
    for (i, f) in formats_of(&p, "attn_v.weight").into_iter().enumerate() {
        assert_eq!(
            f,
            if more.contains(&i) {
                Format::Q6K
            } else {
                Format::Q4K
            }
        );
    }
    assert_eq!(
        formats_of(&p, "ffn_down.weight"),
        formats_of(&p, "attn_v.weight")
    );
    assert!(formats_of(&p, "ffn_up.weight")
        .iter()
        .all(|&f| f == Format::Q4K));
    assert!(formats_of(&p, "attn_output.weight")
        .iter()
        .all(|&f| f == Format::Q4K));
    assert_eq!(format_of(&p, "output.weight"), Format::Q6K);
    assert_eq!(format_of(&p, "token_embd.weight"), Format::Q4K);
    assert!(formats_of(&p, "norm.weight")
        .iter()
        .all(|&f| f == Format::F32));
    let meta = GgufFile::from_bytes(p.meta.to_bytes()).unwrap();
    assert_eq!(meta.get_u32("general.file_type").unwrap(), 15); // LLAMA_FTYPE_MOSTLY_Q4_K_M
    assert_eq!(meta.get_usize("llama.vocab_size").unwrap(), 49152);
}

#[test]
fn rows_that_are_not_whole_blocks_fall_back() {
    // SmolLM2's 576-wide rows are not whole 256-element K-quant blocks: Q5_0, as llama.cpp.
    let p = plan(&spec("smollm2-135m", "q4_k"), &TokenizerSource::Bytes).unwrap();
    assert!(formats_of(&p, "attn_q.weight")
        .iter()
        .all(|&f| f == Format::Q5_0));
    assert!(formats_of(&p, "ffn_down.weight")
        .iter()
        .all(|&f| f == Format::Q4K));
    let p = plan(&spec("smollm2-135m", "q4_k_m"), &TokenizerSource::Bytes).unwrap();
    // Tied embeddings are the output matrix: Q6_K, whose fallback is Q8_0.
    assert_eq!(format_of(&p, "token_embd.weight"), Format::Q8_0);
    assert!(!p.tensors.iter().any(|t| t.decl.name == "rope_freqs.weight"));
}

#[test]
fn bad_arguments_are_typed_errors() {
    let e = Shape::from_name("llama3-70b").unwrap_err().to_string();
    assert!(e.contains("`shape`") && e.contains("smollm2-135m"), "{e}");
    for bad in ["q9_0", "mlx:4:64", "q8_k", ""] {
        let e = Recipe::from_name(bad).unwrap_err().to_string();
        assert!(e.contains("`format`"), "{bad}: {e}");
    }
    let mut s = spec("smollm2-135m", "q8_0");
    s.vocab = Some(100);
    let e = plan(&s, &TokenizerSource::Bytes).err().unwrap().to_string();
    assert!(e.contains("`vocab`") && e.contains("257"), "{e}");
    s.vocab = Some(usize::MAX);
    let e = plan(&s, &TokenizerSource::Bytes).err().unwrap().to_string();
    assert!(e.contains("`vocab`") && e.contains("above"), "{e}");
    // A donor without a tokenizer.
    let mut w = flexkern_gguf::GgufWriter::new();
    w.add_metadata("general.architecture", Value::String("llama".into()))
        .unwrap();
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let e = plan(&s, &TokenizerSource::Gguf(&f))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("`tokenizer`"), "{e}");
}

#[test]
fn donor_tokenizer_keys_are_copied_and_padded() {
    let mut w = flexkern_gguf::GgufWriter::new();
    for (k, v) in tokenizer::metadata(&TokenizerSource::Bytes, None)
        .unwrap()
        .0
    {
        w.add_metadata(k, v).unwrap();
    }
    w.add_metadata("tokenizer.chat_template", Value::String("{{ x }}".into()))
        .unwrap();
    w.add_metadata("general.name", Value::String("donor".into()))
        .unwrap();
    let donor = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let (keys, vocab) = tokenizer::metadata(&TokenizerSource::Gguf(&donor), Some(300)).unwrap();
    assert_eq!(vocab, 300);
    assert!(keys.iter().any(|(k, _)| k == "tokenizer.chat_template"));
    assert!(!keys.iter().any(|(k, _)| k == "general.name"));
    let len = |name: &str| match &keys.iter().find(|(k, _)| k == name).unwrap().1 {
        Value::Array(_, items) => items.len(),
        _ => 0,
    };
    assert_eq!(
        (
            len("tokenizer.ggml.tokens"),
            len("tokenizer.ggml.token_type")
        ),
        (300, 300)
    );
}
