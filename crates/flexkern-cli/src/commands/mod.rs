//! One module per subcommand family.

pub mod attn;
pub mod bench;
pub mod bench_cascade;
pub mod bench_gemv;
pub mod device;
pub mod limits;
pub mod paged;
pub mod quant;
pub mod run;
pub mod verify;
