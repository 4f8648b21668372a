//! KV page writes on the CPU: each token's rows go to its slot, encoded to the store's dtype
//! with its per-head scale (fp8 and int8 quantize on write).

use crate::backend::host::{HostBuffer, HostStore};
use crate::backend::{Buffer, Pages, Slice};
use crate::dtype::DType;
use crate::error::{invalid, mismatch, Result};
use crate::kv_cache::quant::{check_storable, encode_fp8, encode_i8};
use half::{bf16, f16};

pub(crate) fn kv_write(
    pages: Pages<'_, HostBuffer>,
    slots: Slice<'_, HostBuffer>,
    k: &HostBuffer,
    v: &HostBuffer,
) -> Result<()> {
    let l = pages.layout;
    let all = slots.buf.u32("slots")?;
    let slots = &all[slots.start..slots.start + slots.len];
    let cap = l.num_pages * l.page_size;
    if let Some(i) = slots.iter().position(|&s| s as usize >= cap) {
        return Err(invalid(
            "slots",
            format!("entry {i} is slot {} of {cap}", slots[i]),
        ));
    }
    let n = slots.len();
    let (kr, vr) = (l.num_kv_heads * l.head_dim, l.num_kv_heads * l.head_dim_v);
    let (k, v) = (k.f32("k")?, v.f32("v")?);
    if k.len() < n * kr || v.len() < n * vr {
        return Err(mismatch(
            "k",
            "slots",
            format!("{n} slots need {} K and {} V elements", n * kr, n * vr),
        ));
    }
    let (heads, dk, dv) = (l.num_kv_heads, l.head_dim, l.head_dim_v);
    // Every check before the first write: a refused append leaves the store as it was.
    check_storable("k", l.k_dtype, &k[..n * kr], heads, dk)?;
    check_storable("v", l.v_dtype, &v[..n * vr], heads, dv)?;
    let (ks, vs) = (l.k_scales.clone(), l.v_scales.clone());
    for (t, &slot) in slots.iter().enumerate() {
        for h in 0..heads {
            let at = (slot as usize * heads + h) * dk;
            encode(pages.k, at, &k[(t * heads + h) * dk..][..dk], ks[h])?;
            let at = (slot as usize * heads + h) * dv;
            encode(pages.v, at, &v[(t * heads + h) * dv..][..dv], vs[h])?;
        }
    }
    Ok(())
}

/// Encodes `src` at element `at` of page storage.
fn encode(dst: &mut HostBuffer, at: usize, src: &[f32], scale: f32) -> Result<()> {
    let n = src.len();
    if at + n > dst.len() {
        return Err(invalid("pages", "write outside the store"));
    }
    let dtype = dst.dtype();
    match dst.store_mut() {
        HostStore::F32(s) => s[at..at + n].copy_from_slice(src),
        HostStore::F16(s) => s[at..at + n]
            .iter_mut()
            .zip(src)
            .for_each(|(d, &x)| *d = f16::from_f32(x)),
        HostStore::BF16(s) => s[at..at + n]
            .iter_mut()
            .zip(src)
            .for_each(|(d, &x)| *d = bf16::from_f32(x)),
        HostStore::U8(s) if dtype == DType::Fp8E4M3 => {
            encode_fp8(true, src, scale, &mut s[at..at + n])
        }
        HostStore::U8(s) if dtype == DType::Fp8E5M2 => {
            encode_fp8(false, src, scale, &mut s[at..at + n])
        }
        HostStore::I8(s) => encode_i8(src, scale, &mut s[at..at + n]),
        _ => {
            return Err(invalid(
                "pages",
                format!("{} is not a KV dtype", dtype.name()),
            ))
        }
    }
    Ok(())
}
