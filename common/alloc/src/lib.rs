//! The allocator policy of Argos's processes (glibc's malloc; elsewhere each call is a
//! no-op). Two calls, the only unsafe code outside execd: allocator parameters and
//! `malloc_trim`, neither of which touches memory of the caller.
//!
//! glibc keeps freed memory for reuse, and trims it only at the top of the main heap:
//! each thread's arena keeps what a load freed in its middle, and execd's heaps keep
//! [`keep_large_buffers`]'s headroom. So every daemon returns its free pages at intervals
//! ([`return_free_memory`], from the daemon runner): what a load took comes back once the
//! load is over.
#![allow(unsafe_code)]

/// Keeps large buffers (output chunks of up to a few MiB) in malloc's heap instead of a
/// fresh mmap per allocation, and stops malloc returning freed memory to the kernel at
/// every free: a stream of 1 MiB chunks then reuses the same pages instead of faulting in
/// new ones. Free memory at the top of a heap beyond 2 MiB is returned at the free that
/// leaves it (only this shrinks the heaps of threads' arenas; `malloc_trim` does not).
/// Called once at the start of a process, before it starts threads.
pub fn keep_large_buffers() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator parameters, with documented values; it is
    // called before the process's threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 * 1024 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 2 * 1024 * 1024);
    }
}

/// Gives the kernel back the pages malloc holds free in every arena (`malloc_trim`).
/// Cheap when there is little to return; safe to call from any thread at any time.
pub fn return_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes malloc's own locks and only releases pages that hold no
    // allocation; no memory of the caller is passed.
    unsafe {
        libc::malloc_trim(0);
    }
}
