//! Run-time CPU feature choice, and the one switch that forces the portable kernels: the
//! environment variable `FLEXKERN_FORCE_SCALAR=1` (read once, at the first kernel choice of
//! the process) or `set_force_scalar`. Every CPU kernel of flexkern, GEMV and attention alike,
//! follows it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static FORCE_SCALAR: AtomicBool = AtomicBool::new(false);
static FROM_ENV: Once = Once::new();

/// Whether `FLEXKERN_FORCE_SCALAR` asks for the portable kernels.
pub fn env_forces_portable() -> bool {
    std::env::var_os("FLEXKERN_FORCE_SCALAR").is_some_and(|v| v != "0")
}

fn init() {
    FROM_ENV.call_once(|| {
        if env_forces_portable() {
            FORCE_SCALAR.store(true, Ordering::Relaxed);
        }
    });
}

/// Force (or stop forcing) the portable scalar kernels process-wide. Both paths give results
/// within the documented tolerance, so flipping this while other threads run is harmless.
pub fn set_force_scalar(on: bool) {
    init();
    FORCE_SCALAR.store(on, Ordering::Relaxed);
}

/// Whether the portable kernels are forced now.
pub fn forced_scalar() -> bool {
    init();
    FORCE_SCALAR.load(Ordering::Relaxed)
}

/// True when the AVX2 + FMA + F16C kernels may run.
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if forced_scalar() {
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
