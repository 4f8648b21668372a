use super::*;

const TOL: Tolerance = Tolerance {
    tie: 1e-3,
    max_abs: 1.0,
    max_rel: 0.0,
};

/// 16 logits with clear gaps at the top: ids 3 > 7 > 1 > 12 > 5 > the rest.
fn base() -> Vec<f32> {
    let mut l: Vec<f32> = (0..16).map(|i| -(i as f32) * 0.01).collect();
    for (id, v) in [(3, 5.0), (7, 4.0), (1, 3.0), (12, 2.0), (5, 1.0)] {
        l[id] = v;
    }
    l
}

fn check(r: &[f32], d: &[f32]) -> PositionCheck {
    compare(0, r, d, &TOL).unwrap()
}

#[test]
fn top_ids_are_ordered_and_ties_go_to_the_lower_id() {
    assert_eq!(top_ids(&base(), 5), [3, 7, 1, 12, 5]);
    assert_eq!(top_ids(&[1.0, 2.0, 2.0, 0.0], 2), [1, 2]);
    assert_eq!(top_ids(&[1.0], 5), [0]);
}

#[test]
fn equal_logits_pass_with_zero_error() {
    let c = check(&base(), &base());
    assert_eq!(c.failure, None);
    assert_eq!((c.max_abs, c.rms, c.max_ref), (0.0, 0.0, 5.0));
    assert_eq!(c.ref_top, c.dev_top);
}

#[test]
fn small_noise_passes_and_is_measured() {
    let r = base();
    let d: Vec<f32> = r
        .iter()
        .enumerate()
        .map(|(i, x)| x + 1e-4 * (i % 3) as f32)
        .collect();
    let c = check(&r, &d);
    assert_eq!(c.failure, None);
    assert!((c.max_abs - 2e-4).abs() < 1e-6, "{}", c.max_abs);
    assert!(c.rms > 0.0 && c.rms < c.max_abs);
}

#[test]
fn a_swap_across_a_real_gap_fails() {
    let r = base();
    let mut d = r.clone();
    d[1] = 4.5; // id 1 (ref 3.0) now outranks id 7 (ref 4.0): a gap of 1.0 > tie
    let c = check(&r, &d);
    assert!(c.failure.as_deref().unwrap().contains("swapped"), "{c:?}");
}

#[test]
fn a_swap_inside_a_near_tie_passes() {
    let mut r = base();
    r[1] = 3.0;
    r[12] = 3.0 - 5e-4; // ids 1 and 12 within the tie tolerance
    let mut d = r.clone();
    d[12] = 3.0 + 1e-4;
    let c = check(&r, &d);
    assert_eq!(c.dev_top, [3, 7, 12, 1, 5]);
    assert_eq!(c.failure, None);
}

#[test]
fn an_outsider_entering_the_top_5_fails_unless_tied_with_the_5th() {
    let r = base();
    let mut d = r.clone();
    d[9] = 1.5; // ref -0.09, far below the 5th (1.0)
    let c = check(&r, &d);
    assert!(c.failure.as_deref().unwrap().contains("entered"), "{c:?}");
    // At the boundary: id 9 ties the 5th within `tie`, and overtakes it on the device.
    let mut r2 = base();
    r2[9] = 1.0 - 5e-4;
    let mut d2 = r2.clone();
    d2[9] = 1.0 + 1e-4;
    let c = check(&r2, &d2);
    assert_eq!(c.dev_top, [3, 7, 1, 12, 9]);
    assert_eq!(c.failure, None);
}

#[test]
fn a_top_id_dropping_out_fails() {
    let r = base();
    let mut d = r.clone();
    d[12] = -5.0;
    let c = check(&r, &d);
    assert!(c.failure.is_some(), "{c:?}");
}

#[test]
fn nan_and_inf_never_pass() {
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut d = base();
        d[0] = bad;
        let c = check(&base(), &d);
        assert!(c.failure.as_deref().unwrap().contains("non-finite"));
        assert_eq!(c.max_abs, f32::INFINITY);
        let c = check(&d, &base());
        assert!(c.failure.is_some());
    }
}

#[test]
fn the_max_abs_bound_fails_even_with_equal_ranks() {
    let r = base();
    let d: Vec<f32> = r.iter().map(|x| x + 2.0).collect();
    let c = check(&r, &d);
    assert_eq!(c.ref_top, c.dev_top);
    assert!(c.failure.as_deref().unwrap().contains("bound"), "{c:?}");
    // A relative bound scales with the largest reference logit (5.0 here).
    let rel = Tolerance {
        max_rel: 0.21,
        ..TOL
    };
    assert_eq!(compare(0, &r, &d, &rel).unwrap().failure, None);
    let rel = Tolerance {
        max_rel: 0.19,
        ..TOL
    };
    assert!(compare(0, &r, &d, &rel).unwrap().failure.is_some());
}

#[test]
fn mismatched_or_empty_logits_are_typed_errors() {
    let r = base();
    for d in [&r[..15], &[][..]] {
        let e = compare(0, &r, d, &TOL).unwrap_err();
        assert!(e.to_string().contains("`device`"), "{e}");
    }
    assert!(compare(0, &[], &[], &TOL).is_err());
}
