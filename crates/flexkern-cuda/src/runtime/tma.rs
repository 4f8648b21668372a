//! Tensor Memory Accelerator descriptors (Hopper): what the GEMM's and the prefill attention's
//! producer thread hands to `cp.async.bulk.tensor` (kernels/wgmma.cuh `fk_tma_load2/3`).

use crate::error::{driver, invalid, Result};
use cudarc::driver::sys::CUtensorMap;
use std::ffi::c_void;

/// A tiled map of a 16-bit tensor (bf16, else f16) at `ptr`: `dims` innermost first, `strides`
/// the bytes between consecutive indices of each outer dimension, `boxes` the elements one copy
/// moves per dimension. 128-byte swizzle (chunk c of row r at c ^ (r & 7): the staging layout of
/// the Hopper kernels), zeros past the dims, L2 fetches of 256 bytes.
pub fn tiled_map(
    ptr: u64,
    bf16: bool,
    dims: &[u64],
    strides: &[u64],
    boxes: &[u32],
) -> Result<CUtensorMap> {
    use cudarc::driver::sys::{
        cuTensorMapEncodeTiled, CUtensorMapDataType as T, CUtensorMapFloatOOBfill as Fill,
        CUtensorMapInterleave as Il, CUtensorMapL2promotion as L2, CUtensorMapSwizzle as Sw,
    };
    let rank = dims.len();
    if !(1..=5).contains(&rank)
        || strides.len() + 1 != rank
        || boxes.len() != rank
        || !ptr.is_multiple_of(16)
        || strides.iter().any(|s| !s.is_multiple_of(16))
        || dims.iter().any(|&d| d == 0 || d > 1 << 32)
    {
        return Err(invalid(
            "tma",
            "a 16-byte aligned base, strides of whole 16 bytes and dims of 1 to 2^32",
        ));
    }
    // SAFETY: a zeroed tensor map is plain bytes the call fills.
    let mut map: CUtensorMap = unsafe { std::mem::zeroed() };
    let steps = [1u32; 5];
    let ty = if bf16 {
        T::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    } else {
        T::CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    };
    // SAFETY: the slices outlive the call and hold rank entries (rank - 1 strides), checked
    // above with the alignment the driver requires.
    unsafe {
        cuTensorMapEncodeTiled(
            &mut map,
            ty,
            rank as u32,
            ptr as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            steps.as_ptr(),
            Il::CU_TENSOR_MAP_INTERLEAVE_NONE,
            Sw::CU_TENSOR_MAP_SWIZZLE_128B,
            L2::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            Fill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .map_err(|e| driver("cuTensorMapEncodeTiled", e))?;
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::tiled_map;

    /// Bad descriptors are typed errors before the driver is asked (no GPU needed): an
    /// unaligned base, strides off 16 bytes, ranks and box counts that disagree, empty or
    /// oversized dims.
    #[test]
    fn bad_descriptors_are_typed_errors() {
        let bad = [
            tiled_map(8, false, &[64, 4], &[128], &[64, 4]),
            tiled_map(0, false, &[64, 4], &[120], &[64, 4]),
            tiled_map(0, false, &[64, 4], &[128, 128], &[64, 4]),
            tiled_map(0, false, &[64, 4], &[128], &[64]),
            tiled_map(0, true, &[64, 0], &[128], &[64, 4]),
            tiled_map(0, true, &[64, (1 << 32) + 1], &[128], &[64, 4]),
            tiled_map(0, true, &[], &[], &[]),
        ];
        for (i, r) in bad.iter().enumerate() {
            assert!(
                matches!(r, Err(crate::CudaError::Invalid { arg: "tma", .. })),
                "case {i}: {r:?}"
            );
        }
    }
}
