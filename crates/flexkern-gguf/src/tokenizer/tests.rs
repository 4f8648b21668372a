use super::*;
use crate::reader::value::Value;
use crate::writer::GgufWriter;

fn file(w: &GgufWriter) -> GgufFile {
    GgufFile::from_bytes(w.to_bytes()).unwrap()
}

/// Byte-level vocab: 256 byte tokens, a control token and a few merges.
fn tiny_bpe() -> GgufWriter {
    tiny_bpe_with(&["h e", "l l", "he ll", "hell o", "Ġ hello"])
}

fn tiny_bpe_with(merges: &[&str]) -> GgufWriter {
    let table = byte_to_char_table();
    let mut tokens: Vec<String> = table.iter().map(|c| c.to_string()).collect();
    let mut types = vec![token_type::NORMAL; 256];
    for (t, ty) in [
        ("<|end|>", token_type::CONTROL),
        ("he", 1),
        ("ll", 1),
        ("hell", 1),
        ("hello", 1),
        ("Ġhello", 1),
        ("<user>", token_type::USER_DEFINED),
    ] {
        tokens.push(t.into());
        types.push(ty);
    }
    let mut w = GgufWriter::new();
    w.add_metadata("tokenizer.ggml.model", Value::String("gpt2".into()))
        .unwrap();
    w.add_metadata("tokenizer.ggml.pre", Value::String("gpt-2".into()))
        .unwrap();
    w.add_metadata("tokenizer.ggml.tokens", Value::str_array(&tokens))
        .unwrap();
    w.add_metadata("tokenizer.ggml.token_type", Value::i32_array(&types))
        .unwrap();
    w.add_metadata("tokenizer.ggml.merges", Value::str_array(merges))
        .unwrap();
    w.add_metadata("tokenizer.ggml.eos_token_id", Value::U32(256))
        .unwrap();
    w
}

#[test]
fn bpe_merges_specials_and_bytes() {
    let tok = Tokenizer::from_gguf(&file(&tiny_bpe())).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::Bpe);
    assert_eq!(tok.encode("hello hello", true, false), vec![260, 261]);
    let e = b'!' as u32; // printable bytes keep their own code point and id
    assert_eq!(tok.encode("hello!<|end|>", false, true), vec![260, e, 256]);
    let plain = tok.encode("<|end|>", false, false);
    assert_eq!(plain.len(), 7);
    // User-defined tokens match even without parse_special, as in llama.cpp.
    assert_eq!(tok.encode("<user>", false, false), vec![262]);
    let text = "hi 🙂 <|end|> hello\n\n";
    assert_eq!(tok.decode(&tok.encode(text, false, true)), text);
    assert!(tok.is_eog(256) && !tok.is_eog(260));
    assert_eq!(tok.token_to_piece(261), b" hello");
    assert_eq!(tok.token_to_piece(9999), b"");
    assert!(matches!(
        tok.try_token_to_piece(9999),
        Err(GgufError::TokenOutOfRange { id: 9999, .. })
    ));
    assert_eq!(tok.decode(&[9999, 260]), "hello");
}

/// SentencePiece vocab: unk, bos, eos, 256 byte tokens, then scored pieces.
fn tiny_spm() -> GgufWriter {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![
        token_type::UNKNOWN,
        token_type::CONTROL,
        token_type::CONTROL,
    ];
    let mut scores = vec![0.0f32; 3];
    for b in 0..256 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(token_type::BYTE);
        scores.push(0.0);
    }
    // Scores decide merge order: "▁h" before "he", so "▁hello" is reachable.
    let pieces: &[(&str, f32)] = &[
        ("▁", -0.5),
        ("h", -20.0),
        ("e", -20.0),
        ("l", -20.0),
        ("o", -20.0),
        ("w", -20.0),
        ("r", -20.0),
        ("d", -20.0),
        ("▁h", -1.0),
        ("he", -10.0),
        ("ll", -2.0),
        ("▁he", -3.0),
        ("llo", -4.0),
        ("▁hello", -5.0),
        ("▁w", -1.5),
        ("or", -2.5),
        ("ld", -2.6),
        ("▁wor", -3.5),
        ("▁world", -6.0),
    ];
    for (p, s) in pieces {
        tokens.push(p.to_string());
        types.push(token_type::NORMAL);
        scores.push(*s);
    }
    let mut w = GgufWriter::new();
    w.add_metadata("tokenizer.ggml.model", Value::String("llama".into()))
        .unwrap();
    w.add_metadata("tokenizer.ggml.tokens", Value::str_array(&tokens))
        .unwrap();
    w.add_metadata("tokenizer.ggml.scores", Value::f32_array(&scores))
        .unwrap();
    w.add_metadata("tokenizer.ggml.token_type", Value::i32_array(&types))
        .unwrap();
    w.add_metadata("tokenizer.ggml.bos_token_id", Value::U32(1))
        .unwrap();
    w.add_metadata("tokenizer.ggml.eos_token_id", Value::U32(2))
        .unwrap();
    w.add_metadata("tokenizer.ggml.unknown_token_id", Value::U32(0))
        .unwrap();
    w
}

#[test]
fn spm_scores_prefix_space_and_byte_fallback() {
    let tok = Tokenizer::from_gguf(&file(&tiny_spm())).unwrap();
    let id = |s: &str| tok.token_id(s).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::Spm);
    assert!(tok.add_bos());
    assert_eq!(
        tok.encode("hello world", true, false),
        vec![1, id("▁hello"), id("▁world")]
    );
    // Lower-scored pairs ("▁w" first, then "or", "ld", "▁wor") build "▁world".
    assert_eq!(tok.encode("world", false, false), vec![id("▁world")]);
    let ids = tok.encode("hi€", false, false);
    assert_eq!(
        ids,
        vec![
            id("▁h"),
            id("<0x69>"),
            id("<0xE2>"),
            id("<0x82>"),
            id("<0xAC>")
        ]
    );
    assert_eq!(tok.decode(&ids), "hi€");
    // A space prefix is added again after a special token.
    assert_eq!(
        tok.encode("<s>hello</s>", false, true),
        vec![1, id("▁hello"), 2]
    );
    let plain = tok.encode("<s>hello", false, false);
    assert_eq!(plain[0], id("▁"));
    assert_eq!(tok.decode(&plain), "<s>hello");
    assert_eq!(
        tok.decode(&tok.encode("hello  world", true, false)),
        "<s>hello  world"
    );
    assert!(tok.is_eog(2));
    assert_eq!(tok.token_to_piece(id("▁hello")), b" hello");
    assert_eq!(tok.token_to_piece(id("<0x41>")), b"A");
}

#[test]
fn stream_decoder_reassembles_byte_tokens() {
    let tok = Tokenizer::from_gguf(&file(&tiny_spm())).unwrap();
    let ids = tok.encode("€h", false, false);
    let mut d = StreamDecoder::new();
    let parts: Vec<String> = ids.iter().map(|&i| d.push(&tok, i)).collect();
    assert_eq!(parts.concat() + &d.finish(), " €h");
    assert_eq!(parts.iter().filter(|p| p.is_empty()).count(), 2);
}

#[test]
fn bad_tokenizer_metadata_is_a_typed_error() {
    let err = |w: &GgufWriter| Tokenizer::from_gguf(&file(w)).err().unwrap();
    assert!(
        matches!(err(&GgufWriter::new()), GgufError::KeyNotFound(k) if k == "tokenizer.ggml.model")
    );
    let mut w = tiny_bpe();
    w.add_metadata("tokenizer.ggml.model", Value::String("rwkv".into()))
        .unwrap();
    assert!(matches!(err(&w), GgufError::Tokenizer(_)));
    let mut w = tiny_bpe();
    w.add_metadata("tokenizer.ggml.pre", Value::String("unheard-of".into()))
        .unwrap();
    assert!(matches!(err(&w), GgufError::Tokenizer(_)));
    let mut w = tiny_bpe();
    w.add_metadata("tokenizer.ggml.token_type", Value::i32_array(&[1, 1]))
        .unwrap();
    assert!(matches!(err(&w), GgufError::Tokenizer(_)));
    let mut w = tiny_bpe();
    w.add_metadata("tokenizer.ggml.eos_token_id", Value::U32(1 << 20))
        .unwrap();
    assert!(matches!(err(&w), GgufError::TokenOutOfRange { .. }));
    let mut w = tiny_bpe();
    w.add_metadata("tokenizer.ggml.tokens", Value::str_array::<&str>(&[]))
        .unwrap();
    assert!(matches!(err(&w), GgufError::Tokenizer(_)));
    let mut w = tiny_spm();
    w.add_metadata("tokenizer.ggml.scores", Value::f32_array(&[0.0]))
        .unwrap();
    assert!(matches!(err(&w), GgufError::Tokenizer(_)));
    let mut w = tiny_spm();
    w.add_metadata("tokenizer.ggml.tokens", Value::U32(3))
        .unwrap();
    assert!(matches!(err(&w), GgufError::WrongType { .. }));
}

/// Issue 16: a merge line that is not "left right" was skipped silently.
#[test]
fn malformed_merges_are_a_typed_error() {
    for bad in ["hello", "h ", "", " h", "Ġ"] {
        let w = tiny_bpe_with(&["h e", bad, "l l"]);
        match Tokenizer::from_gguf(&file(&w)) {
            Err(GgufError::Tokenizer(m)) => {
                assert!(
                    m.contains("tokenizer.ggml.merges") && m.contains("entry 1"),
                    "{m}"
                )
            }
            Err(e) => panic!("{bad:?}: wrong error {e}"),
            Ok(_) => panic!("{bad:?}: accepted"),
        }
    }
    // A first token that is itself a space, or multi-byte, still splits (llama.cpp's rule).
    assert!(Tokenizer::from_gguf(&file(&tiny_bpe_with(&["  x", "Ġ hello"]))).is_ok());
}
