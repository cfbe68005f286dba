//! Cache hints for application code, which can then stay free of `unsafe`.

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
