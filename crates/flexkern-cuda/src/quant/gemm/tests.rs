//! The GEMM plan and its kernels' compilation (needs NVRTC for the latter).

use super::*;

const AMPERE: Target = Target {
    min_m: 17,
    wgmma: false,
    bn: None,
};
const HOPPER: Target = Target {
    min_m: 17,
    wgmma: true,
    bn: None,
};

fn plan(f: Format, n: usize, k: usize, m: usize) -> Option<Gemm> {
    Gemm::plan(&AMPERE, f, n, k, m, Mode::Plain, true, true)
}

#[test]
fn the_plan_follows_the_batch_the_format_and_the_device() {
    assert_eq!(
        plan(Format::Q4_0, 4096, 4096, 16),
        None,
        "GEMV below 17 rows"
    );
    assert_eq!(
        Gemm::plan(
            &AMPERE,
            Format::Q4_0,
            4096,
            4096,
            64,
            Mode::Plain,
            false,
            true
        ),
        None,
        "the precise path keeps f32 activations"
    );
    assert_eq!(plan(Format::F32, 4096, 4096, 64), None);
    assert_eq!(
        Gemm::plan(&AMPERE, Format::Q4_0, 64, 64, 64, Mode::Stack, true, true),
        None
    );
    let g = plan(Format::Q4_0, 14336, 4096, 512).expect("planned");
    assert_eq!((g.bm, g.wm, g.stages, g.threads()), (128, 2, 3, 256));
    assert!(
        !g.direct && g.panel_rows(14336, 4096) == 14336,
        "one panel at 8B's widest"
    );
    assert!(g.smem_bytes() * 2 <= 227 << 10, "two blocks per H100 SM");
    let g = plan(Format::Q8_0, 128256, 4096, 512).expect("planned");
    let p = g.panel_rows(128256, 4096);
    assert!(p.is_multiple_of(g.bn) && p * 4096 * 2 <= PANEL_BYTES && p < 128256);
    let g = plan(Format::Q4K, 4096, 4096, 20).expect("planned");
    assert_eq!((g.bm, g.wm, g.threads()), (32, 1, 128));
    let g = plan(Format::F16, 4096, 4096, 100).expect("planned");
    assert!(g.direct && g.operand == Operand::F16 && g.bm == 128);
    let g = plan(Format::BF16, 45, 1001, 100).expect("planned");
    assert!(
        !g.direct && g.operand == Operand::BF16,
        "k off the tile: a padded copy"
    );
    let g = Gemm::plan(
        &AMPERE,
        Format::F16,
        4096,
        4096,
        100,
        Mode::Plain,
        true,
        false,
    );
    assert!(!g.expect("planned").direct, "unaligned weights are copied");
    // Hopper: warpgroup MMA from 64 rows, mma.sync below.
    let h = |m| {
        Gemm::plan(
            &HOPPER,
            Format::Q4_0,
            4096,
            4096,
            m,
            Mode::Plain,
            true,
            true,
        )
    };
    assert!(!h(63).expect("planned").wgmma);
    let g = h(64).expect("planned");
    assert!(g.wgmma && g.bm == 128 && g.bn == 128 && g.threads() == 384);
    let wide_n = Gemm::plan(
        &HOPPER,
        Format::F16,
        14336,
        4096,
        512,
        Mode::Plain,
        true,
        true,
    );
    assert_eq!(
        wide_n.expect("planned").bn,
        256,
        "wide matrices take n256 tiles"
    );
    assert!(g.smem_bytes() <= 227 << 10);
    let wide = Target {
        bn: Some(256),
        ..HOPPER
    };
    let g = Gemm::plan(
        &wide,
        Format::Q4_0,
        4096,
        4096,
        512,
        Mode::Plain,
        true,
        true,
    );
    assert!(
        g.expect("planned").smem_bytes() <= 227 << 10,
        "n256 fits too"
    );
}

/// Every tile shape the plan picks compiles for sm_90a without spilling (needs NVRTC).
#[test]
fn gemm_kernels_compile_without_spills() {
    if !crate::runtime::nvrtc_present() {
        eprintln!("skipped: no NVRTC");
        return;
    }
    let wide = Target {
        bn: Some(256),
        ..HOPPER
    };
    for (t, m) in [
        (AMPERE, 20),
        (AMPERE, 40),
        (AMPERE, 300),
        (HOPPER, 300),
        (wide, 300),
    ] {
        for f in [Format::Q4_0, Format::BF16] {
            let g = Gemm::plan(&t, f, 4096, 4096, m, Mode::Plain, true, true).expect("planned");
            let (_, log) = crate::runtime::compile::compile_verbose(&g.mma_source(), "sm_90a")
                .expect("compiles");
            let (_, spills, stack) = crate::runtime::compile::ptxas_resources(&log);
            assert_eq!((spills, stack), (0, 0), "{log}");
        }
    }
    for (f, k) in [
        (Format::Q4_0, 4096),
        (Format::Q4K, 4096),
        (Format::Q6K, 4096),
        (Format::BF16, 1001),
    ] {
        let unit = super::super::unit_type(f, k).expect("unit");
        crate::runtime::compile::compile_for(&prep_source(&unit, Operand::F16), "sm_90a")
            .expect("prep compiles");
    }
}
