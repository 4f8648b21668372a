//! Any byte string through the GGUF reader and everything built on its metadata: getters,
//! tensor data, tokenizer, chat template, model config and weights. Errors are fine; a
//! panic, an abort or a hang is a finding.
#![no_main]

use flexkern_gguf::{ChatTemplate, GgufFile, Tokenizer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    for t in f.tensors() {
        let _ = f.tensor_data(&t.name);
    }
    for key in ["general.architecture", "llama.block_count", "tokenizer.ggml.model"] {
        let _ = f.get_str(key);
        let _ = f.get_usize(key);
        let _ = f.get_f32(key);
    }
    if let Ok(tok) = Tokenizer::from_gguf(&f) {
        let ids = tok.encode("Hello, world! <s> 🙂", true, true);
        let _ = tok.decode(&ids);
    }
    if let Ok(Some(t)) = ChatTemplate::from_gguf(&f) {
        let _ = t.apply(&[("user", "hi")], true);
    }
    if flexkern_model::Config::from_gguf(&f).is_ok() {
        let _ = flexkern_model::Model::load(&f, flexkern::CpuBackend, |_, _| {});
    }
});
