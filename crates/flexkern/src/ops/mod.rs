//! Standalone elementwise and row operations that sit beside attention in an inference step.

pub mod softmax;

pub use softmax::{softcap, softmax_rows};
