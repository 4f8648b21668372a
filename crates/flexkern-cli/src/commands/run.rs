//! `flexkern run`: picks the path for the arguments: `--device cuda`, `--parallel` batches,
//! or one prompt on the CPU.

use super::device::Device;
pub use super::run_args::RunArgs;
use flexkern::CpuBackend;

pub fn run_model(args: RunArgs) -> anyhow::Result<()> {
    if args.device == Device::Cuda {
        return super::run_cuda::run_model(args);
    }
    args.device.require_cpu("run")?;
    if let Some(t) = args.threads {
        let t = super::threads::check_threads(t)?;
        // Fails only if the pool already exists, which leaves the default in place.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global();
    }
    if let Some(n) = args.batch.parallel {
        return super::run_batch::run_batch(&args, n);
    }
    let label = format!("{} threads", rayon::current_num_threads());
    super::run_one::run_on(&args, CpuBackend, &label, |_, _| {})
}
