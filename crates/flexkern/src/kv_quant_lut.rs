//! Decode tables for the 8-bit KV encodings (built once).

use crate::dtype::{fp8_e4m3_to_f32, fp8_e5m2_to_f32};
use std::sync::OnceLock;

pub(crate) fn e4m3() -> &'static [f32; 256] {
    static T: OnceLock<[f32; 256]> = OnceLock::new();
    T.get_or_init(|| std::array::from_fn(|i| fp8_e4m3_to_f32(i as u8)))
}

pub(crate) fn e5m2() -> &'static [f32; 256] {
    static T: OnceLock<[f32; 256]> = OnceLock::new();
    T.get_or_init(|| std::array::from_fn(|i| fp8_e5m2_to_f32(i as u8)))
}
