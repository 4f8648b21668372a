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
}

fn main() {
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        // --- dispatch (one line each) ---
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
