//! glibc's malloc and libhdf5's chunk buffers.
//!
//! libhdf5 mallocs a buffer for every chunk it runs through its filter pipeline (4 MiB for a
//! 1024x1024 UInt32 frame) and the filter mallocs its output as large; both are freed after
//! the write. glibc hands out blocks above its mmap threshold (128 KiB at start, raised on
//! the fly as large blocks are freed) as fresh mmaps, and gives free memory at the top of a
//! heap back to the kernel once it passes the trim threshold. Either way the next chunk's
//! buffer is new pages that the kernel must fault in and zero, about 1 ms per 4 MiB chunk:
//! in `ndflow bench hdf5` (2026-11-26) the Blosc filter row ran at ~1,850 frames/s in some
//! files and 540–1,100 in others, depending on where the thresholds had drifted. Fixing both
//! thresholds (which also stops glibc moving them) keeps chunk-sized blocks in the heap for
//! the next chunk. The cost is memory that stays mapped after large frees: at most 128 MiB
//! per malloc arena above what is in use.

use std::sync::Once;

/// Blocks up to this size come from the heap (glibc's largest allowed value on 64-bit).
const MMAP_THRESHOLD: i32 = 32 << 20;
/// Free memory at a heap's top is returned to the kernel only beyond this.
const TRIM_THRESHOLD: i32 = 128 << 20;

/// Sets the thresholds once per process, before the first HDF5 file is written. A failure
/// leaves glibc's defaults (correct output, slower filter pipeline) and says so on stderr.
pub(crate) fn keep_chunk_buffers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: mallopt only changes two allocator parameters under malloc's own lock;
            // it touches no memory of ours and may be called from any thread at any time.
            let ok = unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                    && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
            };
            if !ok {
                eprintln!(
                    "ndflow: mallopt refused the HDF5 chunk-buffer thresholds; filtered writes may be slower"
                );
            }
        }
    });
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Minor page faults of this thread so far.
    fn thread_faults() -> i64 {
        // SAFETY: rusage is a C struct of integers and timevals (integers too), for which
        // all-zero bytes are a valid value.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage struct through a valid, exclusive pointer to
        // our own `u`; RUSAGE_THREAD is a valid `who` on Linux.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
        assert_eq!(rc, 0);
        u.ru_minflt
    }

    #[test]
    fn chunk_sized_blocks_are_reused_not_faulted_in_again() {
        keep_chunk_buffers();
        const CHUNK: usize = 4 << 20;
        // Three chunk-sized blocks live at once (HDF5's chunk, the filter's output, the
        // next frame's chunk), freed and taken again: with the thresholds fixed they come
        // back from the heap. (This short history does not reproduce the drift itself,
        // which depends on the whole process's allocations; `ndflow bench hdf5` showed it.)
        let cycle = || {
            // SAFETY: plain malloc/free pairs of our own; every byte written is inside a
            // block, which is checked for null first.
            unsafe {
                let blocks = [0u8, 1, 2].map(|fill| {
                    let p = libc::malloc(CHUNK).cast::<u8>();
                    assert!(!p.is_null());
                    std::ptr::write_bytes(p, fill, CHUNK);
                    p
                });
                for p in blocks.into_iter().rev() {
                    libc::free(p.cast());
                }
            }
        };
        cycle();
        let before = thread_faults();
        for _ in 0..20 {
            cycle();
        }
        let faults = thread_faults() - before;
        // Fresh pages would be 3 x 1,024 faults per cycle (61,440 in all).
        assert!(
            faults < 1_000,
            "{faults} page faults in 20 cycles of 3 x 4 MiB"
        );
    }
}
