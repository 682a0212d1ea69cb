//! The array readbacks every port shows for its last array (NDimensions_RBV, ArraySizeX_RBV,
//! UniqueId_RBV, ...), captured per frame into a small struct and published at a bounded rate.

use ndflow_core::{ArrayValue, Buffer, DataType, NDArray, ParamStore, ParamValue};

#[derive(Debug, Clone, Default)]
pub(crate) struct FrameMeta {
    valid: bool,
    ndims: i64,
    size: [i64; 3],
    bytes: i64,
    unique_id: i64,
    time_stamp: f64,
    ts_sec: i64,
    ts_nsec: i64,
    codec: String,
    compressed_size: i64,
    data_type: i64,
    color_mode: i64,
    /// Sizes of every dimension (ArraySize0..9, Dimensions).
    dims: [i64; 10],
    /// `dims` as last written to the Dimensions waveform (written only when it changes).
    dims_written: Option<[i64; 10]>,
}

impl FrameMeta {
    pub(crate) fn update(&mut self, f: &NDArray) {
        let info = f.info();
        self.valid = true;
        self.ndims = f.ndims() as i64;
        self.size = [
            info.x_size as i64,
            if f.ndims() > 1 { info.y_size as i64 } else { 0 },
            if info.color_size > 1 {
                info.color_size as i64
            } else {
                f.dims.get(2).map_or(0, |d| d.size as i64)
            },
        ];
        self.bytes = f.total_bytes() as i64;
        self.unique_id = f.unique_id as i64;
        self.time_stamp = f.time_stamp;
        self.ts_sec = f.epics_ts.sec as i64;
        self.ts_nsec = f.epics_ts.nsec as i64;
        if self.codec != f.codec.name {
            self.codec.clone_from(&f.codec.name);
        }
        self.compressed_size = f.compressed_size as i64;
        self.data_type = f.data_type as i64;
        self.color_mode = info.color_mode as i64;
        self.dims = [0; 10];
        for (d, s) in self.dims.iter_mut().zip(&f.dims) {
            *d = s.size as i64;
        }
    }

    pub(crate) fn write_to(&mut self, idx: &MetaIdx, w: &mut Vec<(usize, ParamValue)>) {
        if !self.valid {
            return;
        }
        for (i, d) in idx.array_size.iter().zip(self.dims) {
            if let Some(i) = i {
                w.push((*i, d.into()));
            }
        }
        if let (Some(i), false) = (idx.dimensions, self.dims_written == Some(self.dims)) {
            let n = (self.ndims.max(0) as usize).min(10);
            let v: Vec<u8> = self.dims[..n]
                .iter()
                .flat_map(|&d| (d as i32).to_ne_bytes())
                .collect();
            w.push((
                i,
                ParamValue::Array(ArrayValue {
                    data_type: DataType::Int32,
                    buffer: Buffer::from_bytes(&v),
                    len: n,
                }),
            ));
            self.dims_written = Some(self.dims);
        }
        let mut put = |i: Option<usize>, v: ParamValue| {
            if let Some(i) = i {
                w.push((i, v));
            }
        };
        put(idx.ndims, self.ndims.into());
        put(idx.size[0], self.size[0].into());
        put(idx.size[1], self.size[1].into());
        put(idx.size[2], self.size[2].into());
        put(idx.bytes, self.bytes.min(i32::MAX as i64).into());
        put(idx.unique_id, self.unique_id.into());
        put(idx.time_stamp, self.time_stamp.into());
        put(idx.ts_sec, self.ts_sec.into());
        put(idx.ts_nsec, self.ts_nsec.into());
        put(idx.codec, self.codec.clone().into());
        put(
            idx.compressed_size,
            self.compressed_size.min(i32::MAX as i64).into(),
        );
        if let Some(i) = idx.data_type {
            put(Some(i), self.data_type.into());
        }
        if let Some(i) = idx.color_mode {
            put(Some(i), self.color_mode.into());
        }
    }
}

pub(crate) struct MetaIdx {
    ndims: Option<usize>,
    size: [Option<usize>; 3],
    bytes: Option<usize>,
    unique_id: Option<usize>,
    time_stamp: Option<usize>,
    ts_sec: Option<usize>,
    ts_nsec: Option<usize>,
    codec: Option<usize>,
    compressed_size: Option<usize>,
    /// Only where DataType/ColorMode are readbacks (plugins); a driver's are settings.
    data_type: Option<usize>,
    color_mode: Option<usize>,
    array_size: [Option<usize>; 10],
    dimensions: Option<usize>,
}

impl MetaIdx {
    /// `plugin`: DataType/ColorMode show the last array (a driver's are its settings).
    pub(crate) fn new(p: &ParamStore, plugin: bool) -> MetaIdx {
        let readback = |n: &str| p.index(n).filter(|_| plugin);
        const SIZES: [&str; 10] = [
            "ArraySize0",
            "ArraySize1",
            "ArraySize2",
            "ArraySize3",
            "ArraySize4",
            "ArraySize5",
            "ArraySize6",
            "ArraySize7",
            "ArraySize8",
            "ArraySize9",
        ];
        MetaIdx {
            array_size: SIZES.map(|n| p.index(n)),
            dimensions: p.index("Dimensions"),
            ndims: p.index("NDimensions"),
            size: [
                p.index("ArraySizeX"),
                p.index("ArraySizeY"),
                p.index("ArraySizeZ"),
            ],
            bytes: p.index("ArraySize"),
            unique_id: p.index("UniqueId"),
            time_stamp: p.index("TimeStamp"),
            ts_sec: p.index("EpicsTSSec"),
            ts_nsec: p.index("EpicsTSNsec"),
            codec: p.index("Codec"),
            compressed_size: p.index("CompressedSize"),
            data_type: readback("DataType"),
            color_mode: readback("ColorMode"),
        }
    }
}
