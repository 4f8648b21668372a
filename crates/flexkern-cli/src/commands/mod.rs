//! One module per subcommand family.

pub mod attn;
pub mod attn_expr;
pub mod bench;
pub mod bench_cascade;
pub mod bench_common;
pub mod bench_gemv;
pub mod bench_mixed;
pub mod cuda;
pub mod cuda_gemv;
pub mod device;
pub mod limits;
pub mod paged;
pub mod perplexity;
pub mod quant;
pub mod run;
pub mod run_args;
pub mod run_batch;
pub mod run_cuda;
pub mod run_one;
pub mod synth;
pub mod threads;
pub mod tune;
pub mod tune_cuda;
pub mod verify;
pub mod verify_model;
