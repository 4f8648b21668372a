//! A tiny f32 llama model as GGUF, with metadata overrides: shared by the bad-input tests.

#![allow(dead_code)]

use flexkern_gguf::{GgmlType, GgufFile, GgufWriter, Value};

pub const D: usize = 16;
pub const HEADS: usize = 2;
pub const FF: usize = 32;
pub const VOCAB: usize = 40;
pub const LAYERS: usize = 2;

/// A tiny f32 llama model with `layers` blocks of tensors; `meta` overrides or adds keys.
pub fn model(layers: usize, meta: &[(&str, Value)]) -> GgufFile {
    GgufFile::from_bytes(model_bytes(layers, meta)).unwrap()
}

/// The GGUF image `model` opens.
pub fn model_bytes(layers: usize, meta: &[(&str, Value)]) -> Vec<u8> {
    let mut w = GgufWriter::new();
    let mut keys: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("llama".into())),
        ("llama.block_count".into(), Value::U32(LAYERS as u32)),
        ("llama.embedding_length".into(), Value::U32(D as u32)),
        ("llama.feed_forward_length".into(), Value::U32(FF as u32)),
        (
            "llama.attention.head_count".into(),
            Value::U32(HEADS as u32),
        ),
        ("llama.context_length".into(), Value::U32(32)),
        ("llama.vocab_size".into(), Value::U32(VOCAB as u32)),
    ];
    for (k, v) in meta {
        match keys.iter_mut().find(|(n, _)| n == k) {
            Some(e) => e.1 = v.clone(),
            None => keys.push((k.to_string(), v.clone())),
        }
    }
    for (k, v) in keys {
        w.add_metadata(k, v).unwrap();
    }
    let mut seed = 1u32;
    let mut add = |name: String, dims: &[u64]| {
        let n: u64 = dims.iter().product();
        let vals: Vec<u8> = (0..n)
            .flat_map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                ((seed >> 8) as f32 / (1u32 << 24) as f32 * 0.2 - 0.1).to_le_bytes()
            })
            .collect();
        w.add_tensor(name, dims, GgmlType::F32, vals).unwrap();
    };
    let (d, ff, v) = (D as u64, FF as u64, VOCAB as u64);
    add("token_embd.weight".into(), &[d, v]);
    add("output_norm.weight".into(), &[d]);
    for i in 0..layers {
        let n = |t: &str| format!("blk.{i}.{t}");
        add(n("attn_norm.weight"), &[d]);
        for t in ["attn_q", "attn_k", "attn_v", "attn_output"] {
            add(n(&format!("{t}.weight")), &[d, d]);
        }
        add(n("ffn_norm.weight"), &[d]);
        add(n("ffn_gate.weight"), &[d, ff]);
        add(n("ffn_up.weight"), &[d, ff]);
        add(n("ffn_down.weight"), &[ff, d]);
    }
    w.to_bytes()
}
