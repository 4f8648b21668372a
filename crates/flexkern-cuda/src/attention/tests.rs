//! Unit tests of the attention host side: kernel choice, module names, NVRTC compiles.

use super::kernel::vec_width;
use super::*;
use crate::headers::COMMON;
use crate::plan::{mma_shape, MmaQuery, MmaShape};
use crate::runtime::compile::KernelSource;

#[test]
fn vector_width_follows_alignment() {
    assert_eq!(vec_width(2, &[128, 1024, 128]), 8);
    assert_eq!(vec_width(4, &[128]), 4);
    assert_eq!(vec_width(1, &[128]), 16);
    assert_eq!(vec_width(2, &[80, 1280]), 8);
    assert_eq!(vec_width(2, &[1]), 1);
    assert_eq!(vec_width(4, &[6]), 2);
}

/// Variants of every hook shape the compile checks cover: none, masks only (with a lifted
/// constant), a score hook, masks and scores with captured tensors.
fn test_variants() -> [flexkern::Variant; 4] {
    use flexkern::builtins::*;
    [
        flexkern::Variant::full(),
        flexkern::Variant::full()
            .mask(causal())
            .mask(sliding_window(64)),
        flexkern::Variant::full()
            .mask(causal())
            .score(softcap(30.0)),
        flexkern::Variant::full()
            .mask(document((0..4096).map(|i| i / 700).collect()))
            .mask(tree(vec![1, 3]))
            .score(alibi(alibi_slopes(8))),
    ]
}

/// Whether libnvrtc is missing (no compile checks then), said on stderr.
fn without_nvrtc(test: &str) -> bool {
    let missing = !crate::runtime::nvrtc_present();
    if missing {
        eprintln!("{test}: libnvrtc not found, compile check skipped");
    }
    missing
}

/// Compiles a spread of kernel configurations with NVRTC for sm_90a when libnvrtc is
/// loadable (no GPU needed); says so and checks nothing more when it is not.
#[test]
fn kernels_compile_with_nvrtc() {
    if without_nvrtc("kernels_compile_with_nvrtc") {
        return;
    }
    let variants = test_variants();
    let cfgs = [
        (2, 2, 2, 128, 128, 8, 8, 4, true),
        (0, 0, 0, 64, 64, 4, 4, 8, false),
        (1, 3, 3, 128, 128, 1, 16, 4, true),
        (2, 4, 5, 256, 256, 8, 16, 4, true),
        (0, 0, 0, 1, 1, 1, 1, 2, false),
        (2, 2, 2, 576, 512, 8, 8, 2, false),
        (0, 0, 0, 80, 80, 4, 4, 8, false),
        (1, 1, 1, 192, 128, 8, 8, 4, false),
    ];
    for (i, &(qt, kt, vt, dk, dv, vk, vv, rows, paged)) in cfgs.iter().enumerate() {
        let v = variants[i % variants.len()].compile().unwrap();
        let hooks = codegen::generate(&v);
        let sz = [4, 2, 2, 1, 1, 1];
        let fast = vk * sz[kt as usize] == 16 && vv * sz[vt as usize] == 16 && dk.max(dv) <= 256;
        let (async_tile, stages) = if fast { (32, 4) } else { (0, 0) };
        let k = KernelConfig {
            qt,
            kt,
            vt,
            dk,
            dv,
            vk,
            vv,
            rows,
            paged,
            async_tile,
            stages,
            mma: None,
            page_shift: if paged { 4 } else { -1 },
            nwarps: 4,
            tma: false,
            small_vars: true,
            page_window: false,
            trace: false,
        };
        let src = k.source(&hooks.source, 0);
        let t = std::time::Instant::now();
        let bin = crate::runtime::compile::compile_for(&src, "sm_90a")
            .unwrap_or_else(|e| panic!("{}: {e}", src.name));
        eprintln!(
            "{}: {} bytes in {:.0} ms",
            src.name,
            bin.len(),
            t.elapsed().as_secs_f64() * 1e3
        );
        assert!(!bin.is_empty());
    }
    let kv = KernelSource {
        name: "kv_write".into(),
        source: format!(
            "{}\n{}\n{}",
            COMMON.replace("#pragma once", ""),
            crate::headers::kv_store(),
            include_str!("../../kernels/kv_write.cu")
        ),
    };
    crate::runtime::compile::compile_for(&kv, "sm_90a").expect("kv_write compiles");
}

/// The tensor-core kernel compiles for sm_90a in the shapes the planner picks (decode with a
/// key split, prefill with an m-tile per warp; 2-byte and 1-byte K/V; Dk != Dv; a head size
/// of an odd number of k16 steps) without spills or a stack frame. Skipped without libnvrtc.
#[test]
fn tensor_core_kernels_compile_without_spills() {
    if without_nvrtc("tensor_core_kernels_compile_without_spills") {
        return;
    }
    let variants = test_variants();
    // (qt, kt, vt, dk, dv, q_rows, paged)
    let cases = [
        (2, 2, 2, 128, 128, 4, true),
        (1, 1, 1, 64, 64, 128, false),
        (2, 2, 2, 128, 128, 128, false),
        (2, 3, 3, 128, 128, 16, true),
        (1, 5, 4, 256, 256, 64, false),
        (1, 1, 1, 192, 128, 32, false),
        (2, 2, 2, 80, 80, 8, true),
        (2, 2, 2, 256, 256, 4, true),
        // The Hopper kernel: paged, Dk != Dv, f16.
        (2, 2, 2, 128, 128, 512, true),
        (2, 2, 2, 128, 64, 256, false),
        (1, 1, 1, 64, 128, 256, true),
        // Three consumer warpgroups (D 64, more than 128 rows): strided and paged.
        (2, 2, 2, 64, 64, 256, false),
        (1, 1, 1, 64, 64, 1024, true),
    ];
    for &(qt, kt, vt, dk, dv, q_rows, paged) in cases.iter() {
        let (rows, m) = mma_shape(&MmaQuery {
            qt,
            kt,
            vt,
            dk,
            dv,
            rows_aligned: true,
            rows_adjacent: !paged,
            q_rows,
            compute_capability: (9, 0),
            warps: 4,
            k_size: [4, 2, 2, 1, 1, 1][kt as usize],
            v_size: [4, 2, 2, 1, 1, 1][vt as usize],
            smem_optin: 227 * 1024,
            tuned: Default::default(),
        })
        .expect("the tensor-core path applies");
        let sz = [4, 2, 2, 1, 1, 1];
        let k = KernelConfig {
            qt,
            kt,
            vt,
            dk,
            dv,
            vk: 16 / sz[kt as usize],
            vv: 16 / sz[vt as usize],
            rows,
            paged,
            async_tile: 0,
            stages: 0,
            mma: Some(m),
            page_shift: if paged { 4 } else { -1 },
            nwarps: if m.wg { m.m_tiles } else { 4 },
            tma: false,
            small_vars: true,
            page_window: false,
            trace: false,
        };
        assert_eq!(
            m.wg,
            q_rows > 64
                && kt == qt
                && vt == qt
                && dk.max(dv) <= 128
                && dk % 64 == 0
                && dv % 64 == 0
        );
        // Every variant: the Hopper kernel with 128-key tiles, or 64 where the hooks spill (as
        // `prepare` falls back). The mma.sync kernels have no narrower tile to fall back to; at
        // D 256 they sit at 255 registers, where a lifted window constant spills 16 bytes in
        // decode and the last variant's three captured tensors 180 (decode) and 48 (prefill):
        // known, and held to that. The Hopper kernel's branch-free edge tiles take that last
        // variant's three captures too (session 21); with Q in registers at D 128, a mode only
        // `FLEXKERN_CUDA_WG_S=2` picks, that spills 12 bytes even at 64-key tiles.
        let known_spill = |name: &str, vi: usize| match (name, vi) {
            (n, 3) if n.contains("_hd128_r128w8_mma8x64x3c0l256b1wg2_") => 12,
            (n, 1) if n.contains("_hd256_r4w4_") => 16,
            (n, 3) if n.contains("_hd256_r4w4_") => 180,
            (n, 3) if n.contains("_hd256_r64w4_") => 48,
            _ => 0,
        };
        let picked: Vec<(usize, &flexkern::Variant)> = variants.iter().enumerate().collect();
        // Each of the Hopper kernel's Q modes (not registers with three warpgroups:
        // `wg_q_mode`), and strided K/V copied with TMA.
        let modes: Vec<KernelConfig> = if m.wg {
            (0..if m.m_tiles > 8 { 2 } else { 3 })
                .map(|wg_s| KernelConfig {
                    mma: Some(MmaShape { wg_s, ..m }),
                    ..k.clone()
                })
                .chain((!k.paged).then(|| KernelConfig {
                    tma: true,
                    ..k.clone()
                }))
                .collect()
        } else if m.m_tiles == 1 && k.paged {
            // Paged decode, and its long partitions' page window (`plan::page_window`).
            vec![
                k.clone(),
                KernelConfig {
                    page_window: true,
                    ..k.clone()
                },
            ]
        } else {
            vec![k.clone()]
        };
        // Paged: pages of a size other than a power of two too (no shifts, no page window).
        let mut modes = modes;
        if k.paged {
            modes.push(KernelConfig {
                page_shift: -1,
                ..modes[0].clone()
            });
        }
        for (vi, v, k) in picked
            .iter()
            .flat_map(|&(vi, v)| modes.iter().map(move |k| (vi, v, k)))
        {
            let m = k.mma.unwrap();
            let v = v.compile().unwrap();
            let hooks = codegen::generate(&v).source;
            let compile = |k: &KernelConfig| {
                let src = k.source(&hooks, 0);
                let (_, log) = crate::runtime::compile::compile_verbose(&src, "sm_90a")
                    .unwrap_or_else(|e| panic!("{}: {e}", src.name));
                let (regs, spills, stack) = crate::runtime::compile::ptxas_resources(&log);
                eprintln!(
                    "{}: {regs} registers, {spills} spill bytes, {stack} stack",
                    src.name
                );
                // ptxas serializes wgmma it cannot prove safe to pipeline, and says so.
                assert!(!log.contains("serialized"), "{}: {log}", src.name);
                (regs, spills + stack, src.name, log)
            };
            // The first case also with the block timeline (FLEXKERN_CUDA_TRACE): it compiles
            // into the decode kernel and the merge without spilling.
            // The Hopper kernel's (strided, TMA) too, with its phase marks.
            let traced_wg = m.wg && k.tma && k.dk == 128 && k.dv == 128;
            if vi == 0 && (traced_wg || (!m.wg && k.rows == 4 && k.paged && k.kt == 2)) {
                let (_, spilled, name, log) = compile(&KernelConfig {
                    trace: true,
                    ..k.clone()
                });
                assert!(
                    name.ends_with("_trace_v0000") && spilled == 0,
                    "{name}: {log}"
                );
            }
            // `prepare`'s ladder where the Hopper kernel spills: no overlap, then two
            // warpgroups, then 64-key tiles.
            let (mut regs, mut spilled, mut name, mut log) = compile(k);
            let mut m = m;
            while m.wg
                && (m.wg_overlap || m.m_tiles > 8 || m.tile > 64)
                && spilled > super::kernel::wg_spill_allowance(&m) as u32
            {
                m = if m.wg_overlap {
                    MmaShape {
                        wg_overlap: false,
                        ..m
                    }
                } else if m.m_tiles > 8 {
                    crate::plan::two_groups(&m, k.dk)
                } else {
                    MmaShape { tile: 64, ..m }
                };
                let next = KernelConfig {
                    mma: Some(m),
                    rows: 16 * m.m_tiles,
                    nwarps: m.m_tiles,
                    ..k.clone()
                };
                (regs, spilled, name, log) = compile(&next);
            }
            let allowed = if m.wg {
                super::kernel::wg_spill_allowance(&m) as u32
            } else {
                0
            };
            assert!(
                spilled <= known_spill(&name, vi).max(allowed),
                "{name}: {log}"
            );
            if m.wg {
                assert_eq!(regs as i32, m.wg_launch_regs(), "{name}");
            }
        }
    }
}

#[test]
fn module_names_are_readable() {
    let k = KernelConfig {
        async_tile: 32,
        stages: 4,
        ..KernelConfig::bf16_paged16_d128(4, None)
    };
    assert_eq!(k.name(), "attn_paged16_qbf16_bf16_hd128_r4w4_a32x4");
    let s = k.source("/*hooks*/", 0xabcd);
    assert!(s.name.ends_with("_vabcd"));
    assert!(s.source.contains("#define FK_DK 128") && s.source.contains("fk_attention"));
    // The Hopper kernel's overlap is in its name and its defines (modules are cached by both).
    let m = MmaShape {
        m_tiles: 8,
        tile: 128,
        stages: 3,
        copy_threads: 0,
        l2_prefetch: 256,
        min_blocks: 1,
        wg: true,
        wg_s: 1,
        wg_overlap: true,
    };
    let k = KernelConfig {
        mma: Some(m),
        tma: true,
        ..KernelConfig::bf16_paged16_d128(128, None)
    };
    assert!(k.name().ends_with("wg1ot"), "{}", k.name());
    assert!(k.source("", 0).source.contains("#define FK_WG_OVERLAP 1"));
    let off = KernelConfig {
        mma: Some(MmaShape {
            wg_overlap: false,
            ..m
        }),
        ..k
    };
    assert!(off.name().ends_with("wg1t"), "{}", off.name());
    assert!(off.source("", 0).source.contains("#define FK_WG_OVERLAP 0"));
}

/// Not a check: writes the Hopper prefill's cubins (and the full variant's PTX) for issue 15's
/// six variants at D 128 and D 64 into `$FK_DUMP`, for reading their SASS with nvdisasm, and
/// prints each one's registers and spills. `FK_DUMP_TILE=64`, `FK_DUMP_PAGED=1` and
/// `FK_DUMP_TRACE=1` pick other modules. Run: `FK_DUMP=dir cargo test --release -p
/// flexkern-cuda --lib dump_hopper_cubins -- --ignored --nocapture` (needs libnvrtc).
#[test]
#[ignore]
fn dump_hopper_cubins() {
    let Ok(dir) = std::env::var("FK_DUMP") else {
        eprintln!("dump_hopper_cubins: set FK_DUMP to a directory");
        return;
    };
    for (dk, stages) in [(128usize, 3usize), (64, 4)] {
        let q = crate::plan::h100_query(2, 2, dk, 1024);
        let (rows, m) = mma_shape(&q).unwrap();
        let k = KernelConfig {
            qt: 2,
            kt: 2,
            vt: 2,
            dk,
            dv: dk,
            vk: 8,
            vv: 8,
            rows,
            paged: std::env::var("FK_DUMP_PAGED").is_ok(),
            async_tile: 0,
            stages: 0,
            mma: Some(MmaShape {
                stages,
                tile: std::env::var("FK_DUMP_TILE").map_or(m.tile, |t| t.parse().unwrap()),
                ..m
            }),
            page_shift: if std::env::var("FK_DUMP_PAGED").is_ok() {
                4
            } else {
                -1
            },
            nwarps: m.m_tiles,
            tma: std::env::var("FK_DUMP_PAGED").is_err(),
            small_vars: true,
            page_window: false,
            trace: std::env::var("FK_DUMP_TRACE").is_ok(),
        };
        use flexkern::builtins::*;
        let c = || flexkern::Variant::full().mask(causal());
        for (vn, v) in [
            ("full", flexkern::Variant::full()),
            ("causal", c()),
            ("sliding", c().mask(sliding_window(1024))),
            ("softcap", c().score(softcap(30.0))),
            ("alibi", c().score(alibi(alibi_slopes(16)))),
            (
                "document",
                c().mask(document((0..8192).map(|i| i * 4 / 8192).collect())),
            ),
        ] {
            let hooks = codegen::generate(&v.compile().unwrap()).source;
            let src = k.source(&hooks, 0);
            let (bin, log) = crate::runtime::compile::compile_verbose(&src, "sm_90a").unwrap();
            let (regs, spills, stack) = crate::runtime::compile::ptxas_resources(&log);
            eprintln!(
                "SPILLS d{dk} {vn}: {regs} registers, {spills} spill bytes, {stack} stack{}",
                if log.contains("serialized") {
                    " SERIALIZED"
                } else {
                    ""
                }
            );
            std::fs::write(format!("{dir}/d{dk}_{vn}.cubin"), bin).unwrap();
            if vn == "full" {
                let ptx = cudarc::nvrtc::compile_ptx_with_opts(
                    &src.source,
                    cudarc::nvrtc::CompileOptions {
                        arch: Some("compute_90a"),
                        options: vec!["-std=c++17".into(), "-default-device".into()],
                        ..Default::default()
                    },
                )
                .unwrap();
                std::fs::write(format!("{dir}/d{dk}_{vn}.ptx"), ptx.to_src()).unwrap();
            }
        }
    }
}

/// Not a check: writes the decode kernel's cubins for issue 13's B1 x 128k shape (bf16 and fp8
/// e4m3 K/V, D 128, 32 / 8 heads; strided, or pages of 16 with `FK_DUMP_PAGED=1`) into
/// `$FK_DUMP`, for reading their SASS with nvdisasm. Run: `FK_DUMP=dir cargo test --release -p flexkern-cuda --lib dump_decode_cubins
/// -- --ignored --nocapture` (needs libnvrtc).
#[test]
#[ignore]
fn dump_decode_cubins() {
    let Ok(dir) = std::env::var("FK_DUMP") else {
        eprintln!("dump_decode_cubins: set FK_DUMP to a directory");
        return;
    };
    let hooks = codegen::generate(
        &flexkern::Variant::full()
            .mask(flexkern::builtins::causal())
            .compile()
            .unwrap(),
    )
    .source;
    let paged = std::env::var("FK_DUMP_PAGED").is_ok();
    for (kv, t, tile, vec) in [("bf16", 2u32, 64usize, 8usize), ("e4m3", 3, 128, 16)] {
        let k = KernelConfig {
            qt: 2,
            kt: t,
            vt: t,
            dk: 128,
            dv: 128,
            vk: vec,
            vv: vec,
            rows: 4,
            paged,
            async_tile: 0,
            stages: 0,
            mma: Some(MmaShape {
                m_tiles: 1,
                tile,
                stages: 2,
                copy_threads: 0,
                l2_prefetch: if paged && t == 3 { 128 } else { 256 },
                min_blocks: 1,
                wg: false,
                wg_s: 0,
                wg_overlap: false,
            }),
            page_shift: if paged { 4 } else { -1 },
            nwarps: 4,
            tma: false,
            small_vars: true,
            page_window: paged && std::env::var("FK_DUMP_WINDOW").is_ok(),
            trace: std::env::var("FK_DUMP_TRACE").is_ok(),
        };
        let src = k.source(&hooks, 0);
        let (bin, log) = crate::runtime::compile::compile_verbose(&src, "sm_90a").unwrap();
        let (regs, spills, _) = crate::runtime::compile::ptxas_resources(&log);
        eprintln!(
            "{} ({kv}): {regs} registers, {spills} spill bytes",
            src.name
        );
        let kv = if paged {
            format!("{kv}_paged16")
        } else {
            kv.to_string()
        };
        std::fs::write(format!("{dir}/decode_{kv}.cubin"), bin).unwrap();
    }
}
