//! CPU attention kernels against the f64 oracle: random shapes, every built-in mod and
//! compositions, GQA, odd head sizes, f16/bf16, ragged batches with empty and fully masked rows,
//! split-KV decode, sinks, user block masks; both the AVX2 and the portable kernels.

use flexkern::attention::kv::KvSource;
use flexkern::backend::cpu::ScalarCpuBackend;
use flexkern::builtins;
use flexkern::reference;
use flexkern::{AttentionArgs, Backend, BlockMask, CpuBackend, DType, TensorView, Variant};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Clone)]
struct Case {
    q_lens: Vec<usize>,
    kv_lens: Vec<usize>,
    hq: usize,
    hkv: usize,
    dk: usize,
    dv: usize,
    dtype: DType,
    variant: Variant,
    /// User BlockMask block sizes (else the planner picks).
    blocks: Option<(usize, usize)>,
}

impl Case {
    fn new(q: usize, kv: usize, hq: usize, hkv: usize, d: usize) -> Case {
        Case {
            q_lens: vec![q],
            kv_lens: vec![kv],
            hq,
            hkv,
            dk: d,
            dv: d,
            dtype: DType::F32,
            variant: Variant::full(),
            blocks: None,
        }
    }
    fn ragged(q_lens: &[usize], kv_lens: &[usize], hq: usize, hkv: usize, d: usize) -> Case {
        Case {
            q_lens: q_lens.to_vec(),
            kv_lens: kv_lens.to_vec(),
            ..Case::new(0, 0, hq, hkv, d)
        }
    }
    fn variant(mut self, v: Variant) -> Case {
        self.variant = v;
        self
    }
    fn dtype(mut self, t: DType) -> Case {
        self.dtype = t;
        self
    }
    fn dv(mut self, dv: usize) -> Case {
        self.dv = dv;
        self
    }
}

enum Data {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
}

impl Data {
    fn random(rng: &mut StdRng, n: usize, t: DType) -> Data {
        let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect();
        match t {
            DType::F16 => Data::F16(x.iter().map(|&v| f16::from_f32(v)).collect()),
            DType::BF16 => Data::BF16(x.iter().map(|&v| bf16::from_f32(v)).collect()),
            _ => Data::F32(x),
        }
    }
    fn view(&self, shape: &[usize]) -> TensorView<'_> {
        match self {
            Data::F32(v) => TensorView::contiguous(&v[..], shape),
            Data::F16(v) => TensorView::contiguous(&v[..], shape),
            Data::BF16(v) => TensorView::contiguous(&v[..], shape),
        }
    }
}

/// Runs `c` on both backends and checks O and LSE against the oracle.
fn check(c: &Case, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (tq, tkv) = (
        c.q_lens.iter().sum::<usize>(),
        c.kv_lens.iter().sum::<usize>(),
    );
    let q = Data::random(&mut rng, tq * c.hq * c.dk, c.dtype);
    let k = Data::random(&mut rng, tkv * c.hkv * c.dk, c.dtype);
    let v = Data::random(&mut rng, tkv * c.hkv * c.dv, c.dtype);
    let cu = |l: &[usize]| {
        let mut out = vec![0u64];
        for &x in l {
            out.push(out.last().unwrap() + x as u64);
        }
        out
    };
    let (cq, ck) = (cu(&c.q_lens), cu(&c.kv_lens));
    let args = AttentionArgs::new(
        q.view(&[tq, c.hq, c.dk]),
        k.view(&[tkv, c.hkv, c.dk]),
        v.view(&[tkv, c.hkv, c.dv]),
    )
    .ragged(&cq, &ck)
    .variant(c.variant.clone());
    let (p, r) = reference::of_args(&args).unwrap();
    let bm = c
        .blocks
        .map(|(bq, bk)| BlockMask::build(p.variant.mask.as_ref(), &p.lens, c.hq, bq, bk).unwrap());
    let tol = if c.dtype == DType::F32 { 1e-5 } else { 1e-2 };
    for name in ["cpu", "scalar"] {
        let run = |out: &mut [f32], lse: Option<&mut [f32]>| match name {
            "cpu" => flexkern::attention(&CpuBackend, &args, bm.as_ref(), out, lse),
            _ => flexkern::attention(&ScalarCpuBackend, &args, bm.as_ref(), out, lse),
        };
        let mut out = vec![f32::NAN; tq * c.hq * c.dv];
        let mut lse = vec![f32::NAN; tq * c.hq];
        run(&mut out, Some(&mut lse)).unwrap();
        compare(&out, &lse, &r, tol, &format!("{name} seed {seed}"));
        // Without LSE the output is the same.
        let mut out2 = vec![f32::NAN; out.len()];
        run(&mut out2, None).unwrap();
        assert!(
            out.iter().zip(&out2).all(|(a, b)| a == b),
            "{name}: O without LSE"
        );
    }
}

fn compare(out: &[f32], lse: &[f32], r: &reference::Reference, tol: f64, what: &str) {
    let scale = r.o.iter().fold(1f64, |a, &b| a.max(b.abs()));
    for (i, (&a, &b)) in out.iter().zip(&r.o).enumerate() {
        let e = (a as f64 - b).abs();
        // `!(e <= x)` also rejects NaN.
        assert!(e <= tol * scale, "{what}: out[{i}] = {a}, oracle {b}");
    }
    let lscale = r
        .lse
        .iter()
        .filter(|x| x.is_finite())
        .fold(1f64, |a, &b| a.max(b.abs()));
    for (i, (&a, &b)) in lse.iter().zip(&r.lse).enumerate() {
        if b == f64::NEG_INFINITY {
            assert_eq!(a, f32::NEG_INFINITY, "{what}: lse[{i}]");
        } else {
            let e = (a as f64 - b).abs();
            assert!(e <= tol * lscale, "{what}: lse[{i}] = {a}, oracle {b}");
        }
    }
}

fn causal() -> Variant {
    Variant::full().mask(builtins::causal())
}

#[test]
fn head_sizes_and_gqa() {
    for (i, d) in [64, 80, 96, 128, 256, 1, 576].into_iter().enumerate() {
        let (q, kv) = if d == 576 { (40, 90) } else { (150, 170) };
        check(&Case::new(q, kv, 4, 2, d).variant(causal()), i as u64);
        check(&Case::new(3, 300, 8, 1, d), 100 + i as u64);
    }
    // Dk != Dv: 192/128 (DeepSeek prefill) and 576/512 (MLA decode).
    check(&Case::new(130, 140, 2, 2, 192).dv(128).variant(causal()), 7);
    check(&Case::new(2, 700, 16, 1, 576).dv(512), 8);
    check(&Case::new(33, 33, 3, 3, 13).dv(5), 9);
}

#[test]
fn f16_and_bf16_inputs() {
    for (i, t) in [DType::F16, DType::BF16].into_iter().enumerate() {
        check(
            &Case::new(200, 200, 4, 1, 128).dtype(t).variant(causal()),
            20 + i as u64,
        );
        check(&Case::new(1, 2100, 8, 2, 64).dtype(t), 22 + i as u64);
        check(&Case::new(17, 50, 2, 1, 81).dtype(t), 24 + i as u64);
    }
}

#[test]
fn every_builtin_mod() {
    let hq = 4;
    let ids: Vec<i64> = (0..400).map(|i| (i / 37) as i64).collect();
    let masks = [
        builtins::causal(),
        builtins::sliding_window(50).and(builtins::causal()),
        builtins::local(20, 10),
        builtins::chunked(64),
        builtins::document(ids),
        builtins::prefix_lm(70),
        builtins::block_sparse(32, 2, 3, true),
        builtins::block_sparse(16, 1, 4, false),
    ];
    for (i, m) in masks.into_iter().enumerate() {
        let v = Variant::full().mask(m);
        check(
            &Case::new(160, 300, hq, 2, 64).variant(v.clone()),
            30 + i as u64,
        );
        check(&Case::new(4, 300, hq, 1, 32).variant(v), 40 + i as u64);
    }
    let table: Vec<f32> = (0..hq * 17).map(|i| (i as f32 * 0.37).sin()).collect();
    let scores = [
        builtins::softcap(5.0),
        builtins::alibi(builtins::alibi_slopes(hq)),
        builtins::relative_bias(table, 8),
    ];
    for (i, s) in scores.into_iter().enumerate() {
        let v = Variant::full().score(s);
        check(
            &Case::new(100, 130, hq, 2, 64).variant(v.clone()),
            50 + i as u64,
        );
        check(&Case::new(1, 500, hq, 4, 64).variant(v), 60 + i as u64);
    }
}

/// Long sparse masks: the planner shrinks q and kv tiles (density < 0.25), and the result must
/// not change.
#[test]
fn long_sliding_window_with_shrunk_tiles() {
    let v = Variant::full()
        .mask(builtins::causal())
        .mask(builtins::sliding_window(256));
    check(&Case::new(1024, 1024, 2, 1, 64).variant(v.clone()), 70);
    check(&Case::new(700, 1500, 4, 2, 64).variant(v), 71);
}

/// Partial tiles skip the keys outside each row's kept range: bands whose width depends on the
/// head (the stacked GQA rows of one tile keep different ranges), holes inside a band, rows that
/// keep nothing, and tile sizes that are not multiples of the 8x8 sub-blocks.
#[test]
fn banded_masks_skip_only_masked_keys() {
    use flexkern::expr::{h, kv_pos, q_pos};
    let per_head = kv_pos()
        .le(q_pos())
        .and(kv_pos().gt(q_pos() - (h() + 1) * 37));
    let holes = kv_pos()
        .le(q_pos())
        .and((kv_pos() % 5).ne(flexkern::expr::int(2)))
        .and(builtins::sliding_window(90));
    let empty_rows = builtins::local(30, 5).and((q_pos() % 7).ne(flexkern::expr::int(3)));
    for (i, m) in [per_head, holes, empty_rows].into_iter().enumerate() {
        let v = Variant::full().mask(m);
        check(
            &Case::new(300, 340, 4, 2, 64).variant(v.clone()),
            400 + i as u64,
        );
        let mut c = Case::new(150, 170, 6, 2, 40).variant(v);
        c.blocks = Some((36, 20));
        check(&c, 410 + i as u64);
    }
}

#[test]
fn tree_mask_for_speculative_decoding() {
    // A 6-token draft tree: token j sees its ancestors and itself.
    let parent = [usize::MAX, 0, 0, 1, 1, 2];
    let bits: Vec<i64> = (0..6)
        .map(|j| {
            let (mut b, mut x) = (0i64, j);
            while x != usize::MAX {
                b |= 1 << x;
                x = parent[x];
            }
            b
        })
        .collect();
    let v = Variant::full().mask(builtins::tree(bits));
    check(&Case::new(6, 140, 4, 2, 64).variant(v), 70);
}

#[test]
fn compositions_and_sinks() {
    let hq = 6;
    let sinks: Vec<f32> = (0..hq).map(|h| h as f32 * 0.8 - 2.0).collect();
    let v = Variant::full()
        .mask(builtins::causal())
        .mask(builtins::sliding_window(40))
        .score(builtins::alibi(builtins::alibi_slopes(hq)))
        .score(builtins::softcap(8.0))
        .sinks(sinks.clone());
    check(&Case::new(120, 200, hq, 2, 64).variant(v.clone()), 80);
    check(&Case::new(1, 3000, hq, 3, 64).variant(v), 81);
    // Sinks alone, decode split over a long KV.
    let v = Variant::full().sinks(sinks);
    check(&Case::new(2, 5000, hq, 1, 128).variant(v), 82);
}

#[test]
fn ragged_batches_with_empty_and_masked_rows() {
    // Prefill chunks, decode tokens, q_len 0, kv_len 0, q_len > kv_len.
    let q = [37, 1, 0, 4, 90, 3, 1, 20];
    let kv = [37, 400, 12, 0, 200, 3, 1500, 5];
    for (i, v) in [Variant::full(), causal()].into_iter().enumerate() {
        check(&Case::ragged(&q, &kv, 4, 2, 64).variant(v), 90 + i as u64);
    }
    // Fully masked rows with sinks: O = 0, LSE = sink.
    let v = causal().sinks(vec![0.5, -1.0]);
    check(&Case::ragged(&q, &kv, 2, 1, 32).variant(v), 92);
    // Everything masked.
    let v = Variant::full().mask(flexkern::expr::kv_pos().lt(flexkern::expr::int(0)));
    check(&Case::new(70, 80, 2, 1, 16).variant(v), 93);
}

#[test]
fn random_shapes() {
    let mut rng = StdRng::seed_from_u64(1234);
    for i in 0..12 {
        let hkv = rng.gen_range(1..=3);
        let hq = hkv * rng.gen_range(1..=4);
        let d = [8, 16, 40, 64, 72, 128][rng.gen_range(0..6)];
        let n = rng.gen_range(1..=4);
        let q: Vec<usize> = (0..n).map(|_| rng.gen_range(0..120)).collect();
        let kv: Vec<usize> = q.iter().map(|&x| x + rng.gen_range(0..200)).collect();
        let v = match i % 3 {
            0 => Variant::full(),
            1 => causal(),
            _ => causal().score(builtins::softcap(4.0)),
        };
        let dt = [DType::F32, DType::F32, DType::BF16][i % 3];
        check(
            &Case::ragged(&q, &kv, hq, hkv, d).variant(v).dtype(dt),
            200 + i as u64,
        );
    }
}

#[test]
fn user_block_masks_dictate_tiles() {
    for (i, blocks) in [(48, 40), (1, 7), (200, 300), (16, 128)]
        .into_iter()
        .enumerate()
    {
        let mut c = Case::new(150, 180, 4, 2, 64).variant(causal());
        c.blocks = Some(blocks);
        check(&c, 300 + i as u64);
    }
    let mut c = Case::new(100, 100, 4, 1, 32)
        .variant(Variant::full().mask(builtins::block_sparse(16, 1, 3, true)));
    c.blocks = Some((32, 16));
    check(&c, 310);
}

#[test]
fn malformed_arguments_are_errors() {
    let q = vec![0.5f32; 10 * 2 * 8];
    let k = vec![0.5f32; 12 * 8];
    let args = AttentionArgs::new(
        TensorView::contiguous(&q[..], &[10, 2, 8]),
        TensorView::contiguous(&k[..], &[12, 1, 8]),
        TensorView::contiguous(&k[..], &[12, 1, 8]),
    );
    let b = CpuBackend;
    let mut out = vec![0f32; 10 * 2 * 8];
    assert!(flexkern::attention(&b, &args, None, &mut out[1..], None).is_err());
    let mut lse = vec![0f32; 3];
    assert!(flexkern::attention(&b, &args, None, &mut out, Some(&mut lse)).is_err());
    // A block mask for other lengths.
    let lens = flexkern::attention::problem::SeqLens::single(40, 12);
    let bm = BlockMask::build(None, &lens, 2, 16, 16).unwrap();
    assert!(flexkern::attention(&b, &args, Some(&bm), &mut out, None).is_err());
    // The backend checks its buffers against the problem's layouts.
    let p = args.prepare().unwrap();
    let plan = flexkern::attention::plan::plan(&p, &b.caps(), None).unwrap();
    let q = flexkern::attention::upload_data(&b, &args.q.data).unwrap();
    let k = flexkern::attention::upload_data(&b, &args.k.data).unwrap();
    let short = flexkern::backend::to_device(&b, &[0f32; 11 * 8]).unwrap();
    let mut o = b.alloc(DType::F32, out.len()).unwrap();
    use flexkern::backend::{host::HostBuffer, AttnIo, KvBufs};
    let mut run = |v: &HostBuffer| {
        let io = AttnIo {
            q: &q,
            kv: KvBufs::Strided { k: &k, v },
            out: &mut o,
            lse: None,
        };
        b.attention(&p, &plan, io)
    };
    assert!(run(&short).is_err(), "V shorter than its layout");
    let halfs = flexkern::backend::to_device(&b, &[f16::ZERO; 12 * 8]).unwrap();
    assert!(run(&halfs).is_err(), "V of another dtype");
    assert!(run(&k).is_ok());
    assert!(flexkern::attention(&b, &args, None, &mut out, None).is_ok());
}

/// K/V rows scattered over memory in a shuffled order, unused slots NaN, int8 or f16 storage:
/// the kernels may assume nothing beyond one row.
struct ShuffledKv {
    heads: usize,
    dim: usize,
    lens: Vec<usize>,
    /// Slot of (seq, pos) = slots[offset(seq) + pos]; the row of (slot, head) follows.
    slots: Vec<usize>,
    k16: Vec<f16>,
    v8: Vec<i8>,
}

impl ShuffledKv {
    fn new(rng: &mut StdRng, lens: &[usize], heads: usize, dim: usize) -> ShuffledKv {
        let n: usize = lens.iter().sum();
        let total = 2 * n + 3;
        let mut slots: Vec<usize> = (0..total).collect();
        for i in (1..total).rev() {
            slots.swap(i, rng.gen_range(0..=i));
        }
        slots.truncate(n);
        let mut k16 = vec![f16::NAN; total * heads * dim];
        let mut v8 = vec![0i8; total * heads * dim];
        for &s in &slots {
            for x in &mut k16[s * heads * dim..][..heads * dim] {
                *x = f16::from_f32(rng.gen_range(-2.0..2.0));
            }
            for x in &mut v8[s * heads * dim..][..heads * dim] {
                *x = rng.gen_range(-127..=127);
            }
        }
        ShuffledKv {
            heads,
            dim,
            lens: lens.to_vec(),
            slots,
            k16,
            v8,
        }
    }
    fn at(&self, seq: usize, head: usize, pos: usize) -> usize {
        let slot = self.slots[self.lens[..seq].iter().sum::<usize>() + pos];
        (slot * self.heads + head) * self.dim
    }
}

impl KvSource for ShuffledKv {
    fn num_kv_heads(&self) -> usize {
        self.heads
    }
    fn head_dim(&self) -> usize {
        self.dim
    }
    fn head_dim_v(&self) -> usize {
        self.dim
    }
    fn kv_len(&self, seq: usize) -> usize {
        self.lens[seq]
    }
    fn k_row(&self, seq: usize, head: usize, pos: usize) -> flexkern::attention::kv::KvRow<'_> {
        let a = self.at(seq, head, pos);
        flexkern::attention::kv::KvRow::F16(&self.k16[a..a + self.dim])
    }
    fn v_row(&self, seq: usize, head: usize, pos: usize) -> flexkern::attention::kv::KvRow<'_> {
        let a = self.at(seq, head, pos);
        flexkern::attention::kv::KvRow::I8(&self.v8[a..a + self.dim], 1.0 / 64.0)
    }
}

#[test]
fn scattered_kv_rows_and_head_major_layouts() {
    let mut rng = StdRng::seed_from_u64(400);
    let (hq, hkv, d) = (8, 2, 64);
    let q_lens = [1usize, 150, 3];
    let kv_lens = [900usize, 160, 40];
    let kv = ShuffledKv::new(&mut rng, &kv_lens, hkv, d);
    let tq: usize = q_lens.iter().sum();
    let q: Vec<f16> = (0..tq * hq * d)
        .map(|_| f16::from_f32(rng.gen_range(-2.0..2.0)))
        .collect();
    // Only Q (and the lengths) come from these args; K/V come from `kv`.
    let cu = |l: &[usize]| {
        let mut out = vec![0u64];
        for &x in l {
            out.push(out.last().unwrap() + x as u64);
        }
        out
    };
    let (cq, ck) = (cu(&q_lens), cu(&kv_lens));
    let dummy = vec![f16::ZERO; ck[3] as usize * hkv * d];
    for v in [Variant::full(), causal().sinks(vec![0.3; hq])] {
        let args = AttentionArgs::new(
            TensorView::contiguous(&q[..], &[tq, hq, d]),
            TensorView::contiguous(&dummy[..], &[ck[3] as usize, hkv, d]),
            TensorView::contiguous(&dummy[..], &[ck[3] as usize, hkv, d]),
        )
        .ragged(&cq, &ck)
        .variant(v);
        let p = args.prepare().unwrap();
        let r = reference::attention(&p, args.q.data, &kv);
        for scalar in [false, true] {
            let plan = flexkern::attention::plan::plan(&p, &CpuBackend.caps(), None).unwrap();
            let mut out = vec![f32::NAN; tq * hq * d];
            let mut lse = vec![f32::NAN; tq * hq];
            let lo = Some(&mut lse[..]);
            if scalar {
                ScalarCpuBackend.attention_source(&p, args.q.data, &kv, &plan, &mut out, lo)
            } else {
                CpuBackend.attention_source(&p, args.q.data, &kv, &plan, &mut out, lo)
            }
            .unwrap();
            compare(&out, &lse, &r, 1e-5, "scattered");
        }
    }
    // Batch-major [B, H, S, D] storage passed through strides: a head's rows are adjacent, so
    // decode runs kv heads as separate items.
    let (b, s, kvl) = (2usize, 2usize, 700usize);
    let qd: Vec<f32> = (0..b * s * hq * d)
        .map(|_| rng.gen_range(-2.0..2.0))
        .collect();
    let kd: Vec<f32> = (0..b * hkv * kvl * d)
        .map(|_| rng.gen_range(-2.0..2.0))
        .collect();
    let vd: Vec<f32> = (0..b * hkv * kvl * d)
        .map(|_| rng.gen_range(-2.0..2.0))
        .collect();
    let st = [hkv * kvl * d, d, kvl * d, 1];
    let args = AttentionArgs::new(
        TensorView::contiguous(&qd[..], &[b, s, hq, d]),
        TensorView::strided(&kd[..], &[b, kvl, hkv, d], &st),
        TensorView::strided(&vd[..], &[b, kvl, hkv, d], &st),
    )
    .variant(causal());
    let (p, r) = reference::of_args(&args).unwrap();
    let plan = flexkern::attention::plan::plan(&p, &CpuBackend.caps(), None).unwrap();
    assert!(plan.items.iter().all(|it| it.kv_heads == 1));
    for scalar in [false, true] {
        let mut out = vec![f32::NAN; b * s * hq * d];
        let mut lse = vec![f32::NAN; b * s * hq];
        let lo = Some(&mut lse[..]);
        if scalar {
            flexkern::attention(&ScalarCpuBackend, &args, None, &mut out, lo)
        } else {
            flexkern::attention(&CpuBackend, &args, None, &mut out, lo)
        }
        .unwrap();
        compare(&out, &lse, &r, 1e-5, "head-major");
    }
}
