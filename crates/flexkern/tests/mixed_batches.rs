//! Mixed batches (prefill chunks beside decode tokens) against the f64 oracle: strided and
//! paged KV, GQA, sliding windows, a custom mask, score mods and sinks, empty sequences and
//! fully masked rows, on the AVX2 and the portable kernels; and the mixed schedule against the
//! single path (`TilePolicy::mixed = false`) on the same inputs.

use flexkern::attention::plan::{coverage, plan, Kernel};
use flexkern::attention::upload_data;
use flexkern::backend::cpu::ScalarCpuBackend;
use flexkern::backend::{to_host, AttnIo, KvBufs};
use flexkern::builtins::{alibi, alibi_slopes, block_sparse, causal, sliding_window, softcap};
use flexkern::expr::{int, kv_pos, q_pos};
use flexkern::verify::{rel_err, run_case, run_paged_case, tolerance, Case, Input, PagedCase, Rng};
use flexkern::{reference, AttentionArgs, Backend, CpuBackend, DType, Variant};

/// A prefill chunk, long and short decodes, a speculative run of 4, an empty query run, an empty
/// KV, rows that see nothing under causal (q longer than KV), and the 16/17 family boundary.
fn seqs() -> Vec<(usize, usize)> {
    vec![
        (200, 800),
        (1, 2600),
        (0, 40),
        (4, 2500),
        (1, 0),
        (20, 10),
        (16, 700),
        (17, 300),
        (1, 1),
        (1, 1500),
    ]
}

/// Band of 40 plus every seventh key: a mask no built-in spells.
fn custom() -> Variant {
    let band = (q_pos() - kv_pos()).abs().le(int(40));
    let strided = (kv_pos() % 7).eq(int(0)).and(kv_pos().le(q_pos()));
    Variant::full().mask(band.or(strided))
}

fn variants() -> Vec<(&'static str, Variant)> {
    vec![
        ("causal", Variant::full().mask(causal())),
        (
            "sliding 64 + causal",
            Variant::full().mask(causal()).mask(sliding_window(64)),
        ),
        ("custom band | strided", custom()),
        (
            "softcap + alibi + sinks",
            Variant::full()
                .mask(causal())
                .score(softcap(20.0))
                .score(alibi(alibi_slopes(8)))
                .sinks(vec![0.3, -1.0, 0.5, 2.0, 0.0, 1.0, -0.5, 0.1]),
        ),
        (
            "block-sparse per head",
            Variant::full().mask(block_sparse(32, 2, 8, true)),
        ),
        ("full", Variant::full()),
    ]
}

fn case(name: &str, v: &Variant, dtype: DType) -> Case {
    Case {
        name: name.into(),
        dtype,
        seqs: seqs(),
        hq: 8,
        hkv: 2,
        dk: 64,
        dv: 64,
        variant: v.clone(),
    }
}

/// Args of a case with fresh random inputs (kept alive by the caller).
fn inputs(c: &Case, seed: u64) -> ([Input; 3], Vec<u64>, Vec<u64>) {
    let mut rng = Rng::new(seed);
    let (tq, tk): (usize, usize) = (
        c.seqs.iter().map(|s| s.0).sum(),
        c.seqs.iter().map(|s| s.1).sum(),
    );
    let mut fill = |n: usize| {
        let v: Vec<f32> = (0..n).map(|_| rng.uniform() * 2.0).collect();
        match c.dtype {
            DType::BF16 => Input::BF16(v.iter().map(|&x| half::bf16::from_f32(x)).collect()),
            _ => Input::F32(v),
        }
    };
    let data = [
        fill(tq * c.hq * c.dk),
        fill(tk * c.hkv * c.dk),
        fill(tk * c.hkv * c.dv),
    ];
    let (mut cq, mut ck) = (vec![0u64], vec![0u64]);
    for &(q, k) in &c.seqs {
        cq.push(cq.last().unwrap() + q as u64);
        ck.push(ck.last().unwrap() + k as u64);
    }
    (data, cq, ck)
}

#[test]
fn the_batch_is_mixed() {
    // The cases below exercise both families in one plan (else they would test nothing new).
    for (name, v) in variants() {
        let c = case(name, &v, DType::F32);
        let (d, cq, ck) = inputs(&c, 1);
        let tq = cq[cq.len() - 1] as usize;
        let tk = ck[ck.len() - 1] as usize;
        let args = AttentionArgs::new(
            d[0].view(&[tq, 8, 64]),
            d[1].view(&[tk, 2, 64]),
            d[2].view(&[tk, 2, 64]),
        )
        .ragged(&cq, &ck)
        .variant(v);
        let p = args.prepare().unwrap();
        let pl = plan(&p, &CpuBackend.caps(), None).unwrap();
        coverage::check(&pl, &p).unwrap();
        for (s, &(q, _)) in c.seqs.iter().enumerate() {
            let want = if q <= 16 {
                Kernel::Decode
            } else {
                Kernel::Prefill
            };
            assert!(pl
                .items
                .iter()
                .filter(|it| it.seq == s)
                .all(|it| it.kernel == want));
        }
        assert!(pl.items.iter().any(|it| it.kernel == Kernel::Decode));
        assert!(pl.items.iter().any(|it| it.kernel == Kernel::Prefill));
    }
}

#[test]
fn mixed_batches_match_the_oracle_strided() {
    for (i, (name, v)) in variants().into_iter().enumerate() {
        // bf16 on two variants keeps the oracle's time down.
        let dtypes: &[DType] = if i % 3 == 0 {
            &[DType::F32, DType::BF16]
        } else {
            &[DType::F32]
        };
        for &dtype in dtypes {
            let c = case(name, &v, dtype);
            for (which, o) in [
                ("avx2", run_case(&CpuBackend, &c, 100 + i as u64)),
                ("scalar", run_case(&ScalarCpuBackend, &c, 100 + i as u64)),
            ] {
                assert!(o.passed, "{which} {name} {dtype:?}: {o:?}");
            }
        }
    }
}

#[test]
fn mixed_batches_match_the_oracle_paged() {
    let pick = [
        "causal",
        "sliding 64 + causal",
        "custom band | strided",
        "softcap + alibi + sinks",
    ];
    for (i, (name, v)) in variants().into_iter().enumerate() {
        if !pick.contains(&name) {
            continue;
        }
        for (page_size, kv_dtype) in [(16, DType::F32), (7, DType::BF16), (16, DType::Fp8E4M3)] {
            let pc = PagedCase {
                case: case(name, &v, DType::F32),
                page_size,
                kv_dtype,
                window: None,
            };
            let o = run_paged_case(&CpuBackend, &pc, 200 + i as u64);
            assert!(o.passed, "{name} page {page_size} {kv_dtype:?}: {o:?}");
        }
    }
}

/// Runs `c` through a plan made with `mixed` on or off; returns (O, LSE) and the oracle's
/// error of each.
fn run_policy<B: Backend<Buffer = flexkern::backend::host::HostBuffer>>(
    b: &B,
    c: &Case,
    mixed: bool,
    seed: u64,
) -> (f64, f64) {
    let (d, cq, ck) = inputs(c, seed);
    let (tq, tk) = (cq[cq.len() - 1] as usize, ck[ck.len() - 1] as usize);
    let args = AttentionArgs::new(
        d[0].view(&[tq, c.hq, c.dk]),
        d[1].view(&[tk, c.hkv, c.dk]),
        d[2].view(&[tk, c.hkv, c.dv]),
    )
    .ragged(&cq, &ck)
    .variant(c.variant.clone());
    let (p, want) = reference::of_args(&args).unwrap();
    let mut caps = b.caps();
    caps.tiles.mixed = mixed;
    let pl = plan(&p, &caps, None).unwrap();
    coverage::check(&pl, &p).unwrap();
    let q = upload_data(b, &args.q.data).unwrap();
    let k = upload_data(b, &args.k.data).unwrap();
    let v = upload_data(b, &args.v.data).unwrap();
    // Poisoned outputs: an unwritten row shows as NaN.
    let mut o = flexkern::backend::to_device(b, &vec![f32::NAN; tq * c.hq * c.dv]).unwrap();
    let mut lse = flexkern::backend::to_device(b, &vec![f32::NAN; tq * c.hq]).unwrap();
    let io = AttnIo {
        q: &q,
        kv: KvBufs::Strided { k: &k, v: &v },
        out: &mut o,
        lse: Some(&mut lse),
    };
    b.attention(&p, &pl, io).unwrap();
    let (o, lse): (Vec<f32>, Vec<f32>) = (to_host(b, &o).unwrap(), to_host(b, &lse).unwrap());
    (rel_err(&o, &want.o), rel_err(&lse, &want.lse))
}

#[test]
fn the_single_path_and_the_mixed_schedule_both_match_the_oracle() {
    for (i, (name, v)) in variants().into_iter().enumerate() {
        let c = case(name, &v, DType::F32);
        for mixed in [true, false] {
            for (which, (eo, el)) in [
                ("avx2", run_policy(&CpuBackend, &c, mixed, 300 + i as u64)),
                (
                    "scalar",
                    run_policy(&ScalarCpuBackend, &c, mixed, 300 + i as u64),
                ),
            ] {
                let tol = tolerance(DType::F32);
                assert!(
                    eo <= tol && el <= tol,
                    "{which} {name} mixed={mixed}: O {eo:e}, LSE {el:e}"
                );
            }
        }
    }
}

/// The plan depends on lengths, heads and the device only: a strided and a paged problem of the
/// same batch (other values, shuffled pages) get the same work list.
#[test]
fn strided_and_paged_batches_get_the_same_plan() {
    use flexkern::attention::paged::prepare;
    use flexkern::kv_cache::{CacheConfig, KvCache};
    use flexkern::TensorView;
    let b = CpuBackend;
    for (i, (name, v)) in variants().into_iter().enumerate() {
        let c = case(name, &v, DType::F32);
        let (d, cq, ck) = inputs(&c, 400 + i as u64);
        let (tq, tk) = (cq[cq.len() - 1] as usize, ck[ck.len() - 1] as usize);
        let args = AttentionArgs::new(
            d[0].view(&[tq, c.hq, c.dk]),
            d[1].view(&[tk, c.hkv, c.dk]),
            d[2].view(&[tk, c.hkv, c.dv]),
        )
        .ragged(&cq, &ck)
        .variant(v.clone());
        let ps = args.prepare().unwrap();
        let pages: usize = c.seqs.iter().map(|s| s.1.div_ceil(16)).sum();
        let mut cache = KvCache::new(&b, CacheConfig::new(pages + 3, 16, c.hkv, c.dk)).unwrap();
        cache.shuffle_free_pages(i as u64);
        let mut rng = Rng::new(9 + i as u64);
        let ids: Vec<_> = c
            .seqs
            .iter()
            .map(|&(_, kl)| {
                let id = cache.add_seq();
                let x: Vec<f32> = (0..kl * c.hkv * c.dk).map(|_| rng.uniform()).collect();
                let t = TensorView::contiguous(&x[..], &[kl, c.hkv, c.dk]);
                cache.append(&b, id, &t, &t).unwrap();
                id
            })
            .collect();
        let kv = cache.view(&ids).unwrap();
        let q = d[0].view(&[tq, c.hq, c.dk]);
        let pp = prepare(&q, &cq, &kv.store.layout, &kv.tables, None, &v).unwrap();
        for workers in [1, 2, 16] {
            let mut caps = b.caps();
            caps.workers = workers;
            let (a, p) = (
                plan(&ps, &caps, None).unwrap(),
                plan(&pp, &caps, None).unwrap(),
            );
            coverage::check(&p, &pp).unwrap();
            assert_eq!(a.items, p.items, "{name}, {workers} workers");
            assert_eq!(a.merges, p.merges);
            assert_eq!(a.kv_blocks, p.kv_blocks);
            assert_eq!(a.partial_rows, p.partial_rows);
        }
    }
}
