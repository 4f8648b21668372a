//! Scores that a score mod makes NaN (or +inf): a kept one makes its row's O and LSE NaN on the
//! AVX2 and the portable kernels and in the oracle alike; one at a masked position changes
//! nothing. Prefill tiles, streaming decode, split-KV decode (merged partial states), GQA, sinks;
//! NaN in Q or K follows the same rule.

use flexkern::attention::plan;
use flexkern::builtins;
use flexkern::expr::{float, h, int, kv_pos, q_pos, score, select, Expr};
use flexkern::reference;
use flexkern::{AttentionArgs, Backend, CpuBackend, TensorView, Variant};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct Case {
    q: usize,
    kv: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    variant: Variant,
    /// (query index, head) pairs whose row must come out NaN.
    nan_rows: Vec<(usize, usize)>,
    /// The planner must split the KV (decode over partial states).
    split: bool,
    /// Elements of Q and of K set to NaN.
    nan_q: Vec<usize>,
    nan_k: Vec<usize>,
}

/// `score` replaced by `v` where `at` holds.
fn poison(at: Expr, v: f64) -> Expr {
    select(at, float(v), score())
}

fn run(c: &Case, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rand = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.gen_range(-2.0..2.0)).collect() };
    let (mut q, mut k, v) = (
        rand(c.q * c.hq * c.d),
        rand(c.kv * c.hkv * c.d),
        rand(c.kv * c.hkv * c.d),
    );
    for &i in &c.nan_q {
        q[i] = f32::NAN;
    }
    for &i in &c.nan_k {
        k[i] = f32::NAN;
    }
    let args = AttentionArgs::new(
        TensorView::contiguous(&q[..], &[c.q, c.hq, c.d]),
        TensorView::contiguous(&k[..], &[c.kv, c.hkv, c.d]),
        TensorView::contiguous(&v[..], &[c.kv, c.hkv, c.d]),
    )
    .variant(c.variant.clone());
    let (p, r) = reference::of_args(&args).unwrap();
    for name in ["avx2", "scalar"] {
        let caps = match name {
            "avx2" => CpuBackend.caps(),
            _ => CpuBackend::scalar().caps(),
        };
        let pl = plan::plan(&p, &caps, None).unwrap();
        assert_eq!(!pl.merges.is_empty(), c.split, "{name}: split-KV plan");
        let mut out = vec![0f32; c.q * c.hq * c.d];
        let mut lse = vec![0f32; c.q * c.hq];
        // Poisoned with a finite value: NaN must come from the kernel, not be left over.
        out.fill(7.0);
        lse.fill(7.0);
        match name {
            "avx2" => flexkern::attention(&CpuBackend, &args, None, &mut out, Some(&mut lse)),
            _ => flexkern::attention(&CpuBackend::scalar(), &args, None, &mut out, Some(&mut lse)),
        }
        .unwrap();
        let mut nan_seen = 0;
        for i in 0..c.q {
            for hh in 0..c.hq {
                let row = i * c.hq + hh;
                let (o, ro) = (&out[row * c.d..][..c.d], &r.o[row * c.d..][..c.d]);
                let what = format!("{name} seed {seed}: query {i} head {hh}");
                if c.nan_rows.contains(&(i, hh)) {
                    assert!(r.lse[row].is_nan(), "{what}: oracle LSE {}", r.lse[row]);
                    assert!(ro.iter().all(|x| x.is_nan()), "{what}: oracle O");
                    assert!(lse[row].is_nan(), "{what}: LSE {}", lse[row]);
                    assert!(o.iter().all(|x| x.is_nan()), "{what}: O {o:?}");
                    nan_seen += 1;
                    continue;
                }
                assert!(r.lse[row].is_finite(), "{what}: oracle LSE {}", r.lse[row]);
                let e = (lse[row] as f64 - r.lse[row]).abs();
                assert!(
                    e <= 1e-5 * r.lse[row].abs().max(1.0),
                    "{what}: LSE {}",
                    lse[row]
                );
                for (&a, &b) in o.iter().zip(ro) {
                    // `!(e <= x)` also rejects NaN.
                    assert!((a as f64 - b).abs() <= 1e-5 * 2.0, "{what}: O {a} vs {b}");
                }
            }
        }
        assert_eq!(nan_seen, c.nan_rows.len());
    }
}

fn rows(queries: &[usize], heads: std::ops::Range<usize>) -> Vec<(usize, usize)> {
    queries
        .iter()
        .flat_map(|&i| heads.clone().map(move |h| (i, h)))
        .collect()
}

#[test]
fn prefill_nan_score_poisons_only_its_row() {
    // Query 7 sees key 3 (kept): NaN. Query 9 at key 20 is masked by causality: ignored.
    let at = |qp: i64, kp: i64| q_pos().eq(int(qp)).and(kv_pos().eq(int(kp)));
    let v = Variant::full()
        .mask(builtins::causal())
        .score(poison(at(7, 3).or(at(9, 20)), f64::NAN));
    let c = Case {
        q: 90,
        kv: 90,
        hq: 4,
        hkv: 2,
        d: 32,
        variant: v,
        nan_rows: rows(&[7], 0..4),
        split: false,
        nan_q: vec![],
        nan_k: vec![],
    };
    run(&c, 1);
    // Every key of query 30, head 2 only (one head of a GQA group), without and with sinks.
    let v = Variant::full()
        .mask(builtins::causal())
        .score(poison(q_pos().eq(int(30)).and(h().eq(int(2))), f64::NAN));
    let c = Case {
        nan_rows: vec![(30, 2)],
        variant: v.clone(),
        ..c
    };
    run(&c, 2);
    let c = Case {
        variant: v.sinks(vec![0.5, -1.0, 0.0, 2.0]),
        ..c
    };
    run(&c, 2);
    // A kept +inf score: the softmax takes inf - inf, so NaN too.
    let v = Variant::full()
        .mask(builtins::causal())
        .score(poison(at(50, 49).or(at(51, 80)), f64::INFINITY));
    let c = Case {
        nan_rows: rows(&[50], 0..4),
        variant: v,
        ..c
    };
    run(&c, 3);
}

#[test]
fn decode_nan_score_poisons_only_its_row() {
    // Streaming decode (a few stacked rows) over a short KV.
    let v = Variant::full().score(poison(kv_pos().eq(int(40)).and(h().eq(int(1))), f64::NAN));
    let c = Case {
        q: 2,
        kv: 300,
        hq: 4,
        hkv: 1,
        d: 64,
        variant: v,
        nan_rows: rows(&[0, 1], 1..2),
        split: false,
        nan_q: vec![],
        nan_k: vec![],
    };
    run(&c, 4);
    // Every key of one row.
    let c = Case {
        variant: Variant::full().score(poison(h().eq(int(3)), f64::NAN)),
        nan_rows: rows(&[0, 1], 3..4),
        ..c
    };
    run(&c, 4);
    // Split-KV: the NaN sits in one partition; the merge must carry it.
    let v = Variant::full()
        .mask(builtins::causal())
        .score(poison(kv_pos().eq(int(2500)).and(h().lt(int(3))), f64::NAN));
    let c = Case {
        q: 1,
        kv: 6000,
        hq: 6,
        hkv: 3,
        variant: v,
        nan_rows: rows(&[0], 0..3),
        split: true,
        ..c
    };
    run(&c, 5);
    // NaN only where the mask hides it: nothing changes.
    let v = Variant::full()
        .mask(kv_pos().lt(int(5000)))
        .score(poison(kv_pos().ge(int(5500)), f64::NAN));
    let c = Case {
        variant: v,
        nan_rows: vec![],
        ..c
    };
    run(&c, 6);
}

#[test]
fn nan_in_q_or_k_poisons_the_rows_that_see_it() {
    let (hq, d) = (4, 64);
    // Decode without a variant (the fused AVX2 decode tile): element 5 of query 0, head 1.
    let c = Case {
        q: 1,
        kv: 300,
        hq,
        hkv: 1,
        d,
        variant: Variant::full(),
        nan_rows: vec![(0, 1)],
        split: false,
        nan_q: vec![d + 5],
        nan_k: vec![],
    };
    run(&c, 7);
    // Key 100: every head of the one kv head.
    let c = Case {
        nan_rows: rows(&[0], 0..hq),
        nan_q: vec![],
        nan_k: vec![100 * d + 3],
        ..c
    };
    run(&c, 8);
    // Causal prefill, key 60 of kv head 1 (q heads 2, 3): only the queries that see it.
    let queries: Vec<usize> = (60..90).collect();
    let c = Case {
        q: 90,
        kv: 90,
        hkv: 2,
        variant: Variant::full().mask(builtins::causal()),
        nan_rows: rows(&queries, 2..4),
        nan_k: vec![(60 * 2 + 1) * d],
        ..c
    };
    run(&c, 9);
}
