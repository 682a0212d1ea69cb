//! The per-driver buffer pool.
//!
//! Buffers are 64-byte aligned (whole cache lines, so SIMD loads never straddle the start)
//! and go back to their pool's free list when the last reference drops. The free list is
//! ordered by capacity: `alloc` takes the smallest free buffer that fits, and re-allocates
//! one more than 1.5x too large (areaDetector's rule) so that small frames do not pin big
//! buffers. A new allocation that would pass the memory cap first frees the largest free
//! buffers, then fails with [`CoreError::PoolExhausted`]; the caller counts a dropped frame.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::{AlignedBuf, CoreError};

/// One cache line: storage is counted in these, so every buffer is whole cache lines.
#[repr(C, align(64))]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Line([u8; 64]);

const LINE: usize = 64;

/// A buffer's memory: 64-byte aligned, and on transparent huge pages from 2 MiB up
/// ([`AlignedBuf`]), so streaming a large frame does not walk a page table every 4 KiB.
struct Storage(AlignedBuf<Line>);

impl Default for Storage {
    fn default() -> Storage {
        Storage(AlignedBuf::zeroed(0))
    }
}

impl Storage {
    fn new(bytes: usize) -> Storage {
        Storage(AlignedBuf::zeroed(bytes.div_ceil(LINE)))
    }
    fn capacity(&self) -> usize {
        self.0.len() * LINE
    }
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.0)
    }
}

/// Pool statistics, as the PoolUsedMem / PoolAllocBuffers / PoolFreeBuffers parameters show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Bytes held by the pool (in use plus free).
    pub used_mem: usize,
    /// Memory cap in bytes; 0 = unlimited.
    pub max_mem: usize,
    /// Buffers allocated (in use plus free).
    pub alloc_buffers: usize,
    /// Buffers on the free list.
    pub free_buffers: usize,
    /// Allocations refused because of the cap, since creation.
    pub refused: u64,
}

#[derive(Default)]
struct PoolState {
    free: BTreeMap<usize, Vec<Storage>>,
    stats: PoolStats,
}

struct PoolShared {
    state: Mutex<PoolState>,
}

impl PoolShared {
    fn release(&self, storage: Storage) {
        let mut st = self.state.lock();
        st.stats.free_buffers += 1;
        st.free.entry(storage.capacity()).or_default().push(storage);
    }
}

/// A buffer pool. Cheap to clone (shared handle).
#[derive(Clone)]
pub struct Pool {
    shared: Arc<PoolShared>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Pool {
    /// A pool capped at `max_mem` bytes (0 = unlimited).
    pub fn new(max_mem: usize) -> Pool {
        let state = PoolState {
            stats: PoolStats {
                max_mem,
                ..PoolStats::default()
            },
            ..PoolState::default()
        };
        Pool {
            shared: Arc::new(PoolShared {
                state: Mutex::new(state),
            }),
        }
    }

    pub fn unlimited() -> Pool {
        Pool::new(0)
    }

    pub fn stats(&self) -> PoolStats {
        self.shared.state.lock().stats
    }

    /// Changes the cap; buffers already allocated stay until freed.
    pub fn set_max_mem(&self, max_mem: usize) {
        self.shared.state.lock().stats.max_mem = max_mem;
    }

    /// A buffer of `len` bytes (contents unspecified: a reused buffer keeps old pixels).
    pub fn alloc(&self, len: usize) -> Result<BufferMut, CoreError> {
        let storage = {
            let mut st = self.shared.state.lock();
            Self::take_or_allocate(&mut st, len)?
        };
        Ok(BufferMut {
            storage,
            len,
            pool: Some(self.shared.clone()),
        })
    }

    fn take_or_allocate(st: &mut PoolState, len: usize) -> Result<Storage, CoreError> {
        let fit = st.free.range(len..).next().map(|(cap, _)| *cap);
        if let Some(cap) = fit {
            let storage = pop_free(st, cap);
            // Reuse unless it is more than 1.5x too large; then drop it and allocate fresh.
            if cap * 2 <= len * 3 || cap <= LINE {
                return Ok(storage);
            }
            st.stats.used_mem -= storage.capacity();
            st.stats.alloc_buffers -= 1;
        }
        let need = len.div_ceil(LINE) * LINE;
        let max = st.stats.max_mem;
        if max > 0 {
            // Make room by freeing the largest free buffers first.
            while st.stats.used_mem + need > max {
                let Some(largest) = st.free.keys().next_back().copied() else {
                    break;
                };
                let s = pop_free(st, largest);
                st.stats.used_mem -= s.capacity();
                st.stats.alloc_buffers -= 1;
            }
            if st.stats.used_mem + need > max {
                st.stats.refused += 1;
                return Err(CoreError::PoolExhausted {
                    requested: len,
                    used: st.stats.used_mem,
                    max,
                });
            }
        }
        st.stats.used_mem += need;
        st.stats.alloc_buffers += 1;
        Ok(Storage::new(need))
    }

    /// Frees every buffer on the free list (EmptyFreeList).
    pub fn empty_free_list(&self) {
        let mut st = self.shared.state.lock();
        let freed: Vec<Storage> = std::mem::take(&mut st.free)
            .into_values()
            .flatten()
            .collect();
        for s in &freed {
            st.stats.used_mem -= s.capacity();
        }
        st.stats.alloc_buffers -= freed.len();
        st.stats.free_buffers = 0;
    }

    /// Allocates `count` buffers of `len` bytes onto the free list (pre-allocation), so the
    /// first frames of an acquisition do not pay for allocation. Stops at the cap.
    pub fn preallocate(&self, count: usize, len: usize) -> Result<(), CoreError> {
        let bufs: Vec<BufferMut> = (0..count)
            .map(|_| self.alloc(len))
            .collect::<Result<_, _>>()?;
        drop(bufs);
        Ok(())
    }
}

fn pop_free(st: &mut PoolState, cap: usize) -> Storage {
    let list = st.free.get_mut(&cap);
    let storage = list.and_then(|l| l.pop()).unwrap_or_default();
    if st.free.get(&cap).is_some_and(|l| l.is_empty()) {
        st.free.remove(&cap);
    }
    st.stats.free_buffers -= 1;
    storage
}

/// A buffer being filled by its producer (unique owner, writable).
pub struct BufferMut {
    storage: Storage,
    len: usize,
    pool: Option<Arc<PoolShared>>,
}

impl BufferMut {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn capacity(&self) -> usize {
        self.storage.capacity()
    }
    /// Shrinks or grows the visible length within the capacity (compressed output).
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.capacity());
    }
    /// The bytes viewed as elements of `T` (alignment is guaranteed by the pool).
    pub fn as_mut_slice<T: bytemuck::Pod>(&mut self) -> &mut [T] {
        let n = self.len / std::mem::size_of::<T>().max(1);
        let bytes = &mut self.storage.bytes_mut()[..n * std::mem::size_of::<T>()];
        bytemuck::cast_slice_mut(bytes)
    }
    pub fn as_slice<T: bytemuck::Pod>(&self) -> &[T] {
        let n = self.len / std::mem::size_of::<T>().max(1);
        bytemuck::cast_slice(&self.storage.bytes()[..n * std::mem::size_of::<T>()])
    }
    /// Publishes the buffer: from now on it is shared and read-only.
    pub fn freeze(mut self) -> Buffer {
        let inner = BufferInner {
            storage: std::mem::take(&mut self.storage),
            len: self.len,
            pool: self.pool.take(),
            external: None,
        };
        Buffer(Arc::new(inner))
    }
}

impl std::fmt::Debug for BufferMut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BufferMut({} bytes)", self.len)
    }
}

impl Drop for BufferMut {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.release(std::mem::take(&mut self.storage));
        }
    }
}

impl Deref for BufferMut {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.storage.bytes()[..self.len]
    }
}

impl DerefMut for BufferMut {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.storage.bytes_mut()[..len]
    }
}

/// Memory a [`Buffer`] can hold without copying it: a frame in a driver's own buffer (an
/// Aravis ring buffer) that goes back to its owner when the last NDArray using it drops.
pub trait ExternalBytes: Send + Sync + 'static {
    /// The bytes; the same address and length for as long as the value lives.
    fn bytes(&self) -> &[u8];
}

/// Why [`Buffer::from_external`] could not take the memory (copy it instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Misaligned {
    pub address: usize,
}

impl std::fmt::Display for Misaligned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "external memory at {:#x} is not {EXTERNAL_ALIGN}-byte aligned",
            self.address
        )
    }
}

/// The alignment external memory needs: that of the widest pixel type (f64, u64), so that
/// [`Buffer::as_slice`] can view it as any of them.
pub const EXTERNAL_ALIGN: usize = 8;

struct BufferInner {
    storage: Storage,
    len: usize,
    pool: Option<Arc<PoolShared>>,
    /// When set, the bytes are these, not `storage`'s.
    external: Option<Box<dyn ExternalBytes>>,
}

impl BufferInner {
    fn bytes(&self) -> &[u8] {
        match &self.external {
            Some(e) => &e.bytes()[..self.len],
            None => &self.storage.bytes()[..self.len],
        }
    }
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.release(std::mem::take(&mut self.storage));
        }
    }
}

/// A published, shared, read-only pixel buffer. Cloning shares it (no copy).
#[derive(Clone)]
pub struct Buffer(Arc<BufferInner>);

impl Buffer {
    /// An unpooled buffer holding a copy of `bytes` (tests, network input).
    pub fn from_bytes(bytes: &[u8]) -> Buffer {
        let mut storage = Storage::new(bytes.len());
        storage.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        Buffer(Arc::new(BufferInner {
            storage,
            len: bytes.len(),
            pool: None,
            external: None,
        }))
    }

    /// A buffer that is `memory` itself, not a copy: it is dropped (and so goes back to its
    /// owner) when the last NDArray sharing it does. Refused, with `memory` handed back, when
    /// its address is not [`EXTERNAL_ALIGN`]-aligned.
    pub fn from_external<E: ExternalBytes>(memory: E) -> Result<Buffer, (E, Misaligned)> {
        let address = memory.bytes().as_ptr() as usize;
        if !address.is_multiple_of(EXTERNAL_ALIGN) {
            return Err((memory, Misaligned { address }));
        }
        let len = memory.bytes().len();
        Ok(Buffer(Arc::new(BufferInner {
            storage: Storage::default(),
            len,
            pool: None,
            external: Some(Box::new(memory)),
        })))
    }

    /// Whether the bytes are external memory ([`Buffer::from_external`]).
    pub fn is_external(&self) -> bool {
        self.0.external.is_some()
    }
    pub fn len(&self) -> usize {
        self.0.len
    }
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }
    pub fn capacity(&self) -> usize {
        match &self.0.external {
            Some(e) => e.bytes().len(),
            None => self.0.storage.capacity(),
        }
    }
    pub fn as_slice<T: bytemuck::Pod>(&self) -> &[T] {
        let n = self.0.len / std::mem::size_of::<T>().max(1);
        bytemuck::cast_slice(&self.0.bytes()[..n * std::mem::size_of::<T>()])
    }
    /// True when both handles share the same pixels.
    pub fn ptr_eq(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// The pool this buffer returns to, if any (plugins allocate outputs from it).
    pub fn pool(&self) -> Option<Pool> {
        self.0.pool.clone().map(|shared| Pool { shared })
    }
}

impl Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} bytes)", self.0.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_freed_buffers_without_allocating() {
        let pool = Pool::unlimited();
        let a = pool.alloc(1000).unwrap().freeze();
        assert_eq!(pool.stats().alloc_buffers, 1);
        drop(a);
        assert_eq!(pool.stats().free_buffers, 1);
        for _ in 0..100 {
            let b = pool.alloc(900).unwrap();
            assert_eq!(b.len(), 900);
        }
        let s = pool.stats();
        assert_eq!((s.alloc_buffers, s.free_buffers), (1, 1));
    }

    #[test]
    fn alignment_is_64_bytes() {
        let pool = Pool::unlimited();
        for len in [1, 63, 64, 4097] {
            let mut b = pool.alloc(len).unwrap();
            assert_eq!(b.as_mut_slice::<u8>().as_ptr() as usize % 64, 0);
        }
    }

    #[test]
    fn too_large_free_buffer_is_reallocated() {
        let pool = Pool::unlimited();
        drop(pool.alloc(1 << 20).unwrap());
        let small = pool.alloc(1000).unwrap();
        assert_eq!(small.capacity(), 1024);
        assert_eq!(pool.stats().alloc_buffers, 1);
        assert_eq!(pool.stats().used_mem, 1024);
    }

    #[test]
    fn cap_frees_largest_then_fails_cleanly() {
        let pool = Pool::new(4096);
        let big = pool.alloc(2048).unwrap();
        drop(big);
        let a = pool.alloc(1024).unwrap(); // 2048 free buffer > 1.5x: replaced
        let b = pool.alloc(1024).unwrap();
        let c = pool.alloc(1024).unwrap();
        let d = pool.alloc(1024).unwrap();
        let err = pool.alloc(64).unwrap_err();
        assert!(matches!(
            err,
            CoreError::PoolExhausted { requested: 64, .. }
        ));
        assert_eq!(pool.stats().refused, 1);
        drop((a, b, c, d));
        assert_eq!(pool.stats().free_buffers, 4);
        // Needs 4096: frees free buffers to make room.
        let e = pool.alloc(4096).unwrap();
        assert_eq!(pool.stats().used_mem, 4096);
        drop(e);
        pool.empty_free_list();
        assert_eq!(
            pool.stats(),
            PoolStats {
                max_mem: 4096,
                refused: 1,
                ..Default::default()
            }
        );
    }

    #[test]
    fn shared_buffer_returns_after_last_reference() {
        let pool = Pool::unlimited();
        let mut m = pool.alloc(16).unwrap();
        m.as_mut_slice::<u16>().copy_from_slice(&[7; 8]);
        let a = m.freeze();
        let b = a.clone();
        assert!(a.ptr_eq(&b));
        assert_eq!(b.as_slice::<u16>(), &[7; 8]);
        drop(a);
        assert_eq!(pool.stats().free_buffers, 0);
        drop(b);
        assert_eq!(pool.stats().free_buffers, 1);
    }

    #[test]
    fn preallocate_fills_free_list() {
        let pool = Pool::new(10_000);
        pool.preallocate(3, 1024).unwrap();
        assert_eq!(pool.stats().free_buffers, 3);
        assert!(pool.preallocate(20, 1024).is_err());
    }

    /// External memory with a flag set when it is given back.
    struct Lent {
        bytes: Vec<u64>,
        back: Arc<std::sync::atomic::AtomicBool>,
        offset: usize,
    }

    impl ExternalBytes for Lent {
        fn bytes(&self) -> &[u8] {
            &bytemuck::cast_slice(&self.bytes)[self.offset..]
        }
    }

    impl Drop for Lent {
        fn drop(&mut self) {
            self.back.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn external_memory_is_shared_not_copied_and_given_back_after_the_last_reference() {
        let back = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let lent = Lent {
            bytes: vec![0x0102_0304_0506_0708; 4],
            back: back.clone(),
            offset: 0,
        };
        let address = lent.bytes().as_ptr();
        let a = Buffer::from_external(lent).map_err(|(_, e)| e).unwrap();
        assert!(a.is_external());
        assert_eq!(a.as_ptr(), address, "the same memory, no copy");
        assert_eq!(a.len(), 32);
        assert_eq!(a.as_slice::<u64>(), &[0x0102_0304_0506_0708; 4]);
        assert_eq!(a.as_slice::<u16>()[0], 0x0708);
        let b = a.clone();
        drop(a);
        assert!(!back.load(std::sync::atomic::Ordering::SeqCst));
        let t = std::thread::spawn(move || b.iter().map(|&x| x as u64).sum::<u64>());
        assert_eq!(t.join().unwrap(), 4 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8));
        assert!(back.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn misaligned_external_memory_is_handed_back() {
        let back = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let lent = Lent {
            bytes: vec![0; 4],
            back: back.clone(),
            offset: 1,
        };
        let (lent, err) = Buffer::from_external(lent).map(|_| ()).unwrap_err();
        assert_eq!(err.address % EXTERNAL_ALIGN, 1);
        assert!(err.to_string().contains("aligned"), "{err}");
        assert!(!back.load(std::sync::atomic::Ordering::SeqCst));
        drop(lent);
        assert!(back.load(std::sync::atomic::Ordering::SeqCst));
    }
}
