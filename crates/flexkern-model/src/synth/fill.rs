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

/// Elements per chunk (1 MiB of f32 before quantizing): small enough that the K and V
/// matrices still split over many threads.
const CHUNK_ELEMS: usize = 1 << 18;

/// One piece of work: rows `r0..r0 + nr` of tensor `t` (chunk `c` of it).
#[derive(Clone, Copy)]
struct Piece {
    t: usize,
    c: usize,
    r0: usize,
    nr: usize,
}

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
    // Pieces of every tensor in file order; a batch spans tensor boundaries, so the threads
    // stay busy on small tensors too.
    let mut pieces = Vec::new();
    for (ti, t) in plan.tensors.iter().enumerate() {
        let rows = (CHUNK_ELEMS / t.k).max(1);
        for (c, r0) in (0..t.n).step_by(rows).enumerate() {
            let nr = rows.min(t.n - r0);
            pieces.push(Piece { t: ti, c, r0, nr });
        }
    }
    let batch = 4 * rayon::current_num_threads().max(1);
    let mut done = 0u64;
    for group in pieces.chunks(batch) {
        let parts: Vec<Result<Vec<u8>, SynthError>> = group
            .par_iter()
            .map(|p| {
                let t = &plan.tensors[p.t];
                match &t.fill {
                    Fill::Values(v) => {
                        let rows = &v[p.r0 * t.k..(p.r0 + p.nr) * t.k];
                        Ok(rows.iter().flat_map(|x| x.to_le_bytes()).collect())
                    }
                    Fill::Normal(std) => {
                        let vals = normal(chunk_seed(seed, p.t, p.c), p.nr * t.k, *std);
                        Ok(quantize(t.format, &vals, p.nr, t.k)?)
                    }
                }
            })
            .collect();
        for p in parts {
            let p = p?;
            w.write(&p)?;
            done += p.len() as u64;
        }
        progress(done, total);
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
