//! `flexkern verify`: the oracle comparison table over shapes, dtypes and variants.

use super::device::Device;
use anyhow::{bail, Result};
use clap::Args;
use flexkern::verify::{paged_cases, run_case, run_paged_case, standard_cases, Outcome};
use flexkern::{Backend, CpuBackend};

#[derive(Args, Debug)]
pub struct VerifyArgs {
    #[arg(long, value_enum, default_value_t)]
    pub device: Device,
    /// A smaller matrix.
    #[arg(long)]
    pub quick: bool,
    /// Seed of the random inputs (fresh each run unless given).
    #[arg(long)]
    pub seed: Option<u64>,
}

pub fn run_verify(a: &VerifyArgs) -> Result<()> {
    match a.device {
        Device::Cpu => verify_on(&CpuBackend, a),
        Device::Cuda => table(a, |quick, seed, report| {
            super::cuda::verify(quick, seed, report)
        }),
    }
}

/// The oracle table on any backend.
pub fn verify_on<B: Backend>(backend: &B, a: &VerifyArgs) -> Result<()> {
    table(a, |quick, seed, report| {
        for (i, c) in standard_cases(quick).iter().enumerate() {
            report(run_case(backend, c, seed.wrapping_add(i as u64)));
        }
        for (i, c) in paged_cases(quick).iter().enumerate() {
            report(run_paged_case(
                backend,
                c,
                seed.wrapping_add(1000 + i as u64),
            ));
        }
        Ok(())
    })
}

/// Prints the table of the outcomes `cases` reports, and fails when any failed.
fn table(
    a: &VerifyArgs,
    cases: impl FnOnce(bool, u64, &mut dyn FnMut(Outcome)) -> Result<()>,
) -> Result<()> {
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    println!("flexkern verify --device {} (seed {seed})", a.device.name());
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
    cases(a.quick, seed, &mut report)?;
    println!("verify: {pass} passed, {fail} failed");
    if fail > 0 {
        bail!("{fail} verification case(s) failed");
    }
    Ok(())
}
