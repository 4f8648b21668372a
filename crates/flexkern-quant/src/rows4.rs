//! The driver of the file-layout 4-row kernels (legacy and table formats): a kernel dots four
//! weight rows with one to four activation rows, decoding each weight block once for all of
//! them; this runs it over a row range and every activation row.

use crate::format::QuantBlock;

/// A 4-row kernel: four rows back to back, the group to prefetch, `R` activation rows.
#[cfg(target_arch = "x86_64")]
pub(crate) type Rows4<B, const R: usize> =
    unsafe fn(&[B], *const B, [&[<B as QuantBlock>::Dot]; R]) -> [[f32; 4]; R];

/// A format's 4-row kernel for one to four activation rows.
#[cfg(target_arch = "x86_64")]
pub(crate) struct Kernels4<B: QuantBlock> {
    pub k1: Rows4<B, 1>,
    pub k2: Rows4<B, 2>,
    pub k3: Rows4<B, 3>,
    pub k4: Rows4<B, 4>,
}

/// `vec_dot_rows` and `vec_dot_rows_batch` through a format's 4-row AVX2 kernel (a function
/// generic over the activation rows `R`) when the CPU has it, else row by row.
macro_rules! rows_via_kernel {
    ($($k4:ident)::+) => {
        fn vec_dot_rows(w: &[Self], a: &[Self::Dot], out: &mut [f32]) {
            Self::vec_dot_rows_batch(w, &[a], out)
        }

        fn vec_dot_rows_batch(w: &[Self], a: &[&[Self::Dot]], out: &mut [f32]) {
            #[cfg(target_arch = "x86_64")]
            if $crate::cpu::has_avx2() {
                let k = $crate::rows4::Kernels4 {
                    k1: $($k4)::+::<1>,
                    k2: $($k4)::+::<2>,
                    k3: $($k4)::+::<3>,
                    k4: $($k4)::+::<4>,
                };
                // SAFETY: features checked at run time.
                return unsafe { $crate::rows4::rows_by4(w, a, out, &k) };
            }
            $crate::rows4::rows_each(w, a, out)
        }
    };
}

pub(crate) use rows_via_kernel;

/// One `vec_dot` per weight row and activation row: `out[i * a.len() + j]`.
pub(crate) fn rows_each<B: QuantBlock>(w: &[B], a: &[&[B::Dot]], out: &mut [f32]) {
    let m = a.len().max(1);
    let nb = w.len() / (out.len() / m).max(1);
    for (i, o) in out.chunks_mut(m).enumerate() {
        for (o, a) in o.iter_mut().zip(a) {
            *o = B::vec_dot(&w[i * nb..(i + 1) * nb], a);
        }
    }
}

/// Runs the 4-row kernels over groups of 4 rows (each group against the activation rows four
/// at a time, the rest in one smaller call) and the 1-row `vec_dot` over the rows left;
/// `out[i * a.len() + j]` is row `i` against `a[j]`.
///
/// # Safety
/// The CPU must have the features the kernels are compiled for.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn rows_by4<B: QuantBlock>(
    w: &[B],
    a: &[&[B::Dot]],
    out: &mut [f32],
    k: &Kernels4<B>,
) {
    let m = a.len();
    if out.is_empty() || m == 0 {
        return;
    }
    let rows = out.len() / m;
    let nb = w.len() / rows;
    assert!(a.iter().all(|a| a.len() == nb) && w.len() == rows * nb);
    let full = rows / 4;
    for g in 0..full {
        let group = &w[4 * g * nb..4 * (g + 1) * nb];
        let next = crate::simd::prefetch_target(w, g, full, 4 * nb);
        let mut put = |j0: usize, v: &[[f32; 4]]| {
            for (j, v) in v.iter().enumerate() {
                for (r, &x) in v.iter().enumerate() {
                    out[(4 * g + r) * m + j0 + j] = x;
                }
            }
        };
        let mut j0 = 0;
        while j0 < m {
            let r = (m - j0).min(4);
            let a = &a[j0..j0 + r];
            match r {
                1 => put(j0, &(k.k1)(group, next, [a[0]])),
                2 => put(j0, &(k.k2)(group, next, [a[0], a[1]])),
                3 => put(j0, &(k.k3)(group, next, [a[0], a[1], a[2]])),
                _ => put(j0, &(k.k4)(group, next, [a[0], a[1], a[2], a[3]])),
            }
            j0 += r;
        }
    }
    rows_each(&w[4 * full * nb..], a, &mut out[4 * full * m..]);
}
