//! One module per subcommand family.

pub mod attn;
pub mod attn_expr;
pub mod bench;
pub mod bench_cascade;
pub mod bench_gemv;
pub mod bench_mixed;
pub mod cuda;
pub mod device;
pub mod limits;
pub mod paged;
pub mod perplexity;
pub mod quant;
pub mod run;
pub mod threads;
pub mod verify;
