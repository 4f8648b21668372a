//! `--threads`: checked against this machine's cores before any pool is built. Far more
//! threads than cores only adds contention (`--threads 1000` took seconds per token).

use anyhow::{bail, Result};

/// Threads per core allowed beyond which `--threads` is refused.
const PER_CORE: usize = 4;

/// `t` if it is in `1..=PER_CORE x cores`, else an error naming `--threads`.
pub fn check_threads(t: usize) -> Result<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let max = cores * PER_CORE;
    if t == 0 {
        bail!("--threads 0: give at least 1 (or leave it out for one per core)");
    }
    if t > max {
        bail!(
            "--threads {t}: more than {PER_CORE} x the {cores} cores here ({max}) only adds \
             contention; give at most {max}"
        );
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    #[test]
    fn zero_and_far_too_many_threads_are_refused() {
        assert!(super::check_threads(0).is_err());
        assert!(super::check_threads(1).is_ok());
        let e = super::check_threads(1 << 20).unwrap_err().to_string();
        assert!(e.starts_with("--threads"), "{e}");
    }
}
