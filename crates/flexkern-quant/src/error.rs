//! Typed errors: every bad argument is named, nothing panics.

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QuantError {
    #[error("argument `{arg}`: {msg}")]
    InvalidArgument { arg: &'static str, msg: String },
    #[error("unknown format name `{0}`")]
    UnknownFormat(String),
    #[error("format {format:?} does not support {what}")]
    Unsupported {
        format: crate::format::kind::Format,
        what: &'static str,
    },
    /// `quantize` rejects NaN and ±Inf: no format can represent them faithfully in its scales.
    #[error("argument `{arg}`: non-finite value {value} at element {index}")]
    NonFinite {
        arg: &'static str,
        index: usize,
        value: f32,
    },
    /// `quantize`: a finite value the format cannot store (see `Format::max_abs_weight`).
    #[error("argument `{arg}`: value {value} at element {index} exceeds {format}'s range (|x| <= {limit})")]
    OutOfRange {
        arg: &'static str,
        index: usize,
        value: f32,
        limit: f32,
        format: crate::format::kind::Format,
    },
    /// An allocation sized by the arguments cannot be made (see `crate::mem`).
    #[error(transparent)]
    Alloc(#[from] crate::mem::AllocError),
}

pub type Result<T, E = QuantError> = std::result::Result<T, E>;

/// Shorthand for an `InvalidArgument` error.
pub(crate) fn invalid(arg: &'static str, msg: impl Into<String>) -> QuantError {
    QuantError::InvalidArgument {
        arg,
        msg: msg.into(),
    }
}
