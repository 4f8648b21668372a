//! Greedy continuation of a prompt on a GGUF model, with token ids and speeds (a smoke test
//! of the library without the CLI): `cargo run --release --example greedy -- MODEL PROMPT|@FILE [N [LOGITS.f32]]`.

use flexkern::CpuBackend;
use flexkern_gguf::{GgufFile, Tokenizer};
use flexkern_model::{generate, Flow, Model, Sampler, SamplerConfig};

/// The CPU backend (one place to change if it gains state).
fn cpu() -> CpuBackend {
    CpuBackend
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // Run on a pool thread so kernel calls do not hand work across threads.
    rayon::ThreadPoolBuilder::new().build()?.install(run)
}

fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().collect();
    let (path, prompt) = (&args[1], &args[2]);
    let prompt = match prompt.strip_prefix('@') {
        Some(file) => std::fs::read_to_string(file)?,
        None => prompt.clone(),
    };
    let prompt = &prompt;
    let n = args.get(3).map_or(Ok(32), |s| s.parse())?;
    let file = GgufFile::open(path)?;
    let tok = Tokenizer::from_gguf(&file)?;
    let model = Model::load(&file, cpu(), |_, _| {})?;
    let ids = tok.encode(prompt, true, false);
    println!("prompt ids {ids:?}");
    let mut sampler = Sampler::new(SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    })?;
    let mut cache = model.new_cache(4096)?;
    if let Some(out) = args.get(4) {
        // The prompt's last-position logits as raw little-endian f32.
        let logits = model.forward(&mut cache, &ids, flexkern_model::Logits::Last)?;
        let bytes: Vec<u8> = logits.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(out, bytes)?;
        if std::env::var_os("FLEXKERN_REFERENCE").is_some() {
            // The f64 reference forward on the same weights, to separate kernel error from
            // model semantics.
            let r = flexkern_model::reference::forward(&model.config, &model.weights, &ids)?;
            let last = &r[r.len() - logits.len()..];
            let e = logits
                .iter()
                .zip(last)
                .map(|(a, b)| (*a as f64 - b).abs())
                .fold(0.0, f64::max);
            println!("max |forward - reference| = {e:.5}");
            let bytes: Vec<u8> = last
                .iter()
                .flat_map(|x| (*x as f32).to_le_bytes())
                .collect();
            std::fs::write(format!("{out}.ref"), bytes)?;
        }
        cache.clear()?;
    }
    let (out, st) = generate(&model, &mut cache, &ids, n, &mut sampler, |_| {
        Flow::Continue
    })?;
    println!("ids {out:?}");
    println!("text {:?}", tok.decode(&out));
    println!(
        "prefill {} tok {:.1} tok/s, decode {} tok {:.1} tok/s",
        st.prefill_tokens,
        st.prefill_tok_s(),
        st.decode_tokens,
        st.decode_tok_s()
    );
    Ok(())
}
