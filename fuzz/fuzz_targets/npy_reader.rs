//! Any byte string through the .npy parser and its conversions.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = flexkern::npy::from_bytes(data) {
        let _ = a.to_f32();
        let _ = a.to_i64("fuzz");
    }
});
