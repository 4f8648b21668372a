//! The portable (non-SIMD) kernels, forced process-wide: a separate test binary so the switch
//! cannot leak into the SIMD tests.

mod common;

#[test]
fn scalar_gemv_matches_f64_oracle_all_formats() {
    flexkern_quant::cpu::set_force_scalar(true);
    common::gemv_oracle_sweep("scalar");
}

#[test]
fn scalar_precise_gemv_matches_f64_oracle_all_formats() {
    flexkern_quant::cpu::set_force_scalar(true);
    common::precise_oracle_sweep("scalar");
}
