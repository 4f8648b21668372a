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

/// `n` zeros whose pages are advised huge and not yet touched: the allocation is zeroed by the
/// allocator (fresh mapped pages), never written element by element (`vec![x; n]` writes every
/// element unless `x`'s type is a primitive zero, e.g. for f16 and bf16, and the pages it
/// touches before the advice stay 4 KiB).
pub fn huge_zeroed<T: bytemuck::Zeroable>(n: usize) -> Vec<T> {
    let v = bytemuck::zeroed_vec(n);
    advise_huge_pages(&v);
    v
}

/// As `huge_zeroed`, but a size that overflows or an allocation the system refuses is an
/// error carrying the bytes asked for, never an abort.
pub fn try_huge_zeroed<T: bytemuck::Zeroable>(n: usize) -> Result<Vec<T>, u128> {
    let bytes = n as u128 * std::mem::size_of::<T>() as u128;
    if std::mem::size_of::<T>() == 0 || n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| bytes)?;
    // SAFETY: a non-zero layout; the zeroed bytes are valid `T`s (Zeroable), and the Vec takes
    // ownership of exactly this allocation with capacity `n`.
    let v = unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut T;
        if ptr.is_null() {
            return Err(bytes);
        }
        Vec::from_raw_parts(ptr, n, n)
    };
    advise_huge_pages(&v);
    Ok(v)
}

/// A vector of `n` values `f(i)` whose pages were advised huge before the first write.
pub fn huge_vec<T: bytemuck::Zeroable>(n: usize, mut f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v = huge_zeroed(n);
    for (i, x) in v.iter_mut().enumerate() {
        *x = f(i);
    }
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn impossible_sizes_are_errors_not_aborts() {
        assert_eq!(
            super::try_huge_zeroed::<u64>(usize::MAX / 4),
            Err((usize::MAX / 4) as u128 * 8)
        );
        assert!(super::try_huge_zeroed::<f32>(1 << 60).is_err());
        assert_eq!(super::try_huge_zeroed::<u32>(3).unwrap(), vec![0, 0, 0]);
    }

    #[test]
    fn huge_vec_holds_its_values() {
        let v = super::huge_vec(5 << 20, |i| i as u32);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        super::advise_huge_pages::<u8>(&[]);
    }

    /// Halves were filled element by element before the advice, so they never got huge pages.
    #[cfg(target_os = "linux")]
    #[test]
    fn half_vectors_get_huge_pages() {
        let huge_kb = || -> Option<u64> {
            let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
            let l = s.lines().find(|l| l.starts_with("AnonHugePages:"))?;
            l.split_whitespace().nth(1)?.parse().ok()
        };
        let on = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| !s.contains("[never]"));
        let Some(before) = huge_kb().filter(|_| on) else {
            eprintln!("SKIPPED: no transparent huge pages here");
            return;
        };
        // 128 MiB of each: the u32 control (zeroed by the allocator either way) tells whether
        // the kernel has free 2 MiB blocks at all.
        let control = super::huge_vec(32 << 20, |i| i as u32);
        let mid = huge_kb().unwrap();
        if mid < before + (64 << 10) {
            eprintln!("SKIPPED: the kernel gave no huge pages ({before} -> {mid} kB)");
            return;
        }
        let v = super::huge_vec(64 << 20, |i| half::f16::from_f32(i as f32));
        let after = huge_kb().unwrap();
        eprintln!("AnonHugePages {before} -> {mid} -> {after} kB");
        assert!(after >= mid + (64 << 10), "{before} -> {mid} -> {after} kB");
        assert_eq!(control[7], 7);
        assert_eq!(v[1000].to_f32(), 1000.0);
    }
}
