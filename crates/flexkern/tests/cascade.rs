//! Cascade (shared-prefix) attention against the f64 oracle on the unpaged data: groups of
//! forked sequences (prefix pages shared copy-on-write) on shuffled pages of sizes 1, 7 and 16,
//! GQA, LSE, sinks, causal and full, empty suffixes, and the arguments it must refuse.

use flexkern::attention::cascade::{cascade_attention, plan_cascade, CascadeArgs};
use flexkern::attention::paged::prepare;
use flexkern::backend::to_device;
use flexkern::builtins::{alibi, alibi_slopes, causal, sliding_window, softcap};
use flexkern::expr::{float, h, int, kv_pos, score, select};
use flexkern::kv_cache::{CacheConfig, SeqId};
use flexkern::{reference, AttentionArgs, Backend, CpuBackend, DType, Error, TensorView, Variant};
use rand::{rngs::StdRng, Rng, SeedableRng};

type KvCache = flexkern::kv_cache::KvCache<CpuBackend>;

const D: usize = 16;

fn rand_vec(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

/// Groups of sequences: a prefix length and each member's (q_len, suffix_len).
type Groups = Vec<(usize, Vec<(usize, usize)>)>;

/// A batch of groups held contiguously (prefix ++ suffix per sequence) and in a paged cache
/// where each group's members are forks of one prefix sequence.
struct Case {
    hq: usize,
    hkv: usize,
    groups: Groups,
    /// Per sequence, K and V `[kv_len, Hkv, D]` (prefix then suffix).
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    q: Vec<f32>,
    cache: KvCache,
    ids: Vec<SeqId>,
}

impl Case {
    fn new(seed: u64, hq: usize, hkv: usize, ps: usize, groups: Groups) -> Case {
        Case::with_kv(seed, hq, hkv, ps, DType::F32, groups)
    }

    /// As `new`, the cache storing `kv` (rounded on write).
    fn with_kv(seed: u64, hq: usize, hkv: usize, ps: usize, kv: DType, groups: Groups) -> Case {
        let mut rng = StdRng::seed_from_u64(seed);
        let row = hkv * D;
        let be = CpuBackend;
        let pages: usize = groups
            .iter()
            .map(|(p, m)| p.div_ceil(ps) + m.iter().map(|s| s.1.div_ceil(ps) + 1).sum::<usize>())
            .sum();
        let mut cfg = CacheConfig::new(pages + 1, ps, hkv, D);
        (cfg.k_dtype, cfg.v_dtype) = (kv, kv);
        let mut cache = KvCache::new(&be, cfg).unwrap();
        cache.shuffle_free_pages(seed);
        let (mut k, mut v, mut ids) = (Vec::new(), Vec::new(), Vec::new());
        fn tv(x: &[f32], hkv: usize) -> TensorView<'_> {
            TensorView::contiguous(x, &[x.len() / (hkv * D), hkv, D])
        }
        for (plen, members) in &groups {
            let (pk, pv) = (
                rand_vec(&mut rng, plen * row),
                rand_vec(&mut rng, plen * row),
            );
            let root = cache.add_seq();
            // In chunks, so the prefix spans appends.
            for c in (0..*plen).step_by(37) {
                let e = (c + 37).min(*plen);
                let (a, b) = (&pk[c * row..e * row], &pv[c * row..e * row]);
                cache.append(&be, root, &tv(a, hkv), &tv(b, hkv)).unwrap();
            }
            for &(_, slen) in members {
                let id = cache.fork(root).unwrap();
                let (sk, sv) = (
                    rand_vec(&mut rng, slen * row),
                    rand_vec(&mut rng, slen * row),
                );
                cache.append(&be, id, &tv(&sk, hkv), &tv(&sv, hkv)).unwrap();
                k.push([&pk[..], &sk[..]].concat());
                v.push([&pv[..], &sv[..]].concat());
                ids.push(id);
            }
            cache.free(root).unwrap();
        }
        let nq: usize = groups.iter().flat_map(|g| g.1.iter().map(|s| s.0)).sum();
        Case {
            hq,
            hkv,
            q: rand_vec(&mut rng, nq * hq * D),
            groups,
            k,
            v,
            cache,
            ids,
        }
    }

    fn cu_q(&self) -> Vec<u64> {
        cumulative(self.groups.iter().flat_map(|g| g.1.iter().map(|s| s.0)))
    }
    fn cu_groups(&self) -> Vec<u64> {
        cumulative(self.groups.iter().map(|g| g.1.len()))
    }
    fn prefix_lens(&self) -> Vec<u64> {
        self.groups.iter().map(|g| g.0 as u64).collect()
    }
    fn q_view(&self) -> TensorView<'_> {
        TensorView::contiguous(&self.q[..], &[self.q.len() / (self.hq * D), self.hq, D])
    }

    /// The oracle (scale 0.3) on the contiguous data.
    fn oracle(&self, var: &Variant) -> reference::Reference {
        let (k, v) = (self.k.concat(), self.v.concat());
        let cu_kv = cumulative(self.k.iter().map(|x| x.len() / (self.hkv * D)));
        let cu_q = self.cu_q();
        let shape = [k.len() / (self.hkv * D), self.hkv, D];
        let args = AttentionArgs::new(
            self.q_view(),
            TensorView::contiguous(&k[..], &shape),
            TensorView::contiguous(&v[..], &shape),
        )
        .ragged(&cu_q, &cu_kv)
        .scale(0.3)
        .variant(var.clone());
        reference::of_args(&args).unwrap().1
    }

    /// Runs cascade attention with NaN-poisoned outputs.
    fn run(&self, var: &Variant) -> Result<(Vec<f32>, Vec<f32>), Error> {
        self.run_with(var, &self.cu_groups(), &self.prefix_lens(), &self.ids)
    }

    fn run_with(
        &self,
        var: &Variant,
        cu_groups: &[u64],
        prefix_lens: &[u64],
        ids: &[SeqId],
    ) -> Result<(Vec<f32>, Vec<f32>), Error> {
        let nq = self.q.len() / (self.hq * D);
        let mut out = vec![f32::NAN; nq * self.hq * D];
        let mut lse = vec![f32::NAN; nq * self.hq];
        let cu_q = self.cu_q();
        let args = CascadeArgs {
            cu_q_lens: &cu_q,
            cu_groups,
            prefix_lens,
            scale: Some(0.3),
            variant: var,
        };
        let kv = self.cache.view(ids).unwrap();
        cascade_attention(
            &CpuBackend,
            &self.q_view(),
            &kv,
            &args,
            &mut out,
            Some(&mut lse),
        )?;
        Ok((out, lse))
    }

    fn check(&self, var: &Variant, what: &str) {
        let (out, lse) = self.run(var).unwrap();
        let r = self.oracle(var);
        let e = rel_err(&out, &r.o);
        assert!(e <= 1e-5, "{what}: output error {e}");
        for (i, (&x, &y)) in lse.iter().zip(&r.lse).enumerate() {
            let same = (x == f32::NEG_INFINITY && y == f64::NEG_INFINITY)
                || (x as f64 - y).abs() <= 1e-5 * y.abs().max(1.0);
            assert!(same, "{what}: lse row {i}: {x} vs {y}");
        }
    }
}

fn cumulative(it: impl Iterator<Item = usize>) -> Vec<u64> {
    let mut c = vec![0u64];
    for x in it {
        c.push(c.last().unwrap() + x as u64);
    }
    c
}

/// max |a - b| / max |b|; NaN in `a` gives infinity.
fn rel_err(a: &[f32], b: &[f64]) -> f64 {
    let scale = b.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
    a.iter().zip(b).fold(0.0, |m, (&x, &y)| {
        let e = (x as f64 - y).abs();
        if e.is_nan() {
            f64::INFINITY
        } else {
            m.max(e / scale)
        }
    })
}

fn variants(hq: usize) -> Vec<(&'static str, Variant)> {
    let sinks: Vec<f32> = (0..hq)
        .map(|h| [0.5, -1.0, 2.0, f32::NEG_INFINITY][h % 4])
        .collect();
    vec![
        ("full", Variant::full()),
        ("causal", Variant::full().mask(causal())),
        (
            "softcap",
            Variant::full().mask(causal()).score(softcap(2.0)),
        ),
        ("sinks", Variant::full().mask(causal()).sinks(sinks)),
        // The window reaches back past every prefix of these tests.
        (
            "window",
            Variant::full().mask(causal()).mask(sliding_window(10_000)),
        ),
    ]
}

/// Random groups: prefixes of 1 token up to a few hundred, suffixes often empty, queries that
/// sit after the prefix (a query may be the prefix's last token when the suffix is empty).
fn random_groups(rng: &mut StdRng) -> Groups {
    (0..rng.gen_range(1..=3))
        .map(|_| {
            let plen = [1, rng.gen_range(2..40), rng.gen_range(40..300)][rng.gen_range(0..3)];
            let members = (0..rng.gen_range(1..=4))
                .map(|_| {
                    let slen = [0, rng.gen_range(1..30)][rng.gen_range(0..2)];
                    (rng.gen_range(0..=(slen + 1).min(4)), slen)
                })
                .collect();
            (plen, members)
        })
        .collect()
}

#[test]
fn cascade_matches_the_oracle_on_random_groups() {
    let mut rng = StdRng::seed_from_u64(1);
    for round in 0..6 {
        for ps in [1, 7, 16] {
            for (hq, hkv) in [(4, 2), (8, 1), (2, 2)] {
                let groups = random_groups(&mut rng);
                let c = Case::new(round * 100 + ps as u64, hq, hkv, ps, groups.clone());
                for (name, var) in variants(hq) {
                    c.check(&var, &format!("ps {ps}, hq {hq}/{hkv}, {name}, {groups:?}"));
                }
            }
        }
    }
}

/// The fixed edge cases: a 1-token prefix, empty suffixes (the prefix's partial page still
/// shared), a page-aligned prefix, and one long enough for split-KV decode in level 2 and a
/// multi-tile level 1.
#[test]
fn cascade_edge_cases_and_long_prefixes() {
    let cases: Vec<(usize, Groups)> = vec![
        (1, vec![(1, vec![(1, 0), (1, 3), (2, 5)])]),
        (
            7,
            vec![(1, vec![(1, 0), (1, 0)]), (9, vec![(0, 0), (1, 0)])],
        ),
        (
            16,
            vec![(32, vec![(1, 1), (3, 7), (1, 0)]), (5, vec![(2, 2)])],
        ),
        (
            16,
            vec![(3000, vec![(1, 1); 20]), (1500, vec![(1, 2000), (4, 40)])],
        ),
        (7, vec![(2000, vec![(1, 300), (2, 9), (1, 0)])]),
    ];
    for (i, (ps, groups)) in cases.into_iter().enumerate() {
        let c = Case::new(50 + i as u64, 8, 2, ps, groups.clone());
        for (name, var) in variants(8) {
            c.check(&var, &format!("case {i}, {name}"));
        }
    }
}

#[test]
fn level_one_runs_each_group_prefix_once_over_shared_pages() {
    // ps 16: a 40-token prefix whose partial page (32..40) is copied on the members' appends.
    let c = Case::new(
        7,
        4,
        2,
        16,
        vec![(40, vec![(1, 3), (1, 5)]), (33, vec![(1, 0), (2, 1)])],
    );
    let kv = c.cache.view(&c.ids).unwrap();
    let (cu_q, cu_g, pl) = (c.cu_q(), c.cu_groups(), c.prefix_lens());
    let var = Variant::full().mask(causal());
    let args = CascadeArgs {
        cu_q_lens: &cu_q,
        cu_groups: &cu_g,
        prefix_lens: &pl,
        scale: None,
        variant: &var,
    };
    let be = CpuBackend;
    let plan = plan_cascade(
        &args,
        DType::F32,
        4,
        &kv.store.layout,
        &kv.tables,
        &be.caps(),
    )
    .unwrap();
    // Group 0's tail was copied: level 1 keeps the two shared whole pages. Group 1's second
    // member wrote into the shared partial page, so it also falls back to whole pages.
    assert_eq!(plan.shared, vec![32, 32]);
    assert_eq!(
        plan.prefix.lens.num_seqs(),
        2,
        "one level-1 sequence per group"
    );
    assert_eq!(plan.prefix.lens.q_len(0), 2);
    assert_eq!(plan.prefix.lens.q_len(1), 3);
    assert_eq!(plan.prefix_tables.page_indices.len(), 4);
    // Level 2 sees the prefix pages as evicted.
    assert!(plan.suffix_tables.first_page.iter().all(|&f| f == 2));
    // Built once, run twice on buffers: the same result, matching the oracle.
    let q = to_device(&be, &c.q).unwrap();
    let tables = to_device(&be, &plan.packed_tables()).unwrap();
    let mut scratch = plan.scratch(&be).unwrap();
    let n = c.q.len();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut out = to_device(&be, &vec![f32::NAN; n]).unwrap();
        plan.run(&be, &q, kv.store, &tables, &mut scratch, &mut out, None)
            .unwrap();
        runs.push(flexkern::backend::to_host::<_, f32>(&be, &out).unwrap());
    }
    assert_eq!(runs[0], runs[1]);
    // The oracle runs at scale 0.3 (this plan used the default 1/sqrt(D)): plan again at 0.3.
    let r = c.oracle(&var);
    let args3 = CascadeArgs {
        scale: Some(0.3),
        ..args
    };
    let plan3 = plan_cascade(
        &args3,
        DType::F32,
        4,
        &kv.store.layout,
        &kv.tables,
        &be.caps(),
    )
    .unwrap();
    let mut out = to_device(&be, &vec![f32::NAN; n]).unwrap();
    plan3
        .run(&be, &q, kv.store, &tables, &mut scratch, &mut out, None)
        .unwrap();
    let got = flexkern::backend::to_host::<_, f32>(&be, &out).unwrap();
    assert!(rel_err(&got, &r.o) <= 1e-5);
    // A wrong tables buffer or scratch is refused.
    let short = to_device(&be, &plan.packed_tables()[1..]).unwrap();
    assert!(matches!(
        plan.run(&be, &q, kv.store, &short, &mut scratch, &mut out, None),
        Err(Error::InvalidArgument { arg: "tables", .. })
    ));
}

/// bf16 pages: checked against the oracle reading the same (rounded) pages.
#[test]
fn cascade_over_bf16_pages_matches_the_oracle_on_the_same_pages() {
    let groups = vec![(300, vec![(1, 20), (1, 0), (2, 9)]), (37, vec![(1, 4)])];
    let c = Case::with_kv(13, 8, 2, 16, DType::BF16, groups);
    for (name, var) in variants(8) {
        let (out, lse) = c.run(&var).unwrap();
        let kv = c.cache.view(&c.ids).unwrap();
        let q = c.q_view();
        let p = prepare(&q, &c.cu_q(), &kv.store.layout, &kv.tables, Some(0.3), &var).unwrap();
        let r = reference::attention(&p, q.data, &kv.host_kv().unwrap());
        let e = rel_err(&out, &r.o);
        assert!(e <= 1e-4, "{name}: output error {e}");
        for (&x, &y) in lse.iter().zip(&r.lse) {
            assert!(
                (x as f64 - y).abs() <= 1e-4 * y.abs().max(1.0),
                "{name}: {x} vs {y}"
            );
        }
    }
}

/// A NaN in one query row poisons that row only, through both levels and the merge.
#[test]
fn a_nan_query_poisons_its_row_only() {
    let mut c = Case::new(9, 4, 2, 7, vec![(20, vec![(1, 2), (1, 3)])]);
    c.q[5] = f32::NAN;
    let var = Variant::full().mask(causal());
    let (out, lse) = c.run(&var).unwrap();
    assert!(lse[0].is_nan() && out[..D].iter().all(|x| x.is_nan()));
    assert!(lse[1..].iter().all(|x| x.is_finite()));
    assert!(out[D..].iter().all(|x| x.is_finite()));
}

/// A score mod that makes a NaN score at prefix position 5 for head 1 (level 1) and at the
/// first suffix position for head 3 (level 2): those heads' rows are NaN, as in the oracle, and
/// the other heads match it.
#[test]
fn a_nan_score_in_either_level_poisons_its_rows_only() {
    let c = Case::new(14, 4, 2, 7, vec![(20, vec![(1, 3), (2, 4)])]);
    let nan_at = |pos: i64, head: i64| kv_pos().eq(int(pos)).and(h().eq(int(head)));
    let mod_ = select(
        nan_at(5, 1).or(nan_at(20, 3)),
        // NaN made at run time (non-finite constants are refused when a variant compiles).
        float(-1.0).sqrt(),
        score(),
    );
    let var = Variant::full().mask(causal()).score(mod_);
    let (out, lse) = c.run(&var).unwrap();
    let r = c.oracle(&var);
    for (i, (&x, &y)) in lse.iter().zip(&r.lse).enumerate() {
        let head = i % 4;
        assert_eq!(x.is_nan(), y.is_nan(), "row {i}");
        assert_eq!(y.is_nan(), head == 1 || head == 3, "row {i}");
        let (o, ro) = (&out[i * D..][..D], &r.o[i * D..][..D]);
        if y.is_nan() {
            assert!(o.iter().all(|v| v.is_nan()), "row {i}");
        } else {
            assert!(rel_err(o, ro) <= 1e-5 && (x as f64 - y).abs() <= 1e-5 * y.abs().max(1.0));
        }
    }
}

fn arg_of<T: std::fmt::Debug>(r: Result<T, Error>) -> &'static str {
    match r {
        Err(Error::InvalidArgument { arg, .. }) => arg,
        Err(Error::Mismatch { a, .. }) => a,
        other => panic!("expected a typed error, got {other:?}"),
    }
}

#[test]
fn bad_groups_unshared_pages_and_hiding_variants_are_refused() {
    let mut c = Case::new(
        11,
        4,
        2,
        16,
        vec![(40, vec![(1, 3), (1, 5)]), (20, vec![(1, 2)])],
    );
    let causal_v = Variant::full().mask(causal());
    let ids = c.ids.clone();
    let run = |c: &Case, v: &Variant, g: &[u64], p: &[u64], ids: &[SeqId]| c.run_with(v, g, p, ids);
    // Mismatched groups.
    assert_eq!(
        arg_of(run(&c, &causal_v, &[0, 2], &[40], &ids)),
        "cu_groups"
    );
    assert_eq!(
        arg_of(run(&c, &causal_v, &[1, 2, 3], &[40, 20], &ids)),
        "cu_groups"
    );
    assert_eq!(
        arg_of(run(&c, &causal_v, &[0, 2, 1, 3], &[40, 20, 0], &ids)),
        "cu_groups"
    );
    assert_eq!(
        arg_of(run(&c, &causal_v, &[0, 2, 3], &[40], &ids)),
        "prefix_lens"
    );
    // Grouping across the prefixes: sequence 2 does not share group 0's pages.
    assert_eq!(
        arg_of(run(&c, &causal_v, &[0, 3], &[20], &ids)),
        "page_indices"
    );
    // A prefix longer than a member, or an empty group claiming a prefix.
    assert_eq!(
        arg_of(run(&c, &causal_v, &[0, 2, 3], &[40, 23], &ids)),
        "prefix_lens"
    );
    assert_eq!(
        arg_of(run(&c, &causal_v, &[0, 2, 2, 3], &[40, 5, 20], &ids)),
        "prefix_lens"
    );
    // A sequence holding the same tokens in its own pages does not share them.
    let be = CpuBackend;
    let own = c.cache.add_seq();
    let (k, v) = (c.k[2].clone(), c.v[2].clone());
    let (kt, vt) = (
        TensorView::contiguous(&k[..], &[k.len() / (2 * D), 2, D]),
        TensorView::contiguous(&v[..], &[v.len() / (2 * D), 2, D]),
    );
    c.cache.append(&be, own, &kt, &vt).unwrap();
    let ids2 = [ids[0], ids[1], ids[2], own];
    c.groups[1].1.push((0, 2));
    assert_eq!(
        arg_of(run(&c, &causal_v, &[0, 2, 4], &[40, 20], &ids2)),
        "page_indices"
    );
    c.groups[1].1.pop();
    // Variants that hide part of the prefix, or whose score mod reads positions.
    let hiding = [
        Variant::full().mask(causal()).mask(sliding_window(30)),
        Variant::full().mask(kv_pos().ge(int(3))),
        Variant::full().score(alibi(alibi_slopes(4))),
    ];
    for v in &hiding {
        assert_eq!(arg_of(c.run(v)), "variant", "{v:?}");
    }
    // Queries inside the prefix under a causal mask do not see all of it.
    let c2 = Case::new(12, 4, 2, 16, vec![(40, vec![(3, 1)])]);
    assert_eq!(arg_of(c2.run(&causal_v)), "variant");
    assert!(c2.run(&Variant::full()).is_ok());
    // Output sizes.
    let cu_q = c.cu_q();
    let args = CascadeArgs {
        cu_q_lens: &cu_q,
        cu_groups: &[0, 2, 3],
        prefix_lens: &[40, 20],
        scale: None,
        variant: &causal_v,
    };
    let kv = c.cache.view(&ids).unwrap();
    let mut out = vec![0f32; c.q.len() - 1];
    let e = cascade_attention(&be, &c.q_view(), &kv, &args, &mut out, None);
    assert_eq!(arg_of(e), "out");
    let mut out = vec![0f32; c.q.len()];
    let mut lse = vec![0f32; 2];
    let e = cascade_attention(&be, &c.q_view(), &kv, &args, &mut out, Some(&mut lse));
    assert_eq!(arg_of(e), "lse");
    let q_short = TensorView::contiguous(&c.q[..2 * 4 * D], &[2, 4, D]);
    assert_eq!(
        arg_of(cascade_attention(&be, &q_short, &kv, &args, &mut out, None)),
        "q"
    );
}
