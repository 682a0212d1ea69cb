//! Every data type, Mono/RGB1/RGB2/RGB3, and the chunking parameters: frames written by the
//! HDF5 plugin read back bit-exactly with hdf5-metno, in the shape NDFileHDF5 gives them.

use crate::common::{frame, hdf5_harness, hdf5_stream, pattern, read_all, rgb, shape, TempDir};
use ndflow_core::{with_pixel_type, ColorMode, DataType, NDArray, Pixel};
use ndflow_io::hdf5::{chunk_shape, ChunkRequest, DATA_PATH};

/// Frame `k` of a stream: the type's pattern shifted by k, so frames differ.
fn frames_of<T: Pixel>(sizes: &[usize], n: usize, mode: ColorMode) -> (Vec<NDArray>, Vec<T>) {
    let len: usize = sizes.iter().product();
    let base: Vec<T> = pattern(len + n);
    let mut all = Vec::new();
    let fr = (0..n)
        .map(|k| {
            let px = &base[k..k + len];
            all.extend_from_slice(px);
            rgb(frame(sizes, px, k as i32 + 1), mode)
        })
        .collect();
    (fr, all)
}

/// The values' bytes, for a bit-exact comparison (NaN included).
fn bits<T: Pixel>(v: &[T]) -> Vec<u8> {
    NDArray::from_pixels(&ndflow_core::Pool::unlimited(), &[v.len()], v)
        .unwrap()
        .data_bytes()
        .to_vec()
}

#[test]
fn all_types_and_colour_modes_round_trip() {
    let dir = TempDir::new("h5-types");
    let cases: [(&[usize], ColorMode, &[usize]); 4] = [
        (&[5, 4], ColorMode::Mono, &[4, 5]),
        (&[3, 5, 4], ColorMode::RGB1, &[4, 5, 3]),
        (&[5, 3, 4], ColorMode::RGB2, &[4, 3, 5]),
        (&[5, 4, 3], ColorMode::RGB3, &[3, 4, 5]),
    ];
    for dt in DataType::ALL {
        for (sizes, mode, h5_shape) in cases {
            let name = format!("{}_{}", dt.name(), mode.name());
            let h = hdf5_harness(&dir, &name);
            with_pixel_type!(dt, T => {
                let (fr, want) = frames_of::<T>(sizes, 3, mode);
                let path = hdf5_stream(&h, fr);
                let mut s = vec![3];
                s.extend_from_slice(h5_shape);
                assert_eq!(shape(&path, DATA_PATH), s, "{name}");
                let got: Vec<T> = read_all(&path, DATA_PATH);
                assert_eq!(bits(&got), bits(&want), "{name}");
            });
        }
    }
}

#[test]
fn chunk_parameters_and_alignment() {
    let dir = TempDir::new("h5-chunks");
    let (fr, want) = frames_of::<u16>(&[6, 5], 5, ColorMode::Mono);
    let h = hdf5_harness(&dir, "manual");
    h.put("ChunkSizeAuto", "No").unwrap();
    h.put("NumColChunks", 4).unwrap();
    h.put("NumRowChunks", 2).unwrap();
    h.put("NumFramesChunks", 2).unwrap();
    h.put("BoundaryAlign", 4096).unwrap();
    h.put("BoundaryThreshold", 1).unwrap();
    let path = hdf5_stream(&h, fr.clone());
    let f = hdf5_metno::File::open(&path).unwrap();
    let d = f.dataset(DATA_PATH).unwrap();
    assert_eq!(d.chunk(), Some(vec![2, 2, 4]));
    assert_eq!(d.shape(), [5, 5, 6]);
    assert_eq!(d.read_raw::<u16>().unwrap(), want);
    // Aligned chunks start on 4096-byte boundaries.
    for i in 0..d.num_chunks().unwrap() {
        let c = d.chunk_info(i).unwrap();
        assert_eq!(c.addr % 4096, 0, "chunk {i} at {}", c.addr);
    }
    assert_eq!(h.get_f64("NumColChunks"), 4.0);
    assert_eq!(h.get_f64("NumFramesChunks"), 2.0);

    // Requests larger than the frame are clamped and published.
    let h = hdf5_harness(&dir, "clamp");
    h.put("ChunkSizeAuto", "No").unwrap();
    h.put("NumColChunks", 100).unwrap();
    let path = hdf5_stream(&h, fr);
    let f = hdf5_metno::File::open(&path).unwrap();
    assert_eq!(f.dataset(DATA_PATH).unwrap().chunk(), Some(vec![1, 5, 6]));
    assert_eq!(h.get_f64("NumColChunks"), 6.0);
}

#[test]
fn chunk_shape_is_the_frame_by_default() {
    let req = ChunkRequest {
        auto: true,
        dims: [7; 10],
        frames: 0,
    };
    assert_eq!(chunk_shape(&[1024, 1024], &req, true).0, [1, 1024, 1024]);
}

#[test]
fn fill_value_and_one_dimensional_frames() {
    let dir = TempDir::new("h5-1d");
    let h = hdf5_harness(&dir, "line");
    h.put("FillValue", 7.0).unwrap();
    let fr: Vec<NDArray> = (0..2)
        .map(|k| frame(&[10], &[k as f32; 10], k + 1))
        .collect();
    let path = hdf5_stream(&h, fr);
    assert_eq!(shape(&path, DATA_PATH), [2, 10]);
    let f = hdf5_metno::File::open(&path).unwrap();
    let d = f.dataset(DATA_PATH).unwrap();
    let fill = d.fill_value().unwrap().unwrap();
    assert_eq!(format!("{fill}"), "7.0");
    assert_eq!(read_all::<f32>(&path, DATA_PATH)[10..], [1.0; 10]);
}
