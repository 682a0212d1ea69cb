//! Disk space reserved ahead of HDF5, so that running out of space (ENOSPC) or over the file
//! size limit (EFBIG) is found *before* a frame is handed to HDF5.
//!
//! When a write fails inside HDF5 the library has already moved its end-of-allocation past
//! the end of the file; the superblock written at close then names an end the file never
//! reaches and every reader refuses the file as "truncated". So before each frame the
//! writer makes sure the file already owns `frame bytes + margin` past HDF5's
//! end-of-allocation (`H5Fget_eoa`), with `fallocate` (real blocks, so the later writes
//! cannot hit ENOSPC). If that fails the frame is refused with the OS error, HDF5 never sees
//! it, and the file closes cleanly with every frame written so far; what was reserved past
//! HDF5's end is cut off after the close ([`Reserve::release`]). The margin covers the
//! metadata, attribute chunks and index blocks written at flush and close ([`margin`]).
//!
//! A reservation also covers the next frame, so the calls happen about every other frame;
//! reserving far ahead is not free (tmpfs zeroes every page it allocates). Where
//! `fallocate` is not supported (some network file systems, non-Linux), the file is extended
//! sparsely with `set_len` instead: that still catches the size limit, not a full disk.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use hdf5_metno as h5;
use hdf5_metno_sys::h5::{haddr_t, herr_t};
use hdf5_metno_sys::h5i::hid_t;

// Not bound by hdf5-metno-sys 0.12 (exists since HDF5 1.10.2).
extern "C" {
    fn H5Fget_eoa(file_id: hid_t, eoa: *mut haddr_t) -> herr_t;
}

/// Smallest growth of a reservation beyond what the frame needs.
pub const STEP: u64 = 1 << 20;

/// Room kept past the frame for what HDF5 writes at flush and close: `chunk_bytes` (the
/// attribute and performance chunks one flush may allocate) twice, plus 1 MiB for metadata
/// and chunk-index blocks.
pub fn margin(chunk_bytes: u64) -> u64 {
    (1 << 20) + 2 * chunk_bytes
}

/// HDF5's end-of-allocation of an open file, in bytes.
pub fn end_of_allocation(file: &h5::File) -> h5::Result<u64> {
    let mut eoa: haddr_t = 0;
    h5::sync::sync(|| {
        // SAFETY: `file.id()` is an open file id and `eoa` a valid out-pointer.
        h5::h5check(unsafe { H5Fget_eoa(file.id(), &mut eoa) })
    })?;
    Ok(eoa)
}

pub(crate) struct Reserve {
    /// A second descriptor of the file being written (same inode as HDF5's).
    file: File,
    /// `fallocate` not supported here: extend sparsely.
    sparse: bool,
    margin: u64,
}

impl Reserve {
    pub fn open(path: &Path, margin: u64) -> io::Result<Reserve> {
        Ok(Reserve {
            file: OpenOptions::new().write(true).open(path)?,
            sparse: !cfg!(target_os = "linux"),
            margin,
        })
    }

    /// Makes sure the file owns `need + margin` bytes past `eoa`; an error means the next
    /// `need` bytes cannot be written safely.
    pub fn ensure(&mut self, eoa: u64, need: u64) -> io::Result<()> {
        let size = self.file.metadata()?.len();
        let want = eoa.saturating_add(need).saturating_add(self.margin);
        if size >= want {
            return Ok(());
        }
        let generous = want.saturating_add(STEP.max(need));
        // Ask for room to spare first; when that fails, for exactly what this frame needs.
        self.grow(size, generous).or_else(|_| self.grow(size, want))
    }

    /// After HDF5 closed the file: gives back what is reserved past the end HDF5 recorded
    /// (HDF5 truncates to its allocation only when its own view of the file size differs).
    pub fn release(self, path: &Path) {
        let Ok(f) = h5::File::open(path) else {
            return;
        };
        let eoa = end_of_allocation(&f);
        drop(f);
        if let Ok(eoa) = eoa {
            if self.file.metadata().is_ok_and(|m| m.len() > eoa) {
                let _ = self.file.set_len(eoa);
            }
        }
    }

    fn grow(&mut self, from: u64, to: u64) -> io::Result<()> {
        if !self.sparse {
            match allocate(&self.file, from, to - from) {
                Err(e) if e.raw_os_error() == Some(EOPNOTSUPP) => self.sparse = true,
                other => return other,
            }
        }
        self.file.set_len(to)
    }
}

const EOPNOTSUPP: i32 = 95;

#[cfg(target_os = "linux")]
fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use nix::fcntl::{fallocate, FallocateFlags};
    let off = i64::try_from(offset).map_err(io::Error::other)?;
    let len = i64::try_from(len).map_err(io::Error::other)?;
    fallocate(file, FallocateFlags::empty(), off, len).map_err(io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn allocate(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(EOPNOTSUPP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_in_steps() {
        let dir = std::env::temp_dir().join(format!("ndflow-reserve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.bin");
        std::fs::write(&path, b"x").unwrap();
        let mut r = Reserve::open(&path, margin(1000)).unwrap();
        r.ensure(0, 1000).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!(size, 1000 + margin(1000) + STEP);
        // Already covered: no growth.
        r.ensure(10, 1000).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
