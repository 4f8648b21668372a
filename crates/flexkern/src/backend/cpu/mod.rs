//! The CPU backend: rayon over the plan's work list, AVX2/FMA kernels chosen at run time.

use crate::attention::kv::KvSource;
use crate::attention::plan::Plan;
use crate::attention::problem::Problem;
use crate::backend::{Backend, Caps};
use crate::error::Result;

#[derive(Clone, Debug, Default)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn caps(&self) -> Caps {
        Caps {
            name: "cpu",
            workers: rayon::current_num_threads(),
            simd_lanes: 8,
        }
    }

    fn attention(
        &self,
        _p: &Problem,
        _kv: &dyn KvSource,
        _plan: &Plan,
        _out: &mut [f32],
        _lse: Option<&mut [f32]>,
    ) -> Result<()> {
        Err(crate::error::Error::Backend {
            backend: "cpu",
            msg: "attention kernels not built yet".into(),
        })
    }
}
