//! `flexkern run --device cuda`: the CPU's single-prompt path (`run_one::run_on`, generic over
//! `TensorOps`) on GPU 0 through `CudaBackend`: weights uploaded once in the file's layout
//! (with a progress bar), the KV cache in device pages, GEMV / SwiGLU / norms / RoPE /
//! attention as CUDA kernels. Each decode step after the first replays a CUDA graph of the
//! step (`FLEXKERN_CUDA_GRAPH=0`: launch every kernel each step), and only the sampler's
//! candidates come back: greedy's one token, top-k's k (id, logit) pairs found on the GPU.

use super::run_args::RunArgs;
use anyhow::bail;
use indicatif::{ProgressBar, ProgressStyle};

pub fn run_model(args: RunArgs) -> anyhow::Result<()> {
    if args.batch.parallel.is_some() {
        bail!("--parallel: batched generation runs on the CPU only so far (--device cpu)");
    }
    let dev = super::cuda::open("run")?;
    let backend = flexkern_cuda::backend::CudaBackend::on(dev.clone());
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("uploading weights to the GPU {bar:40} {pos}/{len}")
            .expect("valid template"),
    );
    let r = super::run_one::run_on(&args, backend, &dev.props.name, |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        if done == total {
            bar.finish_and_clear();
        }
    });
    bar.finish_and_clear();
    r
}
