//! The CPU backend: rayon over the plan's work list, AVX2/FMA kernels chosen at run time.

mod run;
pub(crate) mod simd;
mod tensor_ops;
mod tile;
mod tile_mask;

use crate::attention::kv::KvSource;
use crate::attention::plan::Plan;
use crate::attention::problem::Problem;
use crate::backend::{Backend, Caps};
use crate::error::Result;
use simd::Isa;
use std::sync::OnceLock;

/// The CPU backend, with the fastest kernels this CPU supports (AVX2/FMA/F16C or portable).
/// `FLEXKERN_FORCE_SCALAR=1` forces the portable kernels for the whole process.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

/// The CPU backend restricted to the portable kernels, so tests cover both paths in one process.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ScalarCpuBackend;

impl CpuBackend {
    /// The portable kernels only.
    #[doc(hidden)]
    pub fn scalar() -> ScalarCpuBackend {
        ScalarCpuBackend
    }

    /// Name of the kernel set in use ("avx2" or "scalar").
    pub fn isa_name(&self) -> &'static str {
        isa().name
    }
}

fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let force = std::env::var_os("FLEXKERN_FORCE_SCALAR").is_some_and(|v| v != "0");
        Isa::detect(force)
    })
}

fn caps(isa: Isa) -> Caps {
    Caps {
        name: "cpu",
        workers: rayon::current_num_threads(),
        simd_lanes: if isa.name == "scalar" { 1 } else { 8 },
    }
}

impl Backend for ScalarCpuBackend {
    fn caps(&self) -> Caps {
        caps(Isa::detect(true))
    }

    fn attention(
        &self,
        p: &Problem,
        kv: &dyn KvSource,
        plan: &Plan,
        out: &mut [f32],
        lse: Option<&mut [f32]>,
    ) -> Result<()> {
        run::attention(Isa::detect(true), p, kv, plan, out, lse)
    }
}

impl Backend for CpuBackend {
    fn caps(&self) -> Caps {
        caps(isa())
    }

    fn attention(
        &self,
        p: &Problem,
        kv: &dyn KvSource,
        plan: &Plan,
        out: &mut [f32],
        lse: Option<&mut [f32]>,
    ) -> Result<()> {
        run::attention(isa(), p, kv, plan, out, lse)
    }
}
