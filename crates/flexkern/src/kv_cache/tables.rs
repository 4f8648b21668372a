//! Page tables as plain index arrays (FlashInfer's CSR form), ready to upload in one copy:
//! sequence `s` owns `page_indices[cu_pages[s]..cu_pages[s + 1]]`, the first of which is its
//! logical page `first_page[s]`, and holds `kv_lens[s]` tokens.

use crate::error::{invalid, mismatch, Result};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PageTables {
    pub cu_pages: Vec<u32>,
    pub first_page: Vec<u32>,
    pub page_indices: Vec<u32>,
    pub kv_lens: Vec<u64>,
}

/// Where each array sits in `PageTables::packed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedOffsets {
    pub cu_pages: usize,
    pub first_page: usize,
    pub page_indices: usize,
    pub len: usize,
}

impl PageTables {
    /// From SGLang-style arrays: flat `page_indices`, `cu_pages` (n+1 offsets) and `kv_lens`,
    /// no eviction. Checked against a pool of `num_pages` pages of `page_size` tokens.
    pub fn from_raw(
        page_indices: &[u32],
        cu_pages: &[u64],
        kv_lens: &[u64],
        num_pages: usize,
        page_size: usize,
    ) -> Result<PageTables> {
        if cu_pages.len() != kv_lens.len() + 1 {
            return Err(mismatch(
                "cu_pages",
                "kv_lens",
                format!("{} offsets for {} sequences", cu_pages.len(), kv_lens.len()),
            ));
        }
        if cu_pages.iter().any(|&c| c > u32::MAX as u64) {
            return Err(invalid("cu_pages", "offsets are 32-bit"));
        }
        let t = PageTables {
            cu_pages: cu_pages.iter().map(|&c| c as u32).collect(),
            first_page: vec![0; kv_lens.len()],
            page_indices: page_indices.to_vec(),
            kv_lens: kv_lens.to_vec(),
        };
        t.validate(num_pages, page_size)?;
        Ok(t)
    }

    pub fn num_seqs(&self) -> usize {
        self.kv_lens.len()
    }

    /// First logical position still stored in sequence `s`.
    pub fn first_retained(&self, s: usize, page_size: usize) -> usize {
        self.first_page[s] as usize * page_size
    }

    /// Checks every index against the pool, that offsets are monotonic and cover the indices,
    /// that no table lists a page twice (two positions would alias), and that the listed pages
    /// hold each sequence's length.
    pub fn validate(&self, num_pages: usize, page_size: usize) -> Result<()> {
        let n = self.kv_lens.len();
        // Whole tables: the offsets end exactly at the last index (checked first, as the
        // length checks below would blame the sequence the missing indices belong to).
        if self.cu_pages.len() == n + 1 && self.cu_pages[n] as usize != self.page_indices.len() {
            return Err(mismatch(
                "cu_pages",
                "page_indices",
                format!(
                    "ends at {} but {} indices",
                    self.cu_pages[n],
                    self.page_indices.len()
                ),
            ));
        }
        check_readable(
            &self.cu_pages,
            &self.first_page,
            &self.page_indices,
            n,
            |s| self.kv_lens[s],
            num_pages,
            page_size,
        )?;
        let mut seen = vec![usize::MAX; num_pages];
        for s in 0..n {
            let table =
                &self.page_indices[self.cu_pages[s] as usize..self.cu_pages[s + 1] as usize];
            for &p in table {
                if seen[p as usize] == s {
                    return Err(invalid(
                        "page_indices",
                        format!("sequence {s} lists page {p} twice"),
                    ));
                }
                seen[p as usize] = s;
            }
        }
        Ok(())
    }

    /// Where the arrays go in `packed`.
    pub fn offsets(&self) -> PackedOffsets {
        let n = self.kv_lens.len();
        PackedOffsets {
            cu_pages: 0,
            first_page: n + 1,
            page_indices: 2 * n + 1,
            len: 2 * n + 1 + self.page_indices.len(),
        }
    }

    /// `cu_pages ++ first_page ++ page_indices`: one upload.
    pub fn packed(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.offsets().len);
        out.extend_from_slice(&self.cu_pages);
        out.extend_from_slice(&self.first_page);
        out.extend_from_slice(&self.page_indices);
        out
    }
}

/// What reading a paged cache needs, shared by every backend's binding: one offset per
/// sequence plus one, offsets from 0 that never decrease and stay inside `page_indices`, every
/// index inside the pool of `num_pages`, and each sequence's pages (from its logical page
/// `first_page[s]` on) holding its `kv_len(s)` tokens. Bad tables then give an error, never an
/// out-of-bounds read. (Pages listed by several sequences are legal: prefix sharing.)
pub fn check_readable(
    cu_pages: &[u32],
    first_page: &[u32],
    page_indices: &[u32],
    num_seqs: usize,
    kv_len: impl Fn(usize) -> u64,
    num_pages: usize,
    page_size: usize,
) -> Result<()> {
    let n = num_seqs;
    if cu_pages.len() != n + 1 || first_page.len() != n {
        return Err(mismatch(
            "cu_pages",
            "kv_lens",
            format!(
                "{} offsets and {} first pages for {n} sequences",
                cu_pages.len(),
                first_page.len()
            ),
        ));
    }
    if cu_pages[0] != 0
        || cu_pages.windows(2).any(|w| w[1] < w[0])
        || cu_pages[n] as usize > page_indices.len()
    {
        return Err(invalid(
            "cu_pages",
            "must start at 0, never decrease and stay inside page_indices",
        ));
    }
    if let Some(i) = page_indices.iter().position(|&p| p as usize >= num_pages) {
        return Err(invalid(
            "page_indices",
            format!("entry {i} is page {} of {num_pages}", page_indices[i]),
        ));
    }
    for s in 0..n {
        let held = first_page[s] as u64 + (cu_pages[s + 1] - cu_pages[s]) as u64;
        let cap = held.saturating_mul(page_size as u64);
        if kv_len(s) > cap {
            return Err(mismatch(
                "kv_lens",
                "page_indices",
                format!(
                    "sequence {s} has {} tokens but {held} pages hold {cap}",
                    kv_len(s)
                ),
            ));
        }
    }
    Ok(())
}

/// Per-sequence KV lengths from FlashInfer-style last-page lengths: a sequence with `n > 0`
/// pages holds `(n - 1) * page_size + last` tokens, `1 <= last <= page_size`; with none, 0.
pub fn kv_lens_from_last_page(
    cu_pages: &[u64],
    last_page_lens: &[u64],
    page_size: usize,
) -> Result<Vec<u64>> {
    if cu_pages.len() != last_page_lens.len() + 1 {
        return Err(mismatch(
            "cu_pages",
            "last_page_lens",
            format!(
                "{} offsets for {} sequences",
                cu_pages.len(),
                last_page_lens.len()
            ),
        ));
    }
    let ps = page_size as u64;
    let mut out = Vec::with_capacity(last_page_lens.len());
    for (s, (w, &last)) in cu_pages.windows(2).zip(last_page_lens).enumerate() {
        let n = w[1]
            .checked_sub(w[0])
            .ok_or_else(|| invalid("cu_pages", "decreases"))?;
        let ok = if n == 0 {
            last == 0
        } else {
            (1..=ps).contains(&last)
        };
        if !ok {
            return Err(invalid(
                "last_page_lens",
                format!("sequence {s}: last page holds {last} tokens, page size {ps}, {n} pages"),
            ));
        }
        out.push(n.saturating_sub(1) * ps + last);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_tables_are_checked_and_packed() {
        let t = PageTables::from_raw(&[3, 1, 0], &[0, 2, 3], &[20, 5], 4, 16).unwrap();
        assert_eq!(t.packed(), vec![0, 2, 3, 0, 0, 3, 1, 0]);
        let o = t.offsets();
        assert_eq!((o.first_page, o.page_indices, o.len), (3, 5, 8));
        for (idx, cu, lens, arg) in [
            (
                &[3u32, 9, 0][..],
                &[0u64, 2, 3][..],
                &[20u64, 5][..],
                "page_indices",
            ),
            (&[3, 3, 0], &[0, 2, 3], &[20, 5], "page_indices"),
            (&[3, 1, 0], &[0, 2, 3], &[33, 5], "kv_lens"),
            (&[3, 1, 0], &[0, 2, 2], &[20, 5], "cu_pages"),
            (&[3, 1, 0], &[0, 2], &[20, 5], "cu_pages"),
        ] {
            let e = PageTables::from_raw(idx, cu, lens, 4, 16).unwrap_err();
            assert!(e.to_string().contains(arg), "{arg}: {e}");
        }
    }

    #[test]
    fn last_page_lengths() {
        assert_eq!(
            kv_lens_from_last_page(&[0, 2, 2, 5], &[3, 0, 16], 16).unwrap(),
            vec![19, 0, 48]
        );
        assert!(kv_lens_from_last_page(&[0, 1], &[0], 16).is_err());
        assert!(kv_lens_from_last_page(&[0, 1], &[17], 16).is_err());
    }
}
