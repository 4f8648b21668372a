//! Issue 16: bad model metadata is refused at load time with an error naming the key, before
//! any per-layer allocation is sized by it; a KV cache too large for the machine is a typed
//! error; the context-full message names the cache, not the model.

mod common;

use common::{model, LAYERS};
use flexkern::CpuBackend;
use flexkern_gguf::{GgufFile, Value};
use flexkern_model::{Config, Logits, Model, ModelError};

/// The key a load error names, or a panic naming what came back instead.
fn config_key(f: &GgufFile) -> String {
    match Model::load(f, CpuBackend, |_, _| {}) {
        Err(ModelError::Config { key, .. }) => key,
        Err(e) => panic!("expected a metadata error, got {e}"),
        Ok(_) => panic!("expected a metadata error, the model loaded"),
    }
}

#[test]
fn the_tiny_model_loads() {
    let f = model(LAYERS, &[]);
    let m = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let mut c = m.new_cache(32).unwrap();
    assert!(m
        .forward(&mut c, &[1, 2, 3], Logits::Last)
        .unwrap()
        .iter()
        .all(|x| x.is_finite()));
}

#[test]
fn block_count_must_match_the_layer_tensors() {
    // 2^26 and 2^31 reserved every layer (an abort); 0 and 1 ran on with layers unused.
    for n in [0u32, 1, 3, 1 << 26, 1 << 31] {
        let f = model(LAYERS, &[("llama.block_count", Value::U32(n))]);
        assert_eq!(config_key(&f), "llama.block_count", "block_count {n}");
        assert!(Config::from_gguf(&f).is_err());
    }
    let f = model(0, &[("llama.block_count", Value::U32(1 << 31))]);
    assert_eq!(config_key(&f), "llama.block_count");
}

#[test]
fn float_hyperparameters_are_checked_by_key() {
    let cases: [(&str, f32); 7] = [
        ("llama.attention.layer_norm_rms_epsilon", f32::NAN),
        ("llama.attention.layer_norm_rms_epsilon", -1e-5),
        ("llama.rope.freq_base", 0.0),
        ("llama.rope.freq_base", f32::INFINITY),
        ("llama.rope.scale_linear", 0.0),
        ("llama.rope.scale_linear", f32::NAN),
        ("llama.rope.scaling.factor", 0.0),
    ];
    for (key, x) in cases {
        let mut meta = vec![(key, Value::F32(x))];
        if key == "llama.rope.scaling.factor" {
            meta.push(("llama.rope.scaling.type", Value::String("linear".into())));
        }
        let f = model(LAYERS, &meta);
        assert_eq!(config_key(&f), key, "{key} = {x}");
    }
}

#[test]
fn a_cache_larger_than_memory_is_a_typed_error() {
    let f = model(LAYERS, &[("llama.context_length", Value::U64(1 << 35))]);
    let m = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    match m.new_cache(usize::MAX) {
        Err(ModelError::Kernel(e)) => assert!(e.to_string().contains("needs"), "{e}"),
        Err(e) => panic!("expected an allocation error, got {e}"),
        Ok(_) => panic!("a 2^35-position cache was allocated"),
    }
}

#[test]
fn context_full_names_the_cache() {
    let f = model(LAYERS, &[]);
    let m = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let mut c = m.new_cache(4).unwrap();
    let e = m.forward(&mut c, &[1; 5], Logits::Last).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("KV cache holds 4") && s.contains("--ctx"), "{s}");
}
