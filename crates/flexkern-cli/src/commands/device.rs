//! The one device choice every command takes (`--device cpu|cuda`).

use anyhow::{bail, Result};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// The CPU backend (AVX2/FMA or portable kernels, rayon threads).
    #[default]
    Cpu,
    /// An NVIDIA GPU through CUDA.
    Cuda,
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }

    /// For commands that run on the CPU only, so far.
    pub fn require_cpu(self, command: &str) -> Result<()> {
        if self != Device::Cpu {
            bail!(
                "--device {}: `flexkern {command}` runs on the CPU only in this build",
                self.name()
            );
        }
        Ok(())
    }
}
