//! `flexkern verify`: the oracle comparison table over shapes, dtypes and variants.

use anyhow::{bail, Result};
use clap::Args;
use flexkern::verify::{paged_cases, run_case, run_paged_case, standard_cases, Outcome};
use flexkern::CpuBackend;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Device: cpu | cuda.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// A smaller matrix.
    #[arg(long)]
    pub quick: bool,
    /// Seed of the random inputs (fresh each run unless given).
    #[arg(long)]
    pub seed: Option<u64>,
}

pub fn run_verify(a: &VerifyArgs) -> Result<()> {
    if a.device != "cpu" && a.device != "cuda" {
        bail!("--device {}: expected cpu or cuda", a.device);
    }
    let backend = CpuBackend;
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    println!("flexkern verify --device {} (seed {seed})", a.device);
    println!(
        "{:<30} {:<5} {:>10} {:>10} {:>8}  result",
        "case", "dtype", "err O", "err LSE", "tol"
    );
    let (mut pass, mut fail) = (0, 0);
    let mut report = |r: Outcome| {
        println!(
            "{:<52} {:<5} {:>10.2e} {:>10.2e} {:>8.0e}  {}{}",
            r.name,
            r.dtype.name(),
            r.err_o,
            r.err_lse,
            r.tol,
            if r.passed { "pass" } else { "FAIL" },
            if r.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.note)
            }
        );
        if r.passed {
            pass += 1;
        } else {
            fail += 1;
        }
    };
    if a.device == "cuda" {
        super::cuda::verify(a.quick, seed, &mut report)?;
    } else {
        for (i, c) in standard_cases(a.quick).iter().enumerate() {
            report(run_case(&backend, c, seed.wrapping_add(i as u64)));
        }
        for (i, c) in paged_cases(a.quick).iter().enumerate() {
            report(run_paged_case(
                &backend,
                c,
                seed.wrapping_add(1000 + i as u64),
            ));
        }
    }
    println!("verify: {pass} passed, {fail} failed");
    if fail > 0 {
        bail!("{fail} verification case(s) failed");
    }
    Ok(())
}
