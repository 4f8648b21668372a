//! Issue 16, the NaN policy of the paged KV cache: quantized caches (int8, fp8) refuse a NaN or
//! an infinity in K or V with a typed error before anything is stored (int8 turned NaN into 0
//! and Inf into 127: finite output from non-finite input); float caches store them as they are.

use flexkern::kv_cache::{CacheConfig, PageBuf, Scales};
use flexkern::{CpuBackend, DType, Error, TensorView};

type KvCache = flexkern::kv_cache::KvCache<CpuBackend>;

const H: usize = 2;
const D: usize = 8;

fn cache(dtype: DType) -> KvCache {
    let mut c = CacheConfig::new(8, 4, H, D);
    (c.k_dtype, c.v_dtype) = (dtype, dtype);
    if flexkern::kv_cache::quant::is_quantized(dtype) {
        c.k_scales = Some(Scales::PerTensor(0.05));
        c.v_scales = Some(Scales::PerTensor(0.05));
    }
    KvCache::new(&CpuBackend, c).unwrap()
}

fn snapshot(c: &KvCache) -> String {
    let st = c.store();
    let s = |b: PageBuf| format!("{b:?}");
    format!(
        "{} {}",
        s(st.k.page_buf("k").unwrap()),
        s(st.v.page_buf("v").unwrap())
    )
}

#[test]
fn quantized_caches_refuse_non_finite_values_and_stay_intact() {
    let good: Vec<f32> = (0..3 * H * D).map(|i| (i as f32 * 0.37).sin()).collect();
    for dtype in [DType::I8, DType::Fp8E4M3, DType::Fp8E5M2] {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for (which, arg) in [(0, "k"), (1, "v")] {
                let mut c = cache(dtype);
                let id = c.add_seq();
                let t = TensorView::contiguous(good.as_slice(), &[3, H, D]);
                c.append(&CpuBackend, id, &t, &t).unwrap();
                let (before, pages, free) = (
                    snapshot(&c),
                    c.page_table(id).unwrap().to_vec(),
                    c.num_free_pages(),
                );
                let mut poisoned = good.clone();
                poisoned[H * D + 5] = bad;
                let (p, g) = (
                    TensorView::contiguous(poisoned.as_slice(), &[3, H, D]),
                    TensorView::contiguous(good.as_slice(), &[3, H, D]),
                );
                let (k, v) = if which == 0 { (&p, &g) } else { (&g, &p) };
                match c.append(&CpuBackend, id, k, v) {
                    Err(Error::InvalidArgument { arg: a, msg }) => {
                        assert_eq!(a, arg, "{dtype:?} {bad}: {msg}")
                    }
                    other => panic!("{dtype:?} {bad} in {arg}: expected an error, got {other:?}"),
                }
                assert_eq!(c.len(id).unwrap(), 3);
                assert_eq!(c.page_table(id).unwrap(), &pages[..]);
                assert_eq!(c.num_free_pages(), free);
                assert_eq!(snapshot(&c), before, "{dtype:?}: stored pages changed");
            }
        }
    }
}

#[test]
fn float_caches_keep_nan_and_inf() {
    let mut x: Vec<f32> = vec![0.5; H * D];
    x[3] = f32::NAN;
    x[4] = f32::INFINITY;
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let mut c = cache(dtype);
        let id = c.add_seq();
        let t = TensorView::contiguous(x.as_slice(), &[1, H, D]);
        c.append(&CpuBackend, id, &t, &t).unwrap();
        let page = c.page_table(id).unwrap()[0] as usize * 4 * H * D;
        let got: Vec<f32> = match c.store().k.page_buf("k").unwrap() {
            PageBuf::F32(s) => s[page..page + 5].to_vec(),
            PageBuf::F16(s) => s[page..page + 5].iter().map(|v| v.to_f32()).collect(),
            PageBuf::BF16(s) => s[page..page + 5].iter().map(|v| v.to_f32()).collect(),
            other => panic!("{other:?}"),
        };
        assert!(
            got[3].is_nan() && got[4] == f32::INFINITY,
            "{dtype:?}: {got:?}"
        );
    }
}
