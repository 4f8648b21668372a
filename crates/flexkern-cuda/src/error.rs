//! One typed error for the CUDA backend: every driver and NVRTC failure is named.

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No libcuda could be loaded, or the driver reports no device: `--device cuda` cannot run.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// NVRTC (the run-time compiler) could not be loaded.
    #[error("NVRTC not found: {0}")]
    NoNvrtc(String),
    /// A driver call failed.
    #[error("CUDA driver call `{call}` failed: {msg}")]
    Driver { call: &'static str, msg: String },
    /// NVRTC rejected a kernel source.
    #[error("NVRTC compile of `{module}` failed: {log}")]
    Compile { module: String, log: String },
    /// The problem cannot run on this backend (reason given), before anything is launched.
    #[error("argument `{arg}`: {msg}")]
    Invalid { arg: &'static str, msg: String },
    #[error(transparent)]
    Flexkern(#[from] flexkern::Error),
}

pub type Result<T, E = CudaError> = std::result::Result<T, E>;

pub(crate) fn driver(call: &'static str, e: cudarc::driver::DriverError) -> CudaError {
    CudaError::Driver {
        call,
        msg: format!("{e:?}"),
    }
}

pub(crate) fn invalid(arg: &'static str, msg: impl Into<String>) -> CudaError {
    CudaError::Invalid {
        arg,
        msg: msg.into(),
    }
}

impl From<CudaError> for flexkern::Error {
    fn from(e: CudaError) -> flexkern::Error {
        match e {
            CudaError::Flexkern(e) => e,
            other => flexkern::Error::Backend {
                backend: "cuda",
                msg: other.to_string(),
            },
        }
    }
}
