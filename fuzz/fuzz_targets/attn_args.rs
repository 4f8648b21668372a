//! Attention argument validation: shapes, strides, ragged lengths, mask parameters, output
//! sizes all drawn from the input, over small data (huge shapes must be refused, not read).
#![no_main]

use flexkern::builtins::{causal, chunked, document, local, sliding_window, softcap};
use flexkern::{attention, AttentionArgs, CpuBackend, TensorView, Variant};
use libfuzzer_sys::fuzz_target;

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u64(&mut self) -> u64 {
        let n = self.0.len().min(8);
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        u64::from_le_bytes(b)
    }
    /// Mostly small, sometimes anything.
    fn size(&mut self) -> usize {
        let x = self.u64();
        if x & 7 == 0 {
            (x >> 3) as usize
        } else {
            ((x >> 3) % 17) as usize
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let buf = vec![0.25f32; 4096];
    let rank = 3 + (b.u64() % 2) as usize;
    let view = |b: &mut Bytes| {
        let shape: Vec<usize> = (0..rank).map(|_| b.size()).collect();
        let strided = b.u64() % 4 == 0;
        let strides: Vec<usize> = (0..rank).map(|_| b.size()).collect();
        let len = (b.u64() % 4097) as usize;
        if strided {
            TensorView::strided(&buf[..len], &shape, &strides)
        } else {
            TensorView::contiguous(&buf[..len], &shape)
        }
    };
    let (q, k, v) = (view(&mut b), view(&mut b), view(&mut b));
    let cq: Vec<u64> = (0..b.u64() % 5).map(|_| b.size() as u64).collect();
    let ck: Vec<u64> = (0..b.u64() % 5).map(|_| b.size() as u64).collect();
    let mut args = AttentionArgs::new(q, k, v);
    if b.u64() % 2 == 0 {
        args = args.ragged(&cq, &ck);
    }
    let p = b.u64() as i64;
    let mut var = Variant::full();
    var = match b.u64() % 7 {
        0 => var.mask(causal()),
        1 => var.mask(sliding_window(p)),
        2 => var.mask(local(p, b.u64() as i64)),
        3 => var.mask(chunked(p)),
        4 => var.mask(document((0..(p as u64 % 20) as i64).collect())),
        5 => var.score(softcap(f64::from_bits(b.u64()))),
        _ => var,
    };
    args = args.variant(var);
    if b.u64() % 3 == 0 {
        args = args.scale(f32::from_bits(b.u64() as u32));
    }
    let mut o = vec![0f32; (b.u64() % 4097) as usize];
    let mut l = vec![0f32; (b.u64() % 513) as usize];
    let _ = attention(&CpuBackend, &args, None, &mut o, Some(&mut l));
});
