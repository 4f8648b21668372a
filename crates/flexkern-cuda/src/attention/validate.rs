//! Everything checked before any launch or allocation of size: shapes, types, strides against
//! the buffers, page tables against the pool.

use super::*;

fn check_fits(arg: &'static str, need_elems: usize, dtype: DType, buf: &DeviceBuf) -> Result<()> {
    let need = need_elems
        .checked_mul(dtype.size())
        .ok_or_else(|| invalid(arg, "size overflows"))?;
    if need > buf.bytes() {
        return Err(invalid(
            arg,
            format!("needs {need} bytes, the buffer holds {}", buf.bytes()),
        ));
    }
    Ok(())
}

/// A page's bytes (`page_size` tokens of every kv head's K or V row) must fit in 32 bits: the
/// decode kernels address a row from its page's first byte in 32 bits.
fn check_page_bytes(page_size: usize, hkv: usize, k_row: usize, v_row: usize) -> Result<()> {
    let bytes = (page_size as u64)
        .saturating_mul(hkv as u64)
        .saturating_mul(k_row.max(v_row) as u64);
    if bytes > u32::MAX as u64 {
        return Err(invalid(
            "page_size",
            format!(
                "a page of {page_size} tokens x {hkv} kv heads holds {bytes} bytes, over 4 GiB"
            ),
        ));
    }
    Ok(())
}

/// End (exclusive, elements) of the last row any sequence reads through strided addressing.
fn strided_end(
    lens: &SeqLens,
    base: &[usize],
    tokens: impl Fn(usize) -> usize,
    tok: usize,
    head: usize,
    heads: usize,
    dim: usize,
) -> Result<usize> {
    let mut end = 0usize;
    for (s, &b) in base.iter().enumerate().take(lens.num_seqs()) {
        let n = tokens(s);
        if n == 0 {
            continue;
        }
        let e = b
            .checked_add((n - 1).saturating_mul(tok))
            .and_then(|x| x.checked_add((heads - 1).saturating_mul(head)))
            .and_then(|x| x.checked_add(dim))
            .ok_or_else(|| invalid("q", "offsets overflow"))?;
        end = end.max(e);
    }
    Ok(end)
}

/// Everything checked before any launch or allocation of size.
pub(super) fn validate(c: &AttnCall) -> Result<()> {
    let (hq, hkv, dk, dv) = (c.num_q_heads, c.num_kv_heads, c.head_dim, c.head_dim_v);
    if hq == 0 || hkv == 0 || hq % hkv != 0 {
        return Err(invalid(
            "k",
            format!("{hq} query heads are not a positive multiple of {hkv} kv heads"),
        ));
    }
    for (arg, d) in [("k", dk), ("v", dv)] {
        if d == 0 || d > MAX_HEAD_DIM {
            return Err(invalid(
                arg,
                format!("head size {d} is outside 1..={MAX_HEAD_DIM}"),
            ));
        }
    }
    if !c.scale.is_finite() {
        return Err(invalid("scale", "must be finite"));
    }
    let n = c.lens.num_seqs();
    if c.q.seq_base.len() != n {
        return Err(invalid(
            "q",
            format!("{} sequence bases for {n} sequences", c.q.seq_base.len()),
        ));
    }
    for (arg, s) in [("k_scales", c.k_scales), ("v_scales", c.v_scales)] {
        if !s.is_empty() && s.len() != hkv {
            return Err(invalid(
                arg,
                format!("{} scales for {hkv} kv heads", s.len()),
            ));
        }
    }
    if let Some(s) = &c.variant.sinks {
        if s.len() != hq {
            return Err(invalid(
                "sinks",
                format!("{} sink logits for {hq} query heads", s.len()),
            ));
        }
    }
    let q_end = strided_end(
        c.lens,
        c.q.seq_base,
        |s| c.lens.q_len(s),
        c.q.tok_stride,
        c.q.head_stride,
        hq,
        dk,
    )?;
    check_fits("q", q_end, c.q.dtype, c.q.buf)?;
    let total_q = c.lens.total_q();
    check_fits("out", total_q * hq * dv, DType::F32, c.out)?;
    if let Some(l) = c.lse {
        check_fits("lse", total_q * hq, DType::F32, l)?;
    }
    match &c.kv {
        KvInput::Strided { k, v } => {
            for (arg, o, d) in [("k", k, dk), ("v", v, dv)] {
                if o.seq_base.len() != n {
                    return Err(invalid(
                        arg,
                        format!("{} sequence bases for {n} sequences", o.seq_base.len()),
                    ));
                }
                let end = strided_end(
                    c.lens,
                    o.seq_base,
                    |s| c.lens.kv_len(s),
                    o.tok_stride,
                    o.head_stride,
                    hkv,
                    d,
                )?;
                check_fits(arg, end, o.dtype, o.buf)?;
            }
        }
        KvInput::Paged(p) => {
            let ps = p.page_size;
            if ps == 0 || ps > 256 {
                return Err(invalid("page_size", format!("{ps} is outside 1..=256")));
            }
            check_page_bytes(ps, hkv, dk * p.k_dtype.size(), dv * p.v_dtype.size())?;
            check_fits("k", p.num_pages * ps * hkv * dk, p.k_dtype, p.k)?;
            check_fits("v", p.num_pages * ps * hkv * dv, p.v_dtype, p.v)?;
            if let Some(t) = p.device_tables {
                // Entries are checked by the page-table manager that built them; the kernel
                // clamps every lookup into the tables and the pool.
                let any_kv = (0..n).any(|s| c.lens.kv_len(s) > 0);
                if any_kv && (t.page_indices_len == 0 || p.num_pages == 0) {
                    return Err(invalid("page_indices", "no pages for a non-empty sequence"));
                }
                return Ok(());
            }
            flexkern::kv_cache::tables::check_readable(
                p.cu_pages,
                p.first_page,
                p.page_indices,
                n,
                |s| c.lens.kv_len(s) as u64,
                p.num_pages,
                ps,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_page_bytes;

    #[test]
    fn pages_over_four_gib_are_rejected_by_name() {
        // The largest legal page: 256 tokens of 576-wide f32 rows over 7281 kv heads.
        assert!(check_page_bytes(256, 7281, 576 * 4, 576 * 4).is_ok());
        let e = check_page_bytes(256, 7282, 576 * 4, 64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("page_size") && e.contains("4 GiB"), "{e}");
        // V's rows count too.
        assert!(check_page_bytes(256, 7282, 64, 576 * 4).is_err());
        assert!(check_page_bytes(usize::MAX, usize::MAX, 1, 1).is_err());
    }
}
