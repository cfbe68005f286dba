//! Cache and memory hints for application code, which can then stay free
//! of `unsafe`.

/// Asks the CPU to start loading the cache line that holds `*r` (for
/// reading), so that a use soon after finds it in cache: applications call
/// it for the requests of a burst before handling them, to overlap their
/// cache misses. A hint only; it does nothing off x86_64.
#[inline(always)]
pub fn prefetch_read<T: ?Sized>(r: &T) {
    prefetch_addr((r as *const T).cast::<u8>());
}

/// [`prefetch_read`] of the line `offset` bytes past `*r`; the address may
/// lie outside `*r` (a prefetch of any address is harmless).
#[inline(always)]
pub fn prefetch_read_at<T: ?Sized>(r: &T, offset: usize) {
    prefetch_addr((r as *const T).cast::<u8>().wrapping_add(offset));
}

#[inline(always)]
fn prefetch_addr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no architectural effect,
    // whatever the address; SSE is part of the x86_64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(p.cast::<i8>(), _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `n` copies of `zero` in memory the kernel is asked to back with
/// transparent huge pages before the first touch: for large tables read at
/// random (a key-value store's index and log), where with 4 KiB pages
/// nearly every access also misses the TLB. A hint only: where the kernel
/// gives no huge pages (transparent huge pages off, no free 2 MiB ranges,
/// not Linux), ordinary pages serve and nothing else changes.
pub fn zeroed_on_huge_pages<T: Copy>(n: usize, zero: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise_huge_pages(
        v.as_mut_ptr().cast(),
        n.saturating_mul(std::mem::size_of::<T>()),
    );
    v.resize(n, zero);
    v
}

/// Marks the whole pages of `len` bytes at `ptr` (an untouched allocation
/// of this process) for transparent huge pages; the answer is ignored, as
/// the hint changes speed, never contents.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    let start = (ptr as usize).next_multiple_of(PAGE);
    let end = (ptr as usize).saturating_add(len) / PAGE * PAGE;
    if end > start {
        // SAFETY: madvise(MADV_HUGEPAGE) only flags the pages of
        // `start..end`, which lie inside the allocation `ptr..ptr + len`
        // this process owns; it neither reads nor changes memory, and fails
        // harmlessly (EINVAL) where transparent huge pages are unsupported.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _len: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn huge_page_vectors_are_zeroed_and_sized() {
        let v = super::zeroed_on_huge_pages(3 << 20, 0u8);
        assert_eq!(v.len(), 3 << 20);
        assert!(v.iter().all(|&b| b == 0));
        let w = super::zeroed_on_huge_pages(5, [0u64; 16]);
        assert_eq!(w, vec![[0u64; 16]; 5]);
        assert!(super::zeroed_on_huge_pages::<u32>(0, 0).is_empty());
    }
}
