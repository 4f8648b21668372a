//! `flexkern`: the command-line tool. Each subcommand lives in `commands/`.

mod commands;
mod npy;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "flexkern", version, about = "Attention and quantized GEMV kernels for LLM inference")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // --- subcommands (one line each; keep this list sorted by area) ---
    /// Quantize a .npy f32 [N, K] into raw GGUF tensor bytes.
    Quantize(commands::quant::QuantizeArgs),
    /// Dequantize raw tensor bytes into a .npy f32 [N, K].
    Dequantize(commands::quant::DequantizeArgs),
    /// y = W x for raw quantized W and .npy x.
    Gemv(commands::quant::GemvArgs),
    /// Quantized GEMV beside measured memory read bandwidth.
    BenchGemv(commands::bench_gemv::BenchGemvArgs),
}

fn main() {
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        // --- dispatch (one line each) ---
        Command::Quantize(a) => commands::quant::run_quantize(&a),
        Command::Dequantize(a) => commands::quant::run_dequantize(&a),
        Command::Gemv(a) => commands::quant::run_gemv(&a),
        Command::BenchGemv(a) => commands::bench_gemv::run_bench_gemv(&a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
