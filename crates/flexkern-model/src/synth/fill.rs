//! Streams a planned synthetic model: each tensor's rows are generated and quantized in
//! chunks on rayon threads, a bounded batch of chunks at a time, and written in order, so
//! memory stays at a few chunks per thread whatever the model's size. Each chunk's values
//! come from its own generator seeded by (seed, tensor, chunk): the file does not depend on
//! the thread count.

use super::{Fill, Plan, SynthError};
use flexkern_gguf::StreamWriter;
use flexkern_quant::quantize;
use rayon::prelude::*;
use std::io::Write;

/// Elements per chunk (4 MiB of f32 before quantizing).
const CHUNK_ELEMS: usize = 1 << 20;

/// Writes the file `plan` describes to `out`; `progress(bytes done, total)` after each batch.
pub fn write<W: Write>(
    plan: Plan,
    seed: u64,
    out: W,
    mut progress: impl FnMut(u64, u64),
) -> Result<W, SynthError> {
    let total = plan.data_bytes();
    let decls: Vec<_> = plan.tensors.iter().map(|t| t.decl.clone()).collect();
    let mut w = StreamWriter::new(plan.meta, &decls, out)?;
    let batch = 2 * rayon::current_num_threads().max(1);
    let mut done = 0u64;
    for (ti, t) in plan.tensors.iter().enumerate() {
        let std = match &t.fill {
            Fill::Values(v) => {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                w.write(&bytes)?;
                done += bytes.len() as u64;
                continue;
            }
            Fill::Normal(std) => *std,
        };
        let rows = (CHUNK_ELEMS / t.k).max(1);
        let chunks: Vec<(usize, usize)> = (0..t.n)
            .step_by(rows)
            .map(|r| (r, rows.min(t.n - r)))
            .collect();
        for group in chunks.chunks(batch) {
            let parts: Vec<Result<Vec<u8>, SynthError>> = group
                .par_iter()
                .map(|&(r0, nr)| {
                    let vals = normal(chunk_seed(seed, ti, r0 / rows), nr * t.k, std);
                    Ok(quantize(t.format, &vals, nr, t.k)?)
                })
                .collect();
            for p in parts {
                let p = p?;
                w.write(&p)?;
                done += p.len() as u64;
            }
            progress(done, total);
        }
    }
    progress(done, total);
    Ok(w.finish()?)
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn chunk_seed(seed: u64, tensor: usize, chunk: usize) -> u64 {
    let mut s = seed;
    let a = splitmix(&mut s);
    let mut t = a ^ (tensor as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let b = splitmix(&mut t);
    b ^ (chunk as u64).wrapping_mul(0xA076_1D64_78BD_642F)
}

/// `len` values with mean 0 and standard deviation `std`: the sum of four 16-bit uniforms
/// from one 64-bit draw (Irwin-Hall), bounded at +-3.46 std.
fn normal(mut state: u64, len: usize, std: f32) -> Vec<f32> {
    // Sum of four uniforms on [0, 65535]: mean 131070, std 65536 * sqrt(4 / 12).
    const MEAN: f32 = 131_070.0;
    let scale = std / (65_536.0 * (1.0f32 / 3.0).sqrt());
    (0..len)
        .map(|_| {
            let x = splitmix(&mut state);
            let sum = (x & 0xFFFF) + ((x >> 16) & 0xFFFF) + ((x >> 32) & 0xFFFF) + (x >> 48);
            (sum as f32 - MEAN) * scale
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn normal_has_its_moments_and_bounds() {
        let v = super::normal(3, 1 << 16, 0.02);
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 5e-4, "{mean}");
        assert!((var.sqrt() - 0.02).abs() < 5e-4, "{}", var.sqrt());
        assert!(v.iter().all(|x| x.abs() <= 0.02 * 3.47));
        assert_ne!(super::chunk_seed(1, 0, 1), super::chunk_seed(1, 1, 0));
    }
}
