//! One typed error for the library. Every invalid argument is named; nothing panics.

use crate::dtype::DType;

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Error {
    /// An argument is malformed: wrong rank, shape, stride, length, value.
    #[error("argument `{arg}`: {msg}")]
    InvalidArgument { arg: &'static str, msg: String },
    /// Two arguments that must agree do not.
    #[error("arguments `{a}` and `{b}` disagree: {msg}")]
    Mismatch {
        a: &'static str,
        b: &'static str,
        msg: String,
    },
    #[error("argument `{arg}`: dtype {got:?} is not supported here ({msg})")]
    UnsupportedDType {
        arg: &'static str,
        got: DType,
        msg: String,
    },
    /// A variant expression is ill-typed or indexes a capture out of bounds.
    #[error("variant expression: {0}")]
    Expr(String),
    /// The KV cache has no free page; every sequence is left as it was.
    #[error("KV cache out of pages: need {needed}, {free} free")]
    OutOfPages { needed: usize, free: usize },
    /// An allocation sized by the input could not be made (checked before allocating).
    #[error("out of memory: {what} needs {bytes} bytes")]
    OutOfMemory { what: String, bytes: u128 },
    /// A backend cannot run this problem (e.g. not compiled in, no device).
    #[error("backend `{backend}`: {msg}")]
    Backend { backend: &'static str, msg: String },
    #[error(transparent)]
    Quant(#[from] flexkern_quant::QuantError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn invalid(arg: &'static str, msg: impl Into<String>) -> Error {
    Error::InvalidArgument {
        arg,
        msg: msg.into(),
    }
}

pub(crate) fn mismatch(a: &'static str, b: &'static str, msg: impl Into<String>) -> Error {
    Error::Mismatch {
        a,
        b,
        msg: msg.into(),
    }
}
