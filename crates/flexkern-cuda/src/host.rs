//! Attention over host tensors on the GPU (`flexkern attn --device cuda`): uploads the views as
//! they are (strided), or pages K/V into a shuffled pool in the requested storage type.

use crate::attention::{self, AttnCall, KvInput, KvOperand, PagedKv, QInput};
use crate::error::{invalid, Result};
use crate::runtime::{Device, DeviceBuf};
use crate::verify::{encode, poison};
use flexkern::attention::kv::{Bound, KvSource, StridedKv};
use flexkern::attention::problem::{KvLayout, Layout};
use flexkern::kv_cache::quant::max_code;
use flexkern::verify::Rng;
use flexkern::{AttentionArgs, DType, HostData};
use std::sync::Arc;

fn upload(dev: &Arc<Device>, d: &HostData) -> Result<DeviceBuf> {
    match d {
        HostData::F32(s) => dev.upload(s),
        HostData::F16(s) => dev.upload(s),
        HostData::BF16(s) => dev.upload(s),
    }
}

fn operand<'a>(buf: &'a DeviceBuf, o: &'a Layout) -> KvOperand<'a> {
    KvOperand {
        buf,
        dtype: o.dtype,
        seq_base: &o.seq_base,
        tok_stride: o.tok_stride,
        head_stride: o.head_stride,
    }
}

/// (O `[tokens, Hq, Dv]`, LSE `[tokens, Hq]`) of `args` computed on `dev`. `paged`: page size,
/// storage type (per-kv-head scales from each head's largest magnitude), page-order seed.
pub fn attention_host(
    dev: &Arc<Device>,
    args: &AttentionArgs,
    paged: Option<(usize, DType, u64)>,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let p = args.prepare()?;
    let KvLayout::Strided { k: kl, v: vl } = &p.kv else {
        return Err(invalid("k", "strided arguments give a strided layout"));
    };
    let kvs = StridedKv {
        k: Bound {
            layout: kl,
            data: args.k.data,
        },
        v: Bound {
            layout: vl,
            data: args.v.data,
        },
        lens: &p.lens,
    };
    let (hq, hkv, dk, dv) = (p.num_q_heads, p.num_kv_heads, p.head_dim, p.head_dim_v);
    let total = p.total_q();
    let (out, lse) = (
        dev.alloc((total * hq * dv).max(1) * 4)?,
        dev.alloc((total * hq).max(1) * 4)?,
    );
    let qb = upload(dev, &args.q.data)?;
    let q = QInput {
        buf: &qb,
        dtype: p.q.dtype,
        seq_base: &p.q.seq_base,
        tok_stride: p.q.tok_stride,
        head_stride: p.q.head_stride,
    };
    let n = p.lens.num_seqs();
    let run = |kv: KvInput, ks: &[f32], vs: &[f32]| -> Result<(Vec<f32>, Vec<f32>)> {
        let call = AttnCall {
            lens: &p.lens,
            num_q_heads: hq,
            num_kv_heads: hkv,
            head_dim: dk,
            head_dim_v: dv,
            scale: p.scale,
            variant: &p.variant,
            q: QInput { ..q },
            kv,
            k_scales: ks,
            v_scales: vs,
            out: &out,
            lse: Some(&lse),
            deterministic: false,
        };
        attention::attention(dev, &call)?;
        let mut o = vec![0f32; total * hq * dv];
        let mut l = vec![0f32; total * hq];
        dev.read(&out, 0, &mut o)?;
        dev.read(&lse, 0, &mut l)?;
        Ok((o, l))
    };
    let Some((ps, dtype, seed)) = paged else {
        let (kb, vb) = (upload(dev, &args.k.data)?, upload(dev, &args.v.data)?);
        let kv = KvInput::Strided {
            k: operand(&kb, kl),
            v: operand(&vb, vl),
        };
        return run(kv, &[], &[]);
    };
    if ps == 0 || ps > 256 {
        return Err(invalid("page_size", format!("{ps} is outside 1..=256")));
    }
    // Per-kv-head scales: the head's largest magnitude maps to the largest code.
    let mut row = vec![0f32; dk.max(dv)];
    let mut amax = vec![(0f32, 0f32); hkv];
    for s in 0..n {
        for pos in 0..kvs.kv_len(s) {
            for (h, a) in amax.iter_mut().enumerate() {
                kvs.k_row(s, h, pos).to_f32(&mut row[..dk]);
                a.0 = row[..dk].iter().fold(a.0, |m, x| m.max(x.abs()));
                kvs.v_row(s, h, pos).to_f32(&mut row[..dv]);
                a.1 = row[..dv].iter().fold(a.1, |m, x| m.max(x.abs()));
            }
        }
    }
    let scale = |a: f32| max_code(dtype).map_or(1.0, |m| if a > 0.0 { a / m } else { 1.0 });
    let ks: Vec<f32> = amax.iter().map(|a| scale(a.0)).collect();
    let vs: Vec<f32> = amax.iter().map(|a| scale(a.1)).collect();
    let pages: usize = (0..n).map(|s| kvs.kv_len(s).div_ceil(ps)).sum();
    let num_pages = pages + 1;
    let mut order: Vec<u32> = (0..num_pages as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let es = dtype.size();
    let mut kp = poison(dtype).repeat(num_pages * ps * hkv * dk);
    let mut vp = poison(dtype).repeat(num_pages * ps * hkv * dv);
    let (mut cu, mut list) = (vec![0u32], Vec::new());
    for s in 0..n {
        let kl = kvs.kv_len(s);
        let mine = order[list.len()..list.len() + kl.div_ceil(ps)].to_vec();
        for pos in 0..kl {
            let slot = mine[pos / ps] as usize * ps + pos % ps;
            for h in 0..hkv {
                for (is_v, d, pool, sc) in [(false, dk, &mut kp, ks[h]), (true, dv, &mut vp, vs[h])]
                {
                    let r = if is_v {
                        kvs.v_row(s, h, pos)
                    } else {
                        kvs.k_row(s, h, pos)
                    };
                    r.to_f32(&mut row[..d]);
                    for (e, &x) in row[..d].iter().enumerate() {
                        let at = ((slot * hkv + h) * d + e) * es;
                        pool[at..at + es].copy_from_slice(&encode(dtype, x, sc).0);
                    }
                }
            }
        }
        list.extend_from_slice(&mine);
        cu.push(list.len() as u32);
    }
    let (kb, vb) = (dev.upload(&kp)?, dev.upload(&vp)?);
    let first = vec![0u32; n];
    let kv = KvInput::Paged(PagedKv {
        k: &kb,
        v: &vb,
        k_dtype: dtype,
        v_dtype: dtype,
        page_size: ps,
        num_pages,
        cu_pages: &cu,
        first_page: &first,
        page_indices: &list,
        device_tables: None,
    });
    run(kv, &ks, &vs)
}
