//! Single Writer Multiple Reader and flushing.
//!
//! With SWMRMode = On the file is created with the HDF5 1.10 format (`libver v110`), every
//! group, dataset and HDF5 attribute is created first, then `H5Fstart_swmr_write` makes the
//! file readable while it grows (SWMRActive_RBV = Active). From then on data is published to
//! readers by flushes: every NumFramesFlush frames (at least every NumFramesChunks, so a
//! partly filled chunk is never flushed; 0 = every chunk), on FlushNow, and at close. A flush
//! writes the buffered attribute values, then `H5Dflush`es the detector data, the attribute
//! datasets and NDArrayUniqueId last (readers size their view by it), and counts one
//! SWMRCbCounter_RBV.
//!
//! Without SWMR, NumFramesFlush > 0 flushes the whole file (`H5Fflush`) as often, so a crash
//! loses at most that many frames (areaDetector ignores NumFramesFlush outside SWMR). Readers
//! of a SWMR file need a file system that keeps the write order (local disks, GPFS, Lustre;
//! not NFS), as areaDetector documents.

/// When to flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlushPolicy {
    /// Flush every this many frames; 0 = only on FlushNow and at close.
    pub every: u64,
    pub swmr: bool,
}

impl FlushPolicy {
    /// NDFileHDF5's rule: in SWMR mode NumFramesFlush is raised to NumFramesChunks.
    pub fn new(num_frames_flush: i64, frames_per_chunk: usize, swmr: bool) -> (FlushPolicy, i64) {
        let mut every = num_frames_flush.max(0);
        if swmr && every < frames_per_chunk as i64 {
            every = frames_per_chunk as i64;
        }
        (
            FlushPolicy {
                every: every as u64,
                swmr,
            },
            every,
        )
    }

    /// Whether to flush after the `written`-th frame.
    pub fn due(&self, written: u64) -> bool {
        self.every > 0 && written > 0 && written.is_multiple_of(self.every)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swmr_flushes_at_least_every_chunk() {
        let (p, published) = FlushPolicy::new(0, 1, true);
        assert_eq!((p.every, published), (1, 1));
        let (p, _) = FlushPolicy::new(2, 4, true);
        assert_eq!(p.every, 4);
        assert!(p.due(8) && !p.due(6) && !p.due(0));
        let (p, published) = FlushPolicy::new(0, 4, false);
        assert_eq!((p.every, published), (0, 0));
        assert!(!p.due(4));
        let (p, _) = FlushPolicy::new(3, 1, false);
        assert!(p.due(3));
    }
}
