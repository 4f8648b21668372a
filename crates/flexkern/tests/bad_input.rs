//! Malformed arguments give a typed error naming the argument: never a panic, never an
//! out-of-bounds read. A property test throws random malformed calls at the entry point.

use flexkern::builtins::{alibi, causal, document};
use flexkern::verify::Rng;
use flexkern::{attention, AttentionArgs, CpuBackend, Error, TensorView, Variant};
use half::f16;

fn arg_of(e: &Error) -> &'static str {
    match e {
        Error::InvalidArgument { arg, .. } | Error::UnsupportedDType { arg, .. } => arg,
        Error::Mismatch { a, .. } => a,
        Error::Expr(_) => "variant",
        _ => "other",
    }
}

fn run(args: &AttentionArgs, out_len: usize, lse_len: usize) -> Result<(), Error> {
    let mut o = vec![0f32; out_len];
    let mut l = vec![0f32; lse_len];
    attention(&CpuBackend, args, None, &mut o, Some(&mut l))
}

#[test]
fn each_malformed_argument_is_named() {
    let q = vec![0.5f32; 10 * 4 * 8];
    let kv = vec![0.25f32; 12 * 2 * 8];
    let qv = || TensorView::contiguous(q.as_slice(), &[10, 4, 8]);
    let kvv = || TensorView::contiguous(kv.as_slice(), &[12, 2, 8]);
    let cases: Vec<(AttentionArgs, &str)> = vec![
        // rank
        (
            AttentionArgs::new(TensorView::contiguous(q.as_slice(), &[40, 8]), kvv(), kvv()),
            "q",
        ),
        // strides reaching past the data
        (
            AttentionArgs::new(
                TensorView::strided(q.as_slice(), &[10, 4, 8], &[64, 8, 1]),
                kvv(),
                kvv(),
            ),
            "q",
        ),
        // last stride not 1
        (
            AttentionArgs::new(
                TensorView::strided(q.as_slice(), &[10, 4, 8], &[32, 1, 4]),
                kvv(),
                kvv(),
            ),
            "q",
        ),
        // Hq not a multiple of Hkv
        (
            AttentionArgs::new(
                TensorView::contiguous(&q[..10 * 3 * 8], &[10, 3, 8]),
                kvv(),
                kvv(),
            ),
            "q",
        ),
        // cu lens not starting at 0 / not monotonic / beyond the tensor / mismatched counts
        (
            AttentionArgs::new(qv(), kvv(), kvv()).ragged(&[1, 10], &[0, 12]),
            "cu_q_lens",
        ),
        (
            AttentionArgs::new(qv(), kvv(), kvv()).ragged(&[0, 6, 4], &[0, 5, 12]),
            "cu_q_lens",
        ),
        (
            AttentionArgs::new(qv(), kvv(), kvv()).ragged(&[0, 11], &[0, 12]),
            "q",
        ),
        (
            AttentionArgs::new(qv(), kvv(), kvv()).ragged(&[0, 10], &[0, 13]),
            "k",
        ),
        (
            AttentionArgs::new(qv(), kvv(), kvv()).ragged(&[0, 10], &[0, 6, 12]),
            "cu_q_lens",
        ),
        // non-finite scale
        (
            AttentionArgs::new(qv(), kvv(), kvv()).scale(f32::NAN),
            "scale",
        ),
        (
            AttentionArgs::new(qv(), kvv(), kvv()).scale(f32::INFINITY),
            "scale",
        ),
        // captured tensors of the wrong length
        (
            AttentionArgs::new(qv(), kvv(), kvv())
                .variant(Variant::full().mask(document(vec![0; 5]))),
            "variant",
        ),
        (
            AttentionArgs::new(qv(), kvv(), kvv())
                .variant(Variant::full().score(alibi(vec![0.1; 3]))),
            "alibi",
        ),
        (
            AttentionArgs::new(qv(), kvv(), kvv())
                .variant(Variant::full().mask(causal()).sinks(vec![0.0; 2])),
            "sinks",
        ),
    ];
    for (i, (args, want)) in cases.iter().enumerate() {
        let e = run(args, 10 * 4 * 8, 40).expect_err(&format!("case {i} should fail"));
        assert_eq!(arg_of(&e), *want, "case {i}: {e}");
    }
    // Mismatched dtypes.
    let kh: Vec<f16> = kv.iter().map(|&x| f16::from_f32(x)).collect();
    let args = AttentionArgs::new(
        qv(),
        TensorView::contiguous(kh.as_slice(), &[12, 2, 8]),
        kvv(),
    );
    assert_eq!(arg_of(&run(&args, 320, 40).unwrap_err()), "k");
    // Unsupported head size, and wrong output lengths.
    let big = vec![0f32; 600 * 2];
    let args = AttentionArgs::new(
        TensorView::contiguous(big.as_slice(), &[2, 1, 600]),
        TensorView::contiguous(big.as_slice(), &[2, 1, 600]),
        TensorView::contiguous(big.as_slice(), &[2, 1, 600]),
    );
    assert_eq!(arg_of(&run(&args, 1200, 2).unwrap_err()), "k");
    assert_eq!(
        arg_of(&run(&AttentionArgs::new(qv(), kvv(), kvv()), 7, 40).unwrap_err()),
        "out"
    );
    assert_eq!(
        arg_of(&run(&AttentionArgs::new(qv(), kvv(), kvv()), 320, 3).unwrap_err()),
        "lse"
    );
}

fn dims(rng: &mut Rng, n: usize) -> Vec<usize> {
    (0..n).map(|_| rng.below(9) as usize).collect()
}

fn strides(rng: &mut Rng, n: usize) -> Vec<usize> {
    (0..n)
        .map(|i| {
            if i + 1 == n && rng.below(4) > 0 {
                1
            } else {
                rng.below(300) as usize
            }
        })
        .collect()
}

/// Random shapes, strides, lengths and variants: the call returns Ok or Err, never panics.
#[test]
fn random_malformed_calls_never_panic() {
    let mut rng = Rng::new(0xbad);
    let data = vec![0.5f32; 4096];
    for _ in 0..3000 {
        let rank = [2usize, 3, 3, 3, 4, 5][rng.below(6) as usize];
        let (sq, sk, sv) = (
            dims(&mut rng, rank),
            dims(&mut rng, rank),
            dims(&mut rng, rank),
        );
        let (tq, tk, tv) = (
            strides(&mut rng, rank),
            strides(&mut rng, rank),
            strides(&mut rng, rank),
        );
        let len = rng.below(4096) as usize;
        let q = TensorView::strided(&data[..len], &sq, &tq);
        let k = TensorView::strided(&data[..rng.below(4096) as usize], &sk, &tk);
        let v = TensorView::strided(&data[..rng.below(4096) as usize], &sv, &tv);
        let (nq, nk) = (rng.below(4) as usize, rng.below(4) as usize);
        let cq: Vec<u64> = (0..nq).map(|_| rng.below(12)).collect();
        let ck: Vec<u64> = (0..nk).map(|_| rng.below(12)).collect();
        let mut args = AttentionArgs::new(q, k, v);
        if rng.below(2) == 0 {
            args = args.ragged(&cq, &ck);
        }
        if rng.below(3) == 0 {
            args =
                args.variant(Variant::full().mask(document((0..rng.below(10) as i64).collect())));
        }
        let out_len = rng.below(2000) as usize;
        let lse_len = rng.below(200) as usize;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run(&args, out_len, lse_len)
        }));
        assert!(r.is_ok(), "panicked on {args:?}");
    }
}
