//! Synthetic models (`synth`) at SmolLM2-135M's real shapes load with the model runner and give
//! finite logits; the streamed file is deterministic in its seed.

use flexkern::CpuBackend;
use flexkern_gguf::{GgufFile, Tokenizer};
use flexkern_model::synth::{self, Recipe, Shape, SynthSpec, TokenizerSource};
use flexkern_model::{Logits, Model};
use flexkern_quant::Format;

fn synth_bytes(format: &str, seed: u64) -> Vec<u8> {
    let spec = SynthSpec {
        shape: Shape::from_name("smollm2-135m").unwrap(),
        recipe: Recipe::from_name(format).unwrap(),
        seed,
        vocab: Some(1000),
    };
    let plan = synth::plan(&spec, &TokenizerSource::Bytes).unwrap();
    let total = plan.data_bytes();
    let mut last = 0;
    let out = synth::write(plan, seed, Vec::new(), |done, all| {
        assert!(done >= last && all == total);
        last = done;
    })
    .unwrap();
    assert_eq!(last, total);
    out
}

fn forward_is_finite(format: &str, want: &[(&str, Format)]) {
    let f = GgufFile::from_bytes(synth_bytes(format, 7)).unwrap();
    for (name, fmt) in want {
        let ty = f.tensor_info(name).unwrap().ggml_type as u32;
        assert_eq!(Format::from_ggml_type(ty), Some(*fmt), "{name}");
    }
    let tok = Tokenizer::from_gguf(&f).unwrap();
    let ids = tok.encode("The three laws of robotics", false, false);
    assert_eq!(ids.len(), 26); // one byte token each
    let model = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    assert_eq!((model.config.n_layer, model.config.n_embd), (30, 576));
    let mut cache = model.new_cache(64).unwrap();
    let logits = model.forward(&mut cache, &ids, Logits::All).unwrap();
    assert_eq!(logits.len(), ids.len() * 1000);
    assert!(logits.iter().all(|x| x.is_finite()), "{format}");
    // Random weights give varied, not constant, logits.
    let (lo, hi) = logits
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(hi - lo > 1e-3, "{format}: {lo}..{hi}");
    let next = model.forward(&mut cache, &[3], Logits::Last).unwrap();
    assert!(next.iter().all(|x| x.is_finite()));
}

#[test]
fn smollm2_q8_0_runs() {
    forward_is_finite(
        "q8_0",
        &[
            ("token_embd.weight", Format::Q8_0),
            ("blk.29.ffn_down.weight", Format::Q8_0),
            ("blk.0.attn_norm.weight", Format::F32),
        ],
    );
}

#[test]
fn smollm2_q4_k_runs() {
    forward_is_finite(
        "q4_k",
        &[
            ("blk.0.ffn_down.weight", Format::Q4K),
            ("blk.0.attn_q.weight", Format::Q5_0),
        ],
    );
}

#[test]
fn the_seed_decides_the_bytes() {
    let a = synth_bytes("f16", 1);
    assert_eq!(a, synth_bytes("f16", 1));
    assert_ne!(a, synth_bytes("f16", 2));
}
