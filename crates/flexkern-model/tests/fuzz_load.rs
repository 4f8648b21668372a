//! Bounded fuzzing of model loading (issue 16): mutated images of a tiny model go through the
//! GGUF reader, `Config::from_gguf`, `Model::load` and a two-token forward pass. Errors are the
//! expected outcome; a panic fails the test, an abort kills it (both findings).
//!
//! `FLEXKERN_FUZZ_SECS` sets the time budget (default 3); `FLEXKERN_FUZZ_SEED` the seed.

mod common;

use flexkern::CpuBackend;
use flexkern_gguf::GgufFile;
use flexkern_model::{Config, Logits, Model};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

fn mutate(r: &mut StdRng, base: &[u8], hot: usize) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..r.gen_range(1..5) {
        // Most edits land in the header and metadata, where the structure is.
        let lim = if r.gen_bool(0.8) {
            hot.min(b.len())
        } else {
            b.len()
        };
        let at = r.gen_range(0..lim.max(1));
        match r.gen_range(0..5) {
            0 => b[at] = r.gen(),
            1 => b[at] ^= 1 << r.gen_range(0..8),
            // An extreme little-endian integer over a count, length, dim or value.
            2 => {
                let v: u64 = [0, 1, 1 << 26, 1 << 31, u32::MAX as u64, u64::MAX][r.gen_range(0..6)];
                let n = [4usize, 8][r.gen_range(0..2)].min(b.len() - at);
                b[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
            }
            3 => b.truncate(at),
            _ => {
                // A float metadata value made NaN, 0 or negative.
                let v = [f32::NAN, 0.0, -1.0, f32::INFINITY][r.gen_range(0..4)];
                let n = 4.min(b.len() - at);
                b[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
            }
        }
        if b.is_empty() {
            break;
        }
    }
    b
}

#[test]
fn mutated_models_never_panic() {
    let seed = std::env::var("FLEXKERN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let secs: f64 = std::env::var("FLEXKERN_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let mut r = StdRng::seed_from_u64(seed);
    let base = common::model_bytes(common::LAYERS, &[]);
    // The header, metadata and tensor infos: everything before the tensor data.
    let data: u64 = GgufFile::from_bytes(base.clone())
        .unwrap()
        .tensors()
        .iter()
        .map(|t| t.size_bytes)
        .sum();
    let hot = base.len().saturating_sub(data as usize).max(512);
    let t = Instant::now();
    let (mut runs, mut loaded) = (0, 0);
    while t.elapsed() < Duration::from_secs_f64(secs) || runs < 200 {
        let bytes = mutate(&mut r, &base, hot);
        let res = std::panic::catch_unwind(|| {
            let Ok(f) = GgufFile::from_bytes(bytes.clone()) else {
                return false;
            };
            if Config::from_gguf(&f).is_err() {
                return false;
            }
            let Ok(m) = Model::load(&f, CpuBackend, |_, _| {}) else {
                return false;
            };
            let Ok(mut c) = m.new_cache(16) else {
                return false;
            };
            let _ = m.forward(&mut c, &[1, 2], Logits::Last);
            true
        });
        match res {
            Ok(l) => loaded += l as usize,
            Err(_) => {
                let p = std::env::temp_dir().join(format!("flexkern-fuzz-load-{runs}.gguf"));
                std::fs::write(&p, &bytes).unwrap();
                panic!("panicked on a mutated model (saved as {})", p.display());
            }
        }
        runs += 1;
    }
    eprintln!("{runs} mutated models, {loaded} loaded and ran");
}
