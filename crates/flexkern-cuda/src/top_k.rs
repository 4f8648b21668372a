//! `TensorOps::largest` on the GPU: the k largest logits found on the device
//! (`kernels/top_k.cu`), so a decode step brings back k (id, logit) pairs, not the vocabulary.

use crate::backend::{CudaBackend, CudaBuffer};
use crate::headers::{text, COMMON};
use crate::runtime::compile::KernelSource;
use flexkern::backend::Buffer;
use flexkern::error::{Error, Result};
use flexkern::DType;
use std::ffi::c_void;

const TOP_K: &str = include_str!("../kernels/top_k.cu");

/// Most candidates found on the device (more: the host sorts the downloaded row). Samplers
/// keep tens (llama.cpp's default top-k is 40).
pub const MAX_K: usize = 64;
/// Threads per block (`FK_TOPK_THREADS`).
const THREADS: u32 = 256;

impl CudaBackend {
    pub(crate) fn top_k(
        &self,
        x: &CudaBuffer,
        n: usize,
        k: usize,
    ) -> Result<Option<Vec<(u32, f32)>>> {
        if x.dtype() != DType::F32 || x.len() < n {
            return Err(Error::InvalidArgument {
                arg: "x",
                msg: format!(
                    "needs {n} f32 values, the buffer holds {} {}",
                    x.len(),
                    x.dtype().name()
                ),
            });
        }
        if k == 0 || k > MAX_K || k > n || n > i32::MAX as usize {
            return Ok(None);
        }
        let dev = &self.dev;
        let e = Error::from;
        let module = dev
            .module_keyed("top_k", || KernelSource {
                name: "top_k".into(),
                source: format!("{}\n{TOP_K}", text(&[COMMON])),
            })
            .map_err(e)?;
        // Every slice holds at least k elements.
        let slices = dev.props.sms.max(1).min(n / k).max(1);
        let cands = slices * k;
        // [status 2][ids k][values k][candidate ids][candidate values], 4 bytes each.
        let ws = dev.alloc(4 * (2 + 2 * k + 2 * cands)).map_err(e)?;
        dev.memset(&ws, 0, 8, 0).map_err(e)?;
        let at = |words: usize| ws.ptr() + 4 * words as u64;
        let (mut status, mut ids, mut vals) = (at(0), at(2), at(2 + k));
        let (mut cids, mut cvals) = (at(2 + 2 * k), at(2 + 2 * k + cands));
        let (mut xp, mut n32, mut k32, mut m32) =
            (x.device_buf().ptr(), n as i32, k as i32, cands as i32);
        let mut p1: [*mut c_void; 6] = [
            (&mut xp as *mut u64).cast(),
            (&mut n32 as *mut i32).cast(),
            (&mut k32 as *mut i32).cast(),
            (&mut cids as *mut u64).cast(),
            (&mut cvals as *mut u64).cast(),
            (&mut status as *mut u64).cast(),
        ];
        let mut p2: [*mut c_void; 7] = [
            (&mut cids as *mut u64).cast(),
            (&mut cvals as *mut u64).cast(),
            (&mut m32 as *mut i32).cast(),
            (&mut k32 as *mut i32).cast(),
            (&mut ids as *mut u64).cast(),
            (&mut vals as *mut u64).cast(),
            (&mut status as *mut u64).cast(),
        ];
        let f1 = module.function("fk_top_slices").map_err(e)?;
        let f2 = module.function("fk_top_merge").map_err(e)?;
        dev.bind().map_err(e)?;
        // SAFETY: fk_top_slices(const float*, int, int, u32*, float*, u32*) reads n values of x
        // (checked) and writes `slices` x k candidates and the status inside `ws`;
        // fk_top_merge(const u32*, const float*, int, int, u32*, float*, u32*) reads those and
        // writes k ids and values inside `ws`.
        unsafe {
            crate::runtime::launch(
                f1,
                (slices as u32, THREADS, 0),
                dev.stream(),
                &mut p1,
                dev.pdl(),
            )
            .map_err(e)?;
            crate::runtime::launch(f2, (1, THREADS, 0), dev.stream(), &mut p2, dev.pdl())
                .map_err(e)?;
        }
        let mut out = vec![0u32; 2 + 2 * k];
        dev.read(&ws, 0, &mut out).map_err(e)?;
        if out[0] != 0 {
            return Err(Error::InvalidArgument {
                arg: "logits",
                msg: "contain NaN".into(),
            });
        }
        if out[1] != 0 {
            return Ok(None); // more than FK_TOPK_CAP ties at the k-th value
        }
        Ok(Some(
            (0..k)
                .map(|i| (out[2 + i], f32::from_bits(out[2 + k + i])))
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_compiles_with_nvrtc() {
        if !crate::runtime::nvrtc_present() {
            eprintln!("top_k_compiles_with_nvrtc: libnvrtc not found, skipped");
            return;
        }
        let src = KernelSource {
            name: "top_k".into(),
            source: format!("{}\n{TOP_K}", text(&[COMMON])),
        };
        let (bin, log) = crate::runtime::compile::compile_verbose(&src, "sm_90a")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!bin.is_empty(), "{log}");
    }
}
