//! Host memory for large streamed buffers (KV caches, repacked weights, benchmark inputs): transparent huge
//! pages where Linux offers them on request (`madvise` mode). Decode streams hundreds of MiB;
//! on 4 KiB pages every few tokens cost a TLB miss (a two-level walk under virtualization).
//!
//! Also the one memory guard for allocations sized by input (`try_*`): the byte count is
//! computed without overflow, checked against this machine's physical memory, and allocation
//! failure comes back as an [`AllocError`] ("needs N bytes") instead of an abort.

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

/// A vector of `n` values `f(i)` whose pages were advised huge before the first write.
pub fn huge_vec<T: bytemuck::Zeroable>(n: usize, mut f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v = huge_zeroed(n);
    for (i, x) in v.iter_mut().enumerate() {
        *x = f(i);
    }
    v
}

/// An allocation sized by input that cannot be made: too large for the machine, or refused by
/// the allocator. `bytes` is u128 so an overflowing product is reported, not wrapped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("argument `{arg}`: needs {bytes} bytes, {reason}")]
pub struct AllocError {
    pub arg: &'static str,
    pub bytes: u128,
    pub reason: String,
}

/// The most bytes one allocation may ask for: the machine's physical memory (a larger request
/// could only be met by overcommit and end in the OOM killer). `FLEXKERN_MAX_ALLOC_BYTES`
/// lowers it (tests, shared machines).
pub fn max_alloc_bytes() -> u128 {
    static CEIL: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    *CEIL.get_or_init(|| {
        let env = std::env::var("FLEXKERN_MAX_ALLOC_BYTES")
            .ok()
            .and_then(|s| s.trim().parse::<u128>().ok());
        let phys = physical_memory().unwrap_or(u128::from(u64::MAX));
        env.map_or(phys, |e| e.min(phys))
    })
}

fn physical_memory() -> Option<u128> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf only reads system configuration.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            return Some(pages as u128 * size as u128);
        }
    }
    None
}

/// Bytes of `n` elements of `T`, checked against [`max_alloc_bytes`] before anything is allocated.
pub fn check_alloc<T>(arg: &'static str, n: usize) -> Result<usize, AllocError> {
    let bytes = n as u128 * size_of::<T>() as u128;
    let ceil = max_alloc_bytes();
    if bytes > ceil {
        return Err(AllocError {
            arg,
            bytes,
            reason: format!("more than this machine's memory ({ceil} bytes)"),
        });
    }
    Ok(bytes as usize)
}

fn refused(arg: &'static str, n: usize, size: usize) -> AllocError {
    AllocError {
        arg,
        bytes: n as u128 * size as u128,
        reason: "the allocator refused it".into(),
    }
}

/// `n` zeros (fresh pages from the allocator, not written), or an [`AllocError`].
pub fn try_zeroed_vec<T: bytemuck::Zeroable>(
    arg: &'static str,
    n: usize,
) -> Result<Vec<T>, AllocError> {
    check_alloc::<T>(arg, n)?;
    bytemuck::allocation::try_zeroed_slice_box(n)
        .map(Vec::from)
        .map_err(|_| refused(arg, n, size_of::<T>()))
}

/// An empty vector with room for `n` elements, or an [`AllocError`].
pub fn try_with_capacity<T>(arg: &'static str, n: usize) -> Result<Vec<T>, AllocError> {
    check_alloc::<T>(arg, n)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| refused(arg, n, size_of::<T>()))?;
    Ok(v)
}

/// [`huge_zeroed`] through the guard.
pub fn try_huge_zeroed<T: bytemuck::Zeroable>(
    arg: &'static str,
    n: usize,
) -> Result<Vec<T>, AllocError> {
    let v = try_zeroed_vec(arg, n)?;
    advise_huge_pages(&v);
    Ok(v)
}

/// [`huge_vec`] through the guard.
pub fn try_huge_vec<T: bytemuck::Zeroable>(
    arg: &'static str,
    n: usize,
    mut f: impl FnMut(usize) -> T,
) -> Result<Vec<T>, AllocError> {
    let mut v = try_huge_zeroed(arg, n)?;
    for (i, x) in v.iter_mut().enumerate() {
        *x = f(i);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_guard_refuses_what_cannot_fit_without_allocating() {
        let e = super::try_zeroed_vec::<f32>("out", usize::MAX / 2).unwrap_err();
        assert_eq!(e.arg, "out");
        assert_eq!(e.bytes, (usize::MAX / 2) as u128 * 4);
        assert!(e.to_string().contains("needs"), "{e}");
        assert!(super::try_with_capacity::<[u8; 1024]>("layers", 1 << 31).is_err());
        assert!(super::try_huge_vec::<u64>("buf", 1 << 60, |i| i as u64).is_err());
        let v = super::try_huge_zeroed::<u16>("buf", 1000).unwrap();
        assert!(v.len() == 1000 && v.iter().all(|&x| x == 0));
        assert_eq!(
            super::try_with_capacity::<u8>("x", 10).unwrap().capacity(),
            10
        );
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
