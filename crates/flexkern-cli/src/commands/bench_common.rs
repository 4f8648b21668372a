//! What the benchmarks share: the attention bench's arguments (CPU and CUDA) and the result
//! row with its table and CSV output.

use anyhow::Result;
use clap::Args;
use std::io::Write;

#[derive(Args, Debug, Default)]
pub struct AttnBenchArgs {
    /// Fewer repetitions and smaller shapes (smoke test of the benchmark itself).
    #[arg(long)]
    pub quick: bool,
    /// Only the section(s) whose name contains this: prefill, decode, paged, cascade; on cuda
    /// also `short` (decode at a model step's 64-160 keys, latency-bound: not in the default run).
    #[arg(long, default_value = "")]
    pub only: String,
    /// Also append the rows to this CSV file.
    #[arg(long)]
    pub csv: Option<std::path::PathBuf>,
    /// cuda: the decode shapes of issue 13 beside the card's copy bandwidth.
    #[arg(long, value_enum, default_value_t)]
    pub device: super::device::Device,
    /// Deterministic split-KV partitions (cuda).
    #[arg(long)]
    pub deterministic: bool,
}

/// One result row.
pub struct Row {
    pub case: String,
    pub ms: f64,
    pub gflops: f64,
    pub gbs: f64,
    pub ratio: f64,
    pub limit: String,
}

pub fn print_rows(rows: &[Row], csv: Option<&std::path::Path>) -> Result<()> {
    println!(
        "{:<52} {:>10} {:>9} {:>8} {:>8}  of",
        "case", "median ms", "GFLOP/s", "GB/s", "ratio"
    );
    for r in rows {
        println!(
            "{:<52} {:>10.3} {:>9.1} {:>8.2} {:>7.1}%  {}",
            r.case,
            r.ms,
            r.gflops,
            r.gbs,
            r.ratio * 100.0,
            r.limit
        );
    }
    if let Some(p) = csv {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)?;
        for r in rows {
            writeln!(
                f,
                "{},{:.4},{:.2},{:.3},{:.4},{}",
                r.case, r.ms, r.gflops, r.gbs, r.ratio, r.limit
            )?;
        }
    }
    Ok(())
}
