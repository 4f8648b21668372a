//! Run-time CPU feature choice, with a switch that forces the portable path (for tests).

use std::sync::atomic::{AtomicBool, Ordering};

static FORCE_SCALAR: AtomicBool = AtomicBool::new(false);

/// Force (or stop forcing) the portable scalar kernels process-wide. Both paths give results
/// within the documented tolerance, so flipping this while other threads run is harmless.
pub fn set_force_scalar(on: bool) {
    FORCE_SCALAR.store(on, Ordering::Relaxed);
    crate::k_quants::force_scalar(on);
}

/// True when the AVX2 + FMA + F16C kernels may run.
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if FORCE_SCALAR.load(Ordering::Relaxed) {
            return false;
        }
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
