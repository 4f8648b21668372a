//! The backend interface: one small trait that every device implements.

pub mod cpu;
pub mod tensor_ops;

use crate::attention::kv::KvSource;
use crate::attention::plan::Plan;
use crate::attention::problem::Problem;
use crate::error::Result;

/// What the planner needs to know about a device.
#[derive(Clone, Debug)]
pub struct Caps {
    /// Backend name, e.g. "cpu".
    pub name: &'static str,
    /// Parallel workers (CPU threads, GPU SMs).
    pub workers: usize,
    /// SIMD width in f32 lanes the kernels use (1 = scalar).
    pub simd_lanes: usize,
}

/// A device that runs flexkern's kernels.
pub trait Backend: Sync {
    fn caps(&self) -> Caps;

    /// Runs a planned attention call. `out` is `[tokens, Hq, Dv]`, `lse` `[tokens, Hq]`
    /// (natural log). Shapes were validated by the caller.
    fn attention(
        &self,
        p: &Problem,
        kv: &dyn KvSource,
        plan: &Plan,
        out: &mut [f32],
        lse: Option<&mut [f32]>,
    ) -> Result<()>;
}
