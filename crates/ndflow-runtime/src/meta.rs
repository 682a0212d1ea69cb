//! The array readbacks every port shows for its last array (NDimensions_RBV, ArraySizeX_RBV,
//! UniqueId_RBV, ...), captured per frame into a small struct and published at a bounded rate.

use ndflow_core::{ArrayValue, Buffer, DataType, NDArray, ParamValue};

use crate::port_params::ArrayBaseParams;

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

    /// The readbacks of the last frame, appended to `w` for one `set_many`. `plugin`: the
    /// port is a plugin, whose DataType/ColorMode show the last array (a driver's are its
    /// settings).
    pub(crate) fn write_to(
        &mut self,
        p: &ArrayBaseParams,
        plugin: bool,
        w: &mut Vec<(usize, ParamValue)>,
    ) {
        if !self.valid {
            return;
        }
        let sizes = [
            p.array_size0,
            p.array_size1,
            p.array_size2,
            p.array_size3,
            p.array_size4,
            p.array_size5,
            p.array_size6,
            p.array_size7,
            p.array_size8,
            p.array_size9,
        ];
        for (h, d) in sizes.iter().zip(self.dims) {
            w.push(h.value(d));
        }
        if self.dims_written != Some(self.dims) {
            let n = (self.ndims.max(0) as usize).min(10);
            let v: Vec<u8> = self.dims[..n]
                .iter()
                .flat_map(|&d| (d as i32).to_ne_bytes())
                .collect();
            w.push(p.dimensions.value(ArrayValue {
                data_type: DataType::Int32,
                buffer: Buffer::from_bytes(&v),
                len: n,
            }));
            self.dims_written = Some(self.dims);
        }
        w.push(p.n_dimensions.value(self.ndims));
        w.push(p.array_size_x.value(self.size[0]));
        w.push(p.array_size_y.value(self.size[1]));
        w.push(p.array_size_z.value(self.size[2]));
        w.push(p.array_size.value(self.bytes.min(i32::MAX as i64)));
        w.push(p.unique_id.value(self.unique_id));
        w.push(p.time_stamp.value(self.time_stamp));
        w.push(p.epics_ts_sec.value(self.ts_sec));
        w.push(p.epics_ts_nsec.value(self.ts_nsec));
        w.push(p.codec.value(self.codec.clone()));
        w.push(
            p.compressed_size
                .value(self.compressed_size.min(i32::MAX as i64)),
        );
        if plugin {
            w.push(p.data_type.value(self.data_type));
            w.push(p.color_mode.value(self.color_mode));
        }
    }
}
