//! `flexkern`: the command-line tool. Each subcommand lives in `commands/`.

mod commands;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "flexkern",
    version,
    about = "Attention and quantized GEMV kernels for LLM inference"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // --- subcommands (one line each; keep this list sorted by area) ---
    /// Run a GGUF model on a prompt, streaming tokens.
    Run(commands::run::RunArgs),
    /// Perplexity of a GGUF model on a text file (llama.cpp's definition).
    Perplexity(commands::perplexity::PerplexityArgs),
    /// Attention over .npy files (the interop path).
    Attn(Box<commands::attn::AttnArgs>),
    /// Compare every kernel with the f64 oracle over a matrix of cases.
    Verify(commands::verify::VerifyArgs),
    /// The model on a device against the CPU's precise path, logits at every position.
    VerifyModel(commands::verify_model::VerifyModelArgs),
    /// Benchmarks beside the machine limits measured in the same run.
    Bench(commands::bench::BenchArgs),
    /// Quantize a .npy f32 [N, K] into raw GGUF tensor bytes.
    Quantize(commands::quant::QuantizeArgs),
    /// Dequantize raw tensor bytes into a .npy f32 [N, K].
    Dequantize(commands::quant::DequantizeArgs),
    /// y = W x for raw quantized W and .npy x.
    Gemv(commands::quant::GemvArgs),
    /// A llama-family GGUF with random weights at a published shape (benchmarks).
    SynthModel(commands::synth::SynthArgs),
    /// Measure the CPU tile choices on this machine and write the tune table.
    Tune(commands::tune::TuneArgs),
}

fn main() {
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        // --- dispatch (one line each) ---
        Command::Run(a) => commands::run::run_model(a),
        Command::Perplexity(a) => commands::perplexity::run_perplexity(&a),
        Command::Attn(a) => commands::attn::run_attn(&a),
        Command::Verify(a) => commands::verify::run_verify(&a),
        Command::VerifyModel(a) => commands::verify_model::run_verify_model(&a),
        Command::Bench(a) => commands::bench::run_bench(&a),
        Command::Quantize(a) => commands::quant::run_quantize(&a),
        Command::Dequantize(a) => commands::quant::run_dequantize(&a),
        Command::Gemv(a) => commands::quant::run_gemv(&a),
        Command::SynthModel(a) => commands::synth::run_synth(&a),
        Command::Tune(a) => commands::tune::run_tune(&a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        // 3: no CUDA device (`--device cuda` on a machine without one); CI reads it as skipped.
        std::process::exit(if commands::cuda::is_no_device(&e) {
            3
        } else {
            1
        });
    }
}
