//! One module per subcommand family.

pub mod quant;
pub mod bench_gemv;
