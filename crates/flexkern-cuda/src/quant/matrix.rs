//! Weight matrices in device memory (the file's bytes, uploaded once, checked against the
//! format and shape) and the product calls on them (`GemvCall`), shared by the GEMV kernels
//! (`gemv.rs`) and the prompt GEMM (`gemm/`).

use super::{unit_type, GemvConfig, Mode};
use crate::error::{invalid, Result};
use crate::runtime::compile::Module;
use crate::runtime::{Device, DeviceBuf};
use flexkern_quant::Format;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

/// What the kernel choice reads of a weight matrix.
#[derive(Clone, Debug)]
pub struct MatrixTraits<'a> {
    pub format: Format,
    /// Its unit type (`unit_type`).
    pub unit: &'a str,
    pub n: usize,
    pub k: usize,
    /// Activations quantized first (the default precision).
    pub quantized_acts: bool,
    /// Its allocation holds 16 bytes past the last block's 16-byte window start.
    pub slack: bool,
}

/// `FkMat` of quant_blocks.cuh, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct FkMat {
    pub(super) w: u64,
    s: u64,
    row_bytes: i64,
    groups: i64,
}

/// A `[n, k]` weight matrix of `format` in device memory, in the device layout of
/// `layout.rs` (the file's blocks, planar for some formats; for MLX the single-buffer form:
/// packed weights, scales, biases).
pub struct DeviceMatrix {
    pub buf: DeviceBuf,
    pub format: Format,
    pub n: usize,
    pub k: usize,
    pub(super) unit: String,
    /// Activations are quantized to the format's integer dot type first, as the CPU's default
    /// precision does (false: f32 activations, the precise path).
    pub quantized_acts: bool,
    /// Kernels this matrix has launched, by configuration: a launch builds and hashes no
    /// source after the first (the model launches hundreds per token).
    pub(super) funcs: Mutex<HashMap<GemvConfig, Kernel>>,
}

/// A loaded kernel and the module keeping it alive.
pub(super) struct Kernel {
    pub(super) _module: Arc<Module>,
    pub(super) f: usize,
    /// The activation quantizer of a staged dp4a configuration (0: none).
    pub(super) quant: usize,
    /// Blocks per SM (the streamed kernel's grid; 0 for the others).
    pub(super) resident: usize,
}

impl DeviceMatrix {
    /// Uploads `bytes` (exactly `format.tensor_bytes(n, k)`).
    pub fn upload(
        dev: &Arc<Device>,
        format: Format,
        n: usize,
        k: usize,
        bytes: &[u8],
    ) -> Result<DeviceMatrix> {
        unit_type(format, k)?;
        if n == 0 {
            return Err(invalid("n", "a weight matrix needs at least one row"));
        }
        let want = format
            .tensor_bytes(n, k)
            .map_err(|e| invalid("n", e.to_string()))?;
        if bytes.len() != want {
            return Err(invalid(
                "bytes",
                format!(
                    "{format} [{n}, {k}] takes {want} bytes, got {}",
                    bytes.len()
                ),
            ));
        }
        let bytes = super::layout::to_device(format, bytes);
        DeviceMatrix::from_device(dev.upload(&bytes)?, format, n, k)
    }

    /// A matrix over bytes already on the device, in the device layout (`buf` holds at least
    /// `format.tensor_bytes(n, k)`): benchmarks fill weights on the device.
    pub fn from_device(buf: DeviceBuf, format: Format, n: usize, k: usize) -> Result<DeviceMatrix> {
        let unit = unit_type(format, k)?;
        let want = format
            .tensor_bytes(n, k)
            .map_err(|e| invalid("n", e.to_string()))?;
        if n == 0 || buf.bytes() < want {
            return Err(invalid(
                "buf",
                format!(
                    "{format} [{n}, {k}] takes {want} bytes, the buffer holds {}",
                    buf.bytes()
                ),
            ));
        }
        Ok(DeviceMatrix {
            buf,
            format,
            n,
            k,
            unit,
            quantized_acts: false,
            funcs: Mutex::new(HashMap::new()),
        })
    }

    /// The same matrix with activations quantized first where the format has an integer dot on
    /// the GPU (Q8_0, Q4_0): the CPU's default precision. Other formats keep f32 activations.
    pub fn with_quantized_activations(mut self, on: bool) -> DeviceMatrix {
        self.quantized_acts = on;
        self
    }

    /// What the kernel choice reads of this matrix.
    pub fn traits(&self) -> MatrixTraits<'_> {
        MatrixTraits {
            format: self.format,
            unit: &self.unit,
            n: self.n,
            k: self.k,
            quantized_acts: self.quantized_acts,
            slack: self.buf.capacity() >= self.bytes().next_multiple_of(16),
        }
    }

    /// Bytes of weights (what one GEMV reads).
    pub fn bytes(&self) -> usize {
        self.format.tensor_bytes(self.n, self.k).unwrap_or(0)
    }

    /// Its unit type (`unit_type`).
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// Whether the bulk ring's copies of this matrix (gemv_stream.cu, FK_SBULK) are whole
    /// 16-byte words: its codes and side entries start on words and every row's spans of both
    /// are whole words.
    pub(super) fn bulk_aligned(&self) -> bool {
        aligned_for_bulk(self.buf.ptr(), self.format, self.n, self.k)
    }

    pub(super) fn mat(&self) -> FkMat {
        let base = self.buf.ptr();
        let g = super::layout::geometry(self.format, self.n, self.k);
        FkMat {
            w: base,
            s: if g.s > 0 { base + g.s as u64 } else { 0 },
            row_bytes: g.row_bytes as i64,
            groups: g.groups as i64,
        }
    }
}

/// `DeviceMatrix::bulk_aligned` of an `[n, k]` matrix of `f` at device address `base`.
fn aligned_for_bulk(base: u64, f: Format, n: usize, k: usize) -> bool {
    let g = super::layout::geometry(f, n, k);
    let side = super::layout::planar(f).map_or(0, |p| p.side);
    base.is_multiple_of(16)
        && g.row_bytes.is_multiple_of(16)
        && (g.s == 0
            || ((base + g.s as u64).is_multiple_of(16) && (g.groups * side).is_multiple_of(16)))
}

/// One GEMV: `y[m, n] = x[m, k] · aᵀ` (Plain), `silu(x · aᵀ) * (x · bᵀ)` (GateUp), or
/// `(silu(x) * x2) · aᵀ` (DownSwiglu). Activations and outputs are row-major f32. With
/// `accumulate` the result is added to `y` instead (every kernel; `norm`, the streamed one
/// only: see `streams`).
pub struct GemvCall<'a> {
    pub accumulate: bool,
    /// RMSNorm of each activation row first, in the kernel (the streamed kernel only: see
    /// `streams`).
    pub norm: Option<GemvNorm<'a>>,
    pub mode: Mode,
    pub a: &'a DeviceMatrix,
    pub b: Option<&'a DeviceMatrix>,
    pub x: &'a DeviceBuf,
    pub x2: Option<&'a DeviceBuf>,
    pub y: &'a DeviceBuf,
    pub m: usize,
}

/// RMSNorm weights (`k` f32) and epsilon: `x / sqrt(mean(x²) + eps) * weight`.
#[derive(Clone, Copy)]
pub struct GemvNorm<'a> {
    pub weight: &'a DeviceBuf,
    pub eps: f32,
}

impl GemvNorm<'_> {
    pub(super) fn check(&self, k: usize) -> Result<()> {
        need("norm", self.weight, k, "norm weights (k)")?;
        if !self.weight.ptr().is_multiple_of(16) || !self.eps.is_finite() || self.eps < 0.0 {
            return Err(invalid(
                "norm",
                "weights must be 16-byte aligned and eps finite and non-negative",
            ));
        }
        Ok(())
    }
}

pub(super) fn need(arg: &'static str, buf: &DeviceBuf, elems: usize, what: &str) -> Result<()> {
    let bytes = elems
        .checked_mul(4)
        .ok_or_else(|| invalid(arg, "size overflows"))?;
    if buf.bytes() < bytes {
        return Err(invalid(
            arg,
            format!(
                "{} bytes hold fewer than the {elems} f32 {what}",
                buf.bytes()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::aligned_for_bulk;
    use flexkern_quant::Format;

    /// The bulk ring's spans: whole words for Q4_0 and Q4_K rows of k a multiple of 256 at an
    /// allocation's start; not where the base or a row's side entries are off a word.
    #[test]
    fn bulk_spans_are_whole_words() {
        assert!(aligned_for_bulk(0x1000, Format::Q4_0, 14336, 4096));
        assert!(aligned_for_bulk(0x1000, Format::Q4K, 4096, 14336));
        assert!(!aligned_for_bulk(0x1008, Format::Q4_0, 14336, 4096));
        // 4128 = 129 blocks: 2064 code bytes a row (whole words) but 258 side bytes.
        assert!(!aligned_for_bulk(0x1000, Format::Q4_0, 8, 4128));
        // One block a row: 16 code bytes, but a 2-byte side span.
        assert!(!aligned_for_bulk(0x1000, Format::Q4_0, 3, 32));
    }
}
