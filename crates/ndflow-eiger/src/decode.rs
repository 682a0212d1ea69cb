//! Frames to NDArrays, off the receive thread: a few worker threads decompress (or, in
//! pass-through, copy the compressed bytes), and the results come back in the order the
//! frames arrived, whichever worker finished first.

use std::collections::BTreeMap;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender};
use ndflow_codec::bitshuffle;
use ndflow_core::{CoreError, DataType, NDArray, Pool};

use crate::stream::{encoding, Encoding, Frame, PixelType, StreamError};

/// How a frame becomes an NDArray.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    /// StreamDecompress: publish pixels (true) or the detector's compressed bytes.
    pub decompress: bool,
    /// SignedData: publish Int8/16/32 instead of UInt8/16/32 (same bytes).
    pub signed: bool,
}

/// Why a frame did not become an NDArray.
#[derive(Debug)]
pub enum MakeError {
    /// The pool is at its limit: the frame is dropped and counted like any driver's.
    Pool(CoreError),
    Stream(StreamError),
}

fn data_type(p: PixelType, signed: bool) -> DataType {
    match (
        p.size(),
        signed || matches!(p, PixelType::I8 | PixelType::I16 | PixelType::I32),
    ) {
        (1, false) => DataType::UInt8,
        (1, true) => DataType::Int8,
        (2, false) => DataType::UInt16,
        (2, true) => DataType::Int16,
        (_, false) => DataType::UInt32,
        (_, true) => DataType::Int32,
    }
}

/// The bytes a pass-through NDArray carries and its codec name, when the frame can travel
/// compressed. A bslz4 frame drops its 12-byte HDF5 header (NDArrays carry the bare
/// bitshuffle blocks, as NDPluginCodec and ADEiger do; writers put the header back), which
/// is only lossless when its block size is bitshuffle's default — the detector's 8 kB is.
fn pass_through(frame: &Frame) -> Option<(&[u8], &'static str)> {
    match frame.encoding {
        Encoding::Raw => None,
        Encoding::Lz4Block | Encoding::Lz4Hdf5 => {
            Some((&frame.data[..], frame.encoding.codec_name()))
        }
        Encoding::BsLz4 { elem_size } => {
            let header = frame.data.get(8..12)?;
            let block = u32::from_be_bytes(header.try_into().ok()?) as usize;
            let default = bitshuffle::default_block_elems(elem_size) * elem_size;
            (block == default).then(|| (&frame.data[12..], "bslz4"))
        }
    }
}

/// One frame as an NDArray (dims [width, height]) from `pool`.
pub fn make_array(frame: &Frame, out: Output, pool: &Pool) -> Result<NDArray, MakeError> {
    let dt = data_type(frame.pixel, out.signed);
    let dims = [frame.width, frame.height];
    if !out.decompress {
        if let Some((bytes, codec)) = pass_through(frame) {
            encoding::check_header(frame).map_err(MakeError::Stream)?;
            let mut buf = pool.alloc(bytes.len()).map_err(MakeError::Pool)?;
            buf.as_mut_slice::<u8>().copy_from_slice(bytes);
            let mut a = NDArray::new(&[bytes.len().max(1)], DataType::UInt8, buf.freeze())
                .map_err(MakeError::Pool)?;
            a.dims = dims.iter().map(|&s| ndflow_core::Dim::new(s)).collect();
            a.data_type = dt;
            a.codec.name = codec.to_string();
            a.compressed_size = bytes.len();
            return Ok(a);
        }
    }
    let mut buf = pool.alloc(frame.decoded_len()).map_err(MakeError::Pool)?;
    encoding::decode_into(frame, buf.as_mut_slice::<u8>()).map_err(MakeError::Stream)?;
    NDArray::new(&dims, dt, buf.freeze()).map_err(MakeError::Pool)
}

type Job<T> = Box<dyn FnOnce() -> T + Send>;

/// A fixed set of worker threads whose results are handed back in submission order.
pub struct Ordered<T: Send + 'static> {
    jobs: Option<Sender<(u64, Job<T>)>>,
    done: Receiver<(u64, T)>,
    threads: Vec<JoinHandle<()>>,
    next_in: u64,
    next_out: u64,
    ready: BTreeMap<u64, T>,
}

impl<T: Send + 'static> Ordered<T> {
    pub fn new(workers: usize) -> std::io::Result<Ordered<T>> {
        let (jobs, job_rx) = unbounded::<(u64, Job<T>)>();
        let (done_tx, done) = unbounded();
        let mut threads = Vec::new();
        for i in 0..workers.max(1) {
            let (rx, tx) = (job_rx.clone(), done_tx.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("ndflow-eiger-dec{i}"))
                    .spawn(move || {
                        for (seq, job) in rx.iter() {
                            if tx.send((seq, job())).is_err() {
                                return;
                            }
                        }
                    })?,
            );
        }
        Ok(Ordered {
            jobs: Some(jobs),
            done,
            threads,
            next_in: 0,
            next_out: 0,
            ready: BTreeMap::new(),
        })
    }

    pub fn submit(&mut self, job: impl FnOnce() -> T + Send + 'static) {
        if let Some(jobs) = &self.jobs {
            // Workers only stop when `jobs` is dropped, so this cannot fail while we hold it.
            if jobs.send((self.next_in, Box::new(job))).is_ok() {
                self.next_in += 1;
            }
        }
    }

    /// Jobs submitted and not yet handed back.
    pub fn in_flight(&self) -> u64 {
        self.next_in - self.next_out
    }

    /// The next result in submission order, waiting at most `timeout` for it.
    pub fn next(&mut self, timeout: Duration) -> Option<T> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(v) = self.ready.remove(&self.next_out) {
                self.next_out += 1;
                return Some(v);
            }
            if self.in_flight() == 0 {
                return None;
            }
            let (seq, v) = self.done.recv_deadline(deadline).ok()?;
            self.ready.insert(seq, v);
        }
    }
}

impl<T: Send + 'static> Drop for Ordered<T> {
    fn drop(&mut self) {
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ndflow_codec::bslz4::{self, BsFraming};

    #[test]
    fn results_come_back_in_submission_order() {
        let mut o = Ordered::new(3).unwrap();
        for i in 0..50u64 {
            // Later jobs finish first.
            o.submit(move || {
                std::thread::sleep(Duration::from_micros((50 - i) * 100));
                i
            });
        }
        let got: Vec<u64> = (0..50)
            .map(|_| o.next(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
        assert_eq!(o.in_flight(), 0);
        assert!(o.next(Duration::from_millis(1)).is_none());
    }

    fn bslz4_frame(pixels: &[u16], w: usize, h: usize) -> Frame {
        let raw: &[u8] = bytemuck::cast_slice(pixels);
        let mut out =
            vec![0u8; bslz4::max_compressed_len(raw.len(), 2, 0, BsFraming::Hdf5).unwrap()];
        let n = bslz4::compress(raw, 2, 0, BsFraming::Hdf5, &mut out).unwrap();
        out.truncate(n);
        Frame {
            channel: String::new(),
            width: w,
            height: h,
            pixel: PixelType::U16,
            encoding: Encoding::BsLz4 { elem_size: 2 },
            data: Bytes::from(out),
        }
    }

    #[test]
    fn pass_through_keeps_the_blocks_and_decompress_gives_the_pixels() {
        let (w, h) = (33, 20);
        let pixels: Vec<u16> = (0..w * h).map(|i| (i * 7 % 1000) as u16).collect();
        let frame = bslz4_frame(&pixels, w, h);
        let pool = Pool::unlimited();
        let opts = Output {
            decompress: false,
            signed: false,
        };
        let a = make_array(&frame, opts, &pool).unwrap();
        assert_eq!(a.codec.name, "bslz4");
        assert_eq!(a.data_type, DataType::UInt16);
        assert_eq!(a.sizes(), vec![w, h]);
        assert_eq!(a.data_bytes(), &frame.data[12..]);
        let d = make_array(
            &frame,
            Output {
                decompress: true,
                signed: true,
            },
            &pool,
        )
        .unwrap();
        assert_eq!(d.data_type, DataType::Int16);
        assert!(!d.codec.is_compressed());
        assert_eq!(d.data_bytes(), bytemuck::cast_slice::<u16, u8>(&pixels));
    }
}
