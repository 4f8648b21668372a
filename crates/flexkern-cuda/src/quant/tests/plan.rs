//! The planner's choices, checked without a GPU: which GEMV kernel a shape and format get, and
//! the streamed kernel's plan on Hopper (bulk rings, late stages, cluster pairs, lanes, warps)
//! with the module names and defines that follow from it.

use super::*;
use crate::quant::choose::GemvTarget;

/// Whether any A/B knob `FLEXKERN_GEMV_<name>` of `names` is set: the planner's checks assume
/// the default plan and skip under a knob, saying which.
fn knobs_set(names: &[&str]) -> bool {
    let set: Vec<String> = names
        .iter()
        .map(|n| format!("FLEXKERN_GEMV_{n}"))
        .filter(|v| std::env::var(v).is_ok())
        .collect();
    if !set.is_empty() {
        eprintln!("skipped: {} set", set.join(", "));
    }
    !set.is_empty()
}

/// What `choose` plans on `dev` for `m` rows against an n x k matrix of `f`.
#[allow(clippy::too_many_arguments)]
fn choice_on(
    dev: &crate::quant::choose::GemvTarget,
    f: Format,
    n: usize,
    k: usize,
    m: usize,
    mode: Mode,
    quantized_acts: bool,
    slack: bool,
) -> GemvConfig {
    let unit = unit_type(f, k).unwrap();
    let t = crate::quant::choose::MatrixTraits {
        format: f,
        unit: &unit,
        n,
        k,
        quantized_acts,
        slack,
    };
    crate::quant::choose::choose(dev, mode, &t, m)
}

/// The streamed plan `choose` makes for one row of an n x k matrix of `f` on `dev`.
fn stream_plan(
    f: Format,
    n: usize,
    k: usize,
    mode: Mode,
    dev: &crate::quant::choose::GemvTarget,
) -> crate::quant::Stream {
    choice_on(dev, f, n, k, 1, mode, true, true).stream.unwrap()
}

/// Hopper's bulk ring (`Stream::with_bulk`): plain and gate/up Q4_0 launches (and Q4_K ones of
/// at least 8192 rows) of at least 24 MiB take two stages, single matrices of either with rows
/// of 8192 or more three; short launches, stacked Q, K, V, Q8_0, other Q4_K launches, rows
/// whose side entries end off a 16-byte word (k not a multiple of 256) and devices without
/// bulk copies keep the register batches.
#[test]
fn long_q4_0_launches_take_the_bulk_ring() {
    if knobs_set(&["BULK", "STREAM"]) {
        return;
    }
    let pick = stream_plan;
    let h = GemvTarget::hopper();
    let bulk = |f, n, k, mode| pick(f, n, k, mode, &h).bulk;
    assert_eq!(bulk(Format::Q4_0, 14336, 4096, Mode::Plain), 2);
    assert_eq!(bulk(Format::Q4_0, 4096, 14336, Mode::Plain), 3);
    assert_eq!(bulk(Format::Q4_0, 14336, 4096, Mode::GateUp), 2);
    assert_eq!(bulk(Format::Q4_0, 4096, 4096, Mode::Plain), 0);
    assert_eq!(bulk(Format::Q4_0, 4096, 4096, Mode::Stack), 0);
    assert_eq!(bulk(Format::Q4_0, 14336, 4096, Mode::Stack), 0);
    assert_eq!(bulk(Format::Q8_0, 14336, 4096, Mode::Plain), 0);
    // Q4_K: also 8192 rows a matrix, or rows of 8192 (4096 x 4096 lost on the ring).
    assert_eq!(bulk(Format::Q4K, 14336, 4096, Mode::Plain), 2);
    assert_eq!(bulk(Format::Q4K, 14336, 4096, Mode::GateUp), 2);
    assert_eq!(bulk(Format::Q4K, 4096, 14336, Mode::Plain), 3);
    assert_eq!(bulk(Format::Q4K, 2048, 14336, Mode::Plain), 0);
    assert_eq!(bulk(Format::Q4K, 4096, 4096, Mode::Plain), 0);
    assert_eq!(bulk(Format::Q4K, 14336, 4096, Mode::Stack), 0);
    assert_eq!(bulk(Format::Q6K, 14336, 4096, Mode::Plain), 2);
    assert_eq!(bulk(Format::Q6K, 4096, 4096, Mode::Plain), 0);
    assert_eq!(bulk(Format::Q6K, 4096, 14336, Mode::Plain), 3);
    assert_eq!(bulk(Format::Q6K, 49152, 4096, Mode::Plain), 0); // 165 MB: the output head
    assert_eq!(bulk(Format::Q6K, 14336, 3840, Mode::Plain), 0); // side entries off 16-byte words
    assert_eq!(bulk(Format::Q4_0, 40000, 1568, Mode::Plain), 0);
    let ampere = GemvTarget {
        bulk_copies: false,
        ..h
    };
    assert_eq!(
        pick(Format::Q4_0, 14336, 4096, Mode::Plain, &ampere).bulk,
        0
    );
    // Two stages of 32 lanes x 4 units x (16 code bytes + 2 side bytes) a warp, then the Q8_0
    // activations; the module is named for its depth.
    let st = pick(Format::Q4_0, 14336, 4096, Mode::Plain, &h);
    assert_eq!(st.smem_bytes(1, 4096), 8 * 2 * 2304 + 4096 + 4096 / 32 * 8);
    let gu = pick(Format::Q4_0, 14336, 4096, Mode::GateUp, &h);
    assert_eq!(gu.smem_bytes(2, 4096), 8 * 2 * 4608 + 4096 + 4096 / 32 * 8);
    let src = GemvConfig::streamed(Format::Q4_0, 4096, Mode::Plain, Some(st))
        .unwrap()
        .source();
    assert!(src.name.contains("_reg4pk2_"), "{}", src.name);
    assert!(src.source.contains("#define FK_SBULK 2"));
    // The shorthand passes unit_type's typed errors on: a k the format cannot hold.
    let bad = GemvConfig::streamed(Format::Q4_0, 48, Mode::Plain, None).unwrap_err();
    assert!(bad.to_string().contains("`k`"), "{bad}");
}

/// On Hopper, launches that quantize rows of at least 8192 activations, and plain launches on
/// register batches, share the prologue in pairs of blocks (gemv_acts.cu): the module says
/// `FK_SCL 2` and is named `_c2`. Shorter rows of gate/up, stacked or bulk-ring launches, float
/// activations and devices without clusters keep one block.
#[test]
fn long_rows_share_the_activation_prologue_in_pairs() {
    if knobs_set(&["CLUSTER", "STREAM"]) {
        return;
    }
    let pick_mode = stream_plan;
    let pick = |f, n, k, dev: &GemvTarget| pick_mode(f, n, k, Mode::Plain, dev);
    let h = GemvTarget::hopper();
    for f in [Format::Q4_0, Format::Q8_0, Format::Q4K, Format::Q6K] {
        assert_eq!(pick(f, 4096, 14336, &h).cluster, 2, "{f}");
        assert_eq!(pick(f, 4096, 4096, &h).cluster, 2, "{f}");
        assert_eq!(
            pick_mode(f, 14336, 4096, Mode::GateUp, &h).cluster,
            1,
            "{f}"
        );
        assert_eq!(pick_mode(f, 6144, 4096, Mode::Stack, &h).cluster, 1, "{f}");
        assert_eq!(pick_mode(f, 4096, 14336, Mode::Stack, &h).cluster, 2, "{f}");
    }
    // The Q4_0 bulk ring at k 4096 keeps one block; at 14336 it takes pairs.
    assert_eq!(pick(Format::Q4_0, 14336, 4096, &h).cluster, 1);
    assert_eq!(pick(Format::Q4_0, 14336, 4096, &h).bulk, 2);
    assert_eq!(pick(Format::Q8_0, 14336, 4096, &h).cluster, 2);
    assert_eq!(pick(Format::Q4_1, 4096, 14336, &h).cluster, 1); // f32 activations
    let ampere = GemvTarget {
        clusters: false,
        ..h
    };
    assert_eq!(pick(Format::Q4_0, 4096, 14336, &ampere).cluster, 1);
    let st = pick(Format::Q4_0, 4096, 14336, &h);
    let src = GemvConfig::streamed(Format::Q4_0, 14336, Mode::Plain, Some(st))
        .unwrap()
        .source();
    assert!(src.name.contains("_c2"), "{}", src.name);
    assert!(src.source.contains("#define FK_SCL 2"));
    let one = GemvConfig::streamed(
        Format::Q4_0,
        4096,
        Mode::Plain,
        Some(pick(Format::Q4_0, 14336, 4096, &h)),
    )
    .unwrap()
    .source();
    assert!(!one.name.contains("_c"), "{}", one.name);
    assert!(one.source.contains("#define FK_SCL 1"));
}

/// Rows of at least 8192 activations of one matrix (a down projection) stream in one block of
/// sixteen warps an SM; shorter rows, and two matrices, in two blocks of eight.
#[test]
fn long_rows_stream_in_one_block_of_sixteen_warps() {
    if knobs_set(&["WARPS", "FIT"]) {
        return;
    }
    let h = GemvTarget::hopper();
    for f in [Format::Q4_0, Format::Q8_0, Format::Q4K, Format::Q6K] {
        for (n, k, mode, shape) in [
            (4096, 14336, Mode::Plain, (16, 1)),
            (14336, 14336, Mode::Plain, (16, 1)),
            (4096, 8192, Mode::Plain, (16, 1)),
            (14336, 4096, Mode::Plain, (8, 2)),
            (4096, 4096, Mode::Plain, (8, 2)),
            (4096, 14336, Mode::GateUp, (8, 2)),
        ] {
            let st = stream_plan(f, n, k, mode, &h);
            assert_eq!((st.warps, st.blocks), shape, "{f} {n} x {k} {mode:?}");
            let src = GemvConfig::streamed(f, k, mode, Some(st)).unwrap().source();
            assert!(src.source.contains(&format!("#define FK_SNW {}", shape.0)));
        }
    }
    // verify's down-projection case (Q4_0 4096 x 14336) runs the bulk ring in such a block.
    let down = stream_plan(Format::Q4_0, 4096, 14336, Mode::Plain, &h);
    assert_eq!((down.warps, down.blocks, down.bulk), (16, 1, 3));
}

/// Q6_K's single rows (Q8_K activations) take the pipelined batches of raw units (32 bytes a
/// unit in its device layout: four a batch), a row's units a lane split among batches that
/// never span rows; gate and up unroll a row's units, in rounds that divide a lane's share.
#[test]
fn q6_k_rows_stream_in_pipelined_batches() {
    if knobs_set(&["SUN", "STREAM", "PIPE"]) {
        return;
    }
    let h = GemvTarget::hopper();
    for (n, k, mode, unroll) in [
        (4096, 14336, Mode::Plain, 4), // 14 units a lane: 4 + 4 + 4 + 2
        (4096, 4096, Mode::Plain, 4),  // 4 a lane
        (14336, 4096, Mode::GateUp, 2),
        (4096, 14336, Mode::GateUp, 2), // 2 divides 14
        (131, 3072, Mode::Plain, 3),    // 3 a lane
        (6144, 4096, Mode::Stack, 4),
    ] {
        let st = stream_plan(Format::Q6K, n, k, mode, &h);
        assert!(st.direct, "{n} x {k} {mode:?}");
        assert_eq!(st.pipe, mode != Mode::GateUp, "{n} x {k} {mode:?}");
        assert_eq!(st.unroll, unroll, "{n} x {k} {mode:?}");
    }
}

/// Q8_0 activations are quantized by the lanes that spread a block's share of the row over
/// its threads (at most four): 2 a 32-block at k 4096, 4 for a pair's half of it, 2 where a
/// share has more 32-blocks than half the threads (gate and up at k 14336, bulk ring or not),
/// plain launches on the bulk ring alike; Q8_K and f32 activations have none. The
/// module says `FK_SQL` and is named `_l<lanes>`.
#[test]
fn q8_0_activations_are_quantized_by_the_lanes_that_fill_the_block() {
    if knobs_set(&["LANES", "CLUSTER", "BULK", "STREAM"]) {
        return;
    }
    let h = GemvTarget::hopper();
    for (f, n, k, mode, lanes) in [
        (Format::Q4_0, 14336, 4096, Mode::GateUp, 2), // one block, bulk ring
        (Format::Q4_0, 6144, 4096, Mode::Stack, 2),   // one block
        (Format::Q4_0, 4096, 4096, Mode::Plain, 4),   // pairs
        (Format::Q8_0, 14336, 4096, Mode::Plain, 4),  // pairs
        (Format::Q4_0, 4096, 14336, Mode::GateUp, 2), // pairs of 8 warps: 224 32-blocks a half
        (Format::Q4_0, 4096, 14336, Mode::Plain, 2),  // 16 warps, plain on the bulk ring
        (Format::Q8_0, 4096, 14336, Mode::Plain, 2),  // 16 warps: 224 for 512 threads
        (Format::Q4_0, 14336, 4096, Mode::Plain, 2),  // plain on the bulk ring
        (Format::Q4K, 14336, 4096, Mode::Plain, 1),   // Q8_K activations
        (Format::Q4_1, 4096, 4096, Mode::Plain, 1),   // f32 activations
    ] {
        let st = stream_plan(f, n, k, mode, &h);
        assert_eq!(st.lanes, lanes, "{f} {n} x {k} {mode:?}");
        let src = GemvConfig::streamed(f, k, mode, Some(st)).unwrap().source();
        assert!(
            src.source.contains(&format!("#define FK_SQL {lanes}")),
            "{}",
            src.name
        );
        assert_eq!(
            src.name.contains(&format!("_l{lanes}")),
            lanes > 1,
            "{}",
            src.name
        );
    }
}

/// Plain launches on a two-stage bulk ring ask for the second stage after the activations'
/// loads (`FK_SLATE 1`, named `_e1`); gate/up rings, three-stage rings (the down projection),
/// register batches and stacked launches ask for everything before the wait.
#[test]
fn plain_two_stage_rings_ask_for_their_second_stage_late() {
    if knobs_set(&["LATE", "BULK", "STREAM"]) {
        return;
    }
    let h = GemvTarget::hopper();
    for (f, n, k, mode, late) in [
        (Format::Q4_0, 14336, 4096, Mode::Plain, 1),
        (Format::Q4_0, 49152, 4096, Mode::Plain, 1),
        (Format::Q4K, 14336, 4096, Mode::Plain, 1),
        (Format::Q4_0, 14336, 4096, Mode::GateUp, 0),
        (Format::Q4_0, 4096, 14336, Mode::Plain, 0), // three stages
        (Format::Q4_0, 4096, 4096, Mode::Plain, 0),  // register batches
        (Format::Q8_0, 14336, 4096, Mode::Plain, 0),
        (Format::Q4_0, 6144, 4096, Mode::Stack, 0),
    ] {
        let st = stream_plan(f, n, k, mode, &h);
        assert_eq!(st.late, late, "{f} {n} x {k} {mode:?}");
        let src = GemvConfig::streamed(f, k, mode, Some(st)).unwrap().source();
        assert!(src.source.contains(&format!("#define FK_SLATE {late}")));
        assert_eq!(src.name.contains("_e1"), late == 1, "{}", src.name);
    }
    let ampere = GemvTarget {
        bulk_copies: false,
        ..h
    };
    assert_eq!(
        stream_plan(Format::Q4_0, 14336, 4096, Mode::Plain, &ampere).late,
        0
    );
}

/// The A/B knobs' scoped values: for every launch, or a mode or shape named before a colon;
/// the first entry that applies wins, and values past the limit are dropped.
#[test]
fn scoped_knobs_apply_to_the_launches_they_name() {
    use crate::quant::choose::Scoped;
    let k = Scoped::parse(Some("gateup:3, 4096x14336:1,2,stack:9"), 8);
    assert_eq!(k.get(Mode::GateUp, 14336, 4096), Some(3));
    assert_eq!(k.get(Mode::Plain, 4096, 14336), Some(1));
    assert_eq!(k.get(Mode::Plain, 14336, 4096), Some(2));
    assert_eq!(k.get(Mode::Stack, 6144, 4096), Some(2)); // stack:9 is past the limit
    assert!(k.names(Mode::GateUp) && !k.names(Mode::Stack) && !k.names(Mode::Plain));
    let none = Scoped::parse(None, 8);
    assert_eq!(none.get(Mode::Plain, 1, 1), None);
    assert_eq!(Scoped::parse(Some("x"), 8).get(Mode::Plain, 1, 1), None);
}

/// The planner's GEMV choices on an H100-sized device (132 SMs): two rows per warp for
/// single-row plain GEMVs from 16 rows per SM, one for batches and the fused forms; the staged
/// kernel for block formats only, and its modules named apart.
#[test]
fn gemv_configuration_follows_the_shape_and_format() {
    use crate::quant::choose::{config, staged};
    use crate::quant::Staged;
    if knobs_set(&["ROWS", "STAGED"]) {
        return;
    }
    let unit = unit_type(Format::Q4_0, 4096).unwrap();
    let rows = |n, m, mode| config(132, mode, &unit, n, 4096, m).rows;
    assert_eq!(rows(4096, 1, Mode::Plain), 2);
    assert_eq!(rows(14336, 1, Mode::Plain), 2);
    assert_eq!(rows(1024, 1, Mode::Plain), 1);
    assert_eq!(rows(4096, 2, Mode::Plain), 1);
    assert_eq!(rows(14336, 1, Mode::GateUp), 1);
    assert_eq!(config(132, Mode::Plain, &unit, 4096, 4096, 3).mb, 4);
    let st = |f, mb| staged(f, mb).map(|s: Staged| (s.block_bytes, s.chunk));
    // One unit per lane (32 or 64 weights) unless 16 rows of activations would pass 64 KB.
    // Planar Q4_0 steps over its 16-byte codes (layout.rs).
    assert_eq!(st(Format::Q4_0, 1), Some((16, 1024)));
    assert_eq!(st(Format::Q4_0, 16), Some((16, 1024)));
    assert_eq!(st(Format::Q4_1, 16), Some((20, 1024)));
    assert_eq!(st(Format::Q4K, 1), Some((144, 2048)));
    assert_eq!(st(Format::Q4K, 16), Some((144, 1024)));
    // Planar Q6_K steps over its 208 bytes of codes and scales.
    assert_eq!(st(Format::Q6K, 8), Some((208, 1024)));
    assert_eq!(staged(Format::Q4K, 16).unwrap().smem_bytes(16), 64 << 10);
    assert_eq!(st(Format::F16, 1), None);
    assert_eq!(
        st(
            Format::mlx(4, 64, flexkern_quant::MlxScale::F16).unwrap(),
            1
        ),
        None
    );
    let mut c = config(132, Mode::Plain, &unit, 4096, 4096, 1);
    let direct = c.source().name;
    c.staged = staged(Format::Q4_0, 1);
    let src = c.source();
    assert_ne!(src.name, direct);
    assert!(src
        .source
        .contains("#define FK_STAGED 1\n#define FK_BB 16\n#define FK_CW 1024\n"));
}

/// The streamed kernel's plan on an H100 (228 KB of shared memory per SM): planar formats and
/// 16-byte blocks load into registers (no ring, two blocks per SM); the others take the largest chunk and ring
/// that let three blocks (integer dot) or two (f32 activations) share an SM, chunks that split
/// k evenly, none where f32 activations alone would crowd the rings out.
#[test]
fn stream_plan_fits_its_blocks_per_sm() {
    use crate::quant::Stream;
    let h100 = 233472;
    let plan = |f, k, nm, dp4a| {
        Stream::plan(f, k, nm, dp4a, h100).map(|s| (s.chunk, s.stages, s.window()))
    };
    // Planar Q4_0 and Q8_0: only the activation row in shared memory (Q8_0 codes and their
    // (scale, sum) pairs, or f32).
    for (f, k, dp4a, smem) in [
        (Format::Q4_0, 4096, true, 4096 + 128 * 8),
        (Format::Q8_0, 14336, true, 14336 + 448 * 8),
        (Format::Q4_0, 4096, false, 4 * 4096),
    ] {
        let s = Stream::plan(f, k, 2, dp4a, h100).unwrap();
        assert!(
            s.direct && s.blocks == 2 && s.smem_bytes(2, k) == smem,
            "{f} {k}"
        );
    }
    // Q5_0 at 4096 (f32 activations): the whole row (128 blocks of 22 bytes) in one stage of
    // four.
    assert_eq!(plan(Format::Q5_0, 4096, 1, false), Some((4096, 4, 2832)));
    // Gate and up share the 4 KB of a stage: two chunks of 2048 weights each.
    assert_eq!(plan(Format::Q5_0, 4096, 2, false), Some((2048, 4, 1424)));
    // 14336: f32 activations take 56 KB, so smaller chunks.
    assert_eq!(plan(Format::Q5_0, 14336, 1, false), Some((2048, 4, 1424)));
    // Q4_K's 144-byte blocks are whole 16-byte words: loaded into registers too, in pipelined
    // batches of raw units (48 bytes: the block's head and 32 code bytes), up to three a batch:
    // a row of 4096 is two units a lane (one batch of two), of 14336 seven (3 + 3 + 1).
    let unroll = |f, k, nm| Stream::plan(f, k, nm, true, h100).map(|s| (s.pipe, s.unroll));
    assert_eq!(unroll(Format::Q4K, 4096, 1), Some((true, 2)));
    assert_eq!(unroll(Format::Q4K, 14336, 1), Some((true, 3)));
    // Q4_0 (20 raw bytes a unit): a row of 4096 in one batch of four, also for gate and up
    // (160 bytes); 14336 in batches of 4 + 4 + 4 + 2. Q8_0 gate and up (72 bytes): two.
    assert_eq!(unroll(Format::Q4_0, 4096, 2), Some((true, 4)));
    assert_eq!(unroll(Format::Q4_0, 14336, 1), Some((true, 4)));
    assert_eq!(unroll(Format::Q8_0, 4096, 2), Some((true, 2)));
    assert_eq!(unroll(Format::Q4_0, 1024, 1), Some((true, 1)));
    assert_eq!(plan(Format::IQ4XS, 4096, 1, false), Some((4096, 4, 2192)));
    // Planar Q6_K: registers too, one matrix in pipelined batches of its 32-byte raw units (at
    // k 14336, 14 a lane: 4 + 4 + 4 + 2), gate and up a row's units unrolled in rounds of two.
    for (nm, pipe, unroll) in [(1, true, 4), (2, false, 2)] {
        let q6k = Stream::plan(Format::Q6K, 14336, nm, true, h100).unwrap();
        assert!(
            q6k.direct && (q6k.pipe, q6k.unroll) == (pipe, unroll),
            "{q6k:?}"
        );
    }
    // Chunks split k evenly in rounds of 32 units: 3104 weights of Q5_0 gate and up is 4
    // rounds of 1024, two a stage.
    assert_eq!(plan(Format::Q5_0, 3104, 2, false).map(|p| p.0), Some(2048));
    for (f, k, nm) in [
        (Format::Q3K, 14336, 2),
        (Format::Q5_1, 4096, 1),
        (Format::Q2K, 4096, 2),
        (Format::IQ4XS, 14336, 1),
    ] {
        let s = Stream::plan(f, k, nm, false, h100).unwrap();
        assert_eq!(s.blocks, 2);
        assert!(!s.direct);
        assert!(
            s.blocks * (s.smem_bytes(nm, k) + 1024) <= h100,
            "{f} {k} {nm}"
        );
        assert_eq!(s.chunk % f.block_elems(), 0);
    }
    // 64 K weights of f32 activations (256 KB) fit nowhere.
    assert_eq!(Stream::plan(Format::Q4_0, 65536, 1, false, h100), None);
    let cfg = GemvConfig::streamed(
        Format::Q4_0,
        4096,
        Mode::Plain,
        Stream::plan(Format::Q4_0, 4096, 1, true, h100),
    )
    .unwrap();
    let src = cfg.source();
    assert_eq!(src.name, "gemv_FkQ4_0P_plain_stream_reg4p_w8_b2_q8");
    assert!(src.source.contains(
        "#define FK_STREAM 1\n#define FK_BB 16\n#define FK_CW 1024\n#define FK_SS 2\n#define FK_SNW 8\n#define FK_SMINB 2\n#define FK_DP4A 1\n#define FK_ACC 0\n#define FK_SREG 1\n#define FK_SUN 4\n#define FK_SPIPE 1\n"
    ));
    let q6k = GemvConfig {
        unit: unit_type(Format::Q6K, 4096).unwrap(),
        stream: Stream::plan(Format::Q6K, 4096, 1, true, h100),
        ..cfg.clone()
    };
    assert_eq!(
        q6k.source().name,
        "gemv_FkQ6KP_plain_stream_reg4p_w8_b2_q8k"
    );
    let q5k = GemvConfig {
        unit: unit_type(Format::Q5_1, 4096).unwrap(),
        stream: Stream::plan(Format::Q5_1, 4096, 1, false, h100),
        dp4a: false,
        ..cfg
    };
    assert_eq!(q5k.source().name, "gemv_FkQ5_1_plain_stream_c4096_s4_w8_b2");
}

/// Which kernel serves a call (H100: 132 SMs, 228 KB of shared memory per SM): single rows of
/// block formats stream, with Q8_0 or Q8_K activations in the default precision and f32 in
/// the precise one; batches, the down projection with SwiGLU formed on load, plain floats and
/// matrices without 16 bytes of slack do not.
#[test]
fn single_rows_of_block_formats_stream() {
    use crate::quant::StreamActs;
    if knobs_set(&["STREAM", "STAGED", "DP4A", "ROWS"]) {
        return;
    }
    let h = crate::quant::choose::GemvTarget::hopper();
    let pick = |f, n, k, m, mode, q, slack| choice_on(&h, f, n, k, m, mode, q, slack);
    let acts = |c: &GemvConfig| c.stream.map(|s| s.acts);
    let q = |f, mode| pick(f, 4096, 4096, 1, mode, true, true);
    assert_eq!(acts(&q(Format::Q4_0, Mode::Plain)), Some(StreamActs::Q8_0));
    assert_eq!(acts(&q(Format::Q8_0, Mode::GateUp)), Some(StreamActs::Q8_0));
    assert_eq!(acts(&q(Format::Q4K, Mode::Stack)), Some(StreamActs::Q8K));
    assert_eq!(acts(&q(Format::Q6K, Mode::Plain)), Some(StreamActs::Q8K));
    assert_eq!(acts(&q(Format::Q5K, Mode::Plain)), Some(StreamActs::F32));
    assert!(q(Format::Q4_0, Mode::Plain).dp4a && !q(Format::Q5K, Mode::Plain).dp4a);
    assert_eq!(q(Format::Q4_0, Mode::Plain).rows, 1);
    // Precise: f32 activations, streamed all the same.
    let precise = pick(Format::Q4_0, 4096, 4096, 1, Mode::Plain, false, true);
    assert_eq!(acts(&precise), Some(StreamActs::F32));
    assert!(!precise.dp4a);
    // MLX at 4 and 8 bits, against Q8_0 activations: pipelined register batches, every mode
    // but SwiGLU formed on load. Its f32 form (precise, other widths) keeps the direct kernel;
    // batches take the staged one, with the integer dot in the default precision.
    for (bits, group) in [(4, 64), (4, 32), (8, 32), (8, 128)] {
        let mlx = Format::mlx(bits, group, flexkern_quant::MlxScale::BF16).unwrap();
        for mode in [Mode::Plain, Mode::GateUp, Mode::Stack] {
            let c = q(mlx, mode);
            let st = c.stream.expect("MLX 4 / 8 bits stream");
            assert!(st.direct && st.pipe && st.bulk == 0 && c.dp4a && !c.xs && c.unroll == 1);
            assert_eq!(st.acts, StreamActs::Q8_0);
        }
        assert!(q(mlx, Mode::DownSwiglu).stream.is_none());
        let precise = pick(mlx, 4096, 4096, 1, Mode::Plain, false, true);
        assert!(precise.stream.is_none() && !precise.dp4a && precise.xs);
        let batch = pick(mlx, 4096, 4096, 5, Mode::Plain, true, true);
        assert!(batch.stream.is_none() && batch.staged.is_some() && batch.dp4a);
        let precise = pick(mlx, 4096, 4096, 5, Mode::Plain, false, true);
        assert!(precise.staged.is_some() && !precise.dp4a);
    }
    for bits in [2, 3, 5, 6] {
        let mlx = Format::mlx(bits, 64, flexkern_quant::MlxScale::F16).unwrap();
        assert!(q(mlx, Mode::Plain).stream.is_none() && !q(mlx, Mode::Plain).dp4a);
        let batch = pick(mlx, 4096, 4096, 5, Mode::Plain, true, true);
        assert!(batch.staged.is_some() && !batch.dp4a);
    }
    // Not streamed: batches (staged, integer path), SwiGLU formed on load, plain floats,
    // no slack past the blocks (nor staged then).
    let batch = pick(Format::Q4_0, 4096, 4096, 5, Mode::Plain, true, true);
    assert!(batch.stream.is_none() && batch.staged.is_some() && batch.dp4a);
    assert!(q(Format::Q4_0, Mode::DownSwiglu).stream.is_none());
    assert!(q(Format::F16, Mode::Plain).stream.is_none());
    let tight = pick(Format::Q4_0, 4096, 4096, 1, Mode::Plain, true, false);
    assert!(tight.stream.is_none() && tight.staged.is_none() && !tight.dp4a);
    // Rows of f32 activations too long for shared memory fall back to the staged kernel.
    let long = pick(Format::Q4_0, 64, 65536, 1, Mode::Plain, false, true);
    assert!(long.stream.is_none() && long.staged.is_some());
}

/// The direct kernel's single-row fusions: it normalizes rows of units up to 32 weights (not
/// Q4_K's or Q5_K's), in the plan's choice only for launches up to `DNORM_MAX_BYTES`; its
/// stacked and normalizing modules declare the stack's arguments.
#[test]
fn direct_kernel_fusions_are_planned_and_named() {
    use crate::quant::choose::{direct_norm_pays, direct_normalizes, DNORM_MAX_BYTES};
    assert!(direct_normalizes(Format::F16) && direct_normalizes(Format::BF16));
    assert!(direct_normalizes(Format::Q4_0));
    assert!(!direct_normalizes(Format::Q4K) && !direct_normalizes(Format::Q5K));
    if std::env::var("FLEXKERN_GEMV_DNORM_MAX").is_err() {
        assert!(direct_norm_pays(DNORM_MAX_BYTES) && !direct_norm_pays(DNORM_MAX_BYTES + 1));
        // SmolLM2's Q, K, V in F16 (960 x 576) fuse the norm; 8B's (6144 x 4096) do not.
        assert!(direct_norm_pays(960 * 576 * 2) && !direct_norm_pays(6144 * 4096 * 2));
    }
    let unit = unit_type(Format::F16, 4096).unwrap();
    let cfg = GemvConfig {
        norm: true,
        ..crate::quant::choose::config(132, Mode::Stack, &unit, 960, 576, 1)
    };
    let src = cfg.source();
    assert_eq!(src.name, "gemv_FkFloat_1__16_stack_m1_r1_norm");
    assert!(src
        .source
        .contains("#define FK_ACC 0\n#define FK_DNORM 1\n"));
    assert!(src.source.contains("struct FkStack"));
    let plain = crate::quant::choose::config(132, Mode::Plain, &unit, 4096, 4096, 1).source();
    assert!(plain.source.contains("#define FK_DNORM 0\n"));
    assert!(!plain.source.contains("struct FkStack"));
}

/// The direct kernel loads two units a lane before their FMAs for single rows of 16-bit floats
/// (every mode, the fused norm too), one for batches, f32 and MLX (its f32 form: its integer
/// dot streams); the module says so.
#[test]
fn direct_kernel_unrolls_single_rows_of_16_bit_floats() {
    if knobs_set(&["DUNROLL"]) {
        return;
    }
    let mlx = Format::mlx(4, 64, flexkern_quant::MlxScale::F16).unwrap();
    for (f, m, mode, want) in [
        (Format::F16, 1, Mode::Plain, 2),
        (Format::BF16, 1, Mode::GateUp, 2),
        (Format::F16, 1, Mode::Stack, 2),
        (Format::F16, 4, Mode::Plain, 1),
        (Format::F32, 1, Mode::Plain, 1),
        (mlx, 1, Mode::Plain, 1),
        (Format::Q4_0, 1, Mode::Plain, 1),
    ] {
        let c = choice_on(
            &GemvTarget::hopper(),
            f,
            14336,
            4096,
            m,
            mode,
            f != mlx,
            true,
        );
        assert_eq!(c.unroll, want, "{f:?} m {m} {mode:?}");
        let src = GemvConfig {
            norm: m == 1 && mode != Mode::GateUp && c.stream.is_none(),
            ..c
        }
        .source();
        assert_eq!(src.name.ends_with("_u2"), want == 2, "{}", src.name);
        assert_eq!(
            src.source.contains("#define FK_DUN 2\n"),
            want == 2,
            "{}",
            src.name
        );
    }
}

/// Single rows of MLX stage their activations in shared memory on the direct kernel (every
/// mode, the fused norm too, rows up to `DXS_MAX_BYTES`); batches, plain floats and block
/// formats do not, and the module says so.
#[test]
fn direct_kernel_stages_mlx_rows_in_shared_memory() {
    use crate::quant::choose::{direct_stages_x, DXS_MAX_BYTES};
    if knobs_set(&["DXS"]) {
        return;
    }
    let mlx = Format::mlx(4, 64, flexkern_quant::MlxScale::F16).unwrap();
    assert!(direct_stages_x(mlx, 1, 14336) && direct_stages_x(mlx, 1, DXS_MAX_BYTES / 4));
    assert!(!direct_stages_x(mlx, 1, DXS_MAX_BYTES / 4 + 64) && !direct_stages_x(mlx, 4, 4096));
    for (f, m, mode, want) in [
        (mlx, 1, Mode::Plain, true),
        (mlx, 1, Mode::GateUp, true),
        (mlx, 1, Mode::DownSwiglu, true),
        (mlx, 1, Mode::Stack, true),
        (mlx, 4, Mode::Plain, false),
        (Format::F16, 1, Mode::Plain, false),
        (Format::Q4_0, 1, Mode::Plain, false),
    ] {
        let c = choice_on(&GemvTarget::hopper(), f, 4096, 4096, m, mode, false, false);
        assert_eq!(c.xs, want, "{f:?} m {m} {mode:?}");
        let src = GemvConfig {
            norm: m == 1 && mode == Mode::Plain,
            ..c
        }
        .source();
        assert_eq!(src.name.ends_with("_dx"), want, "{}", src.name);
        assert_eq!(
            src.source.contains("#define FK_DXS 1\n"),
            want,
            "{}",
            src.name
        );
    }
}
