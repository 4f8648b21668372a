//! Host memory for large streamed buffers (KV caches, repacked weights, benchmark inputs): transparent huge
//! pages where Linux offers them on request (`madvise` mode). Decode streams hundreds of MiB;
//! on 4 KiB pages every few tokens cost a TLB miss (a two-level walk under virtualization).

/// Asks the kernel to back the whole 2 MiB pages inside `buf` with huge pages. Only a hint,
/// and only for pages not yet touched: call it on fresh zeroed memory before writing it.
pub fn advise_huge_pages<T>(buf: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let ptr = buf.as_ptr() as usize;
        let start = ptr.next_multiple_of(HUGE);
        let end = (ptr + std::mem::size_of_val(buf)) / HUGE * HUGE;
        if end > start {
            // SAFETY: advice on memory `buf` owns; it changes no contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// A vector of `n` values `f(i)` whose pages were advised huge before the first write.
pub fn huge_vec<T: bytemuck::Zeroable + Clone>(n: usize, mut f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v = vec![T::zeroed(); n];
    advise_huge_pages(&v);
    for (i, x) in v.iter_mut().enumerate() {
        *x = f(i);
    }
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn huge_vec_holds_its_values() {
        let v = super::huge_vec(5 << 20, |i| i as u32);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        super::advise_huge_pages::<u8>(&[]);
    }
}
