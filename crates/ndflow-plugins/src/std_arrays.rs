//! NDPluginStdArrays: the latest frame as the array parameter `ArrayData`.
//!
//! areaDetector serves one frame as Int8/Int16/Int32/Int64/Float32/Float64 waveforms,
//! converting to whatever element type the client record asks for (FTVL). Here one array
//! parameter carries the frame and `ArrayDataType` picks its element type: "Automatic"
//! (default) is the frame's own type and shares the frame's buffer (no copy); any other
//! type converts (`as`, saturating from floats) into a pool buffer. A protocol face that
//! needs a fixed waveform type converts on read, as areaDetector's `readArray` does.
//!
//! Compressed frames pass through as their compressed bytes (UInt8, or Int8 when
//! `ArrayDataType` is Int8), sharing the buffer, as areaDetector hands the raw stream to
//! the waveform. Frames are passed downstream unchanged.

use std::sync::Arc;

use ndflow_core::{convert_slice, with_pixel_type, ArrayValue, DataType, NDArray, ParamDef};
use ndflow_runtime::port_params::{
    bind, plugin_layout, DATA_TYPE_AUTOMATIC, DATA_TYPE_OUT_CHOICES,
};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};

ndflow_core::params! {
    /// NDStdArrays.template's `ArrayData` plus the element-type menu.
    pub const STD_ARRAYS_PARAMS, pub struct StdArraysParams {
        array_data: array("ArrayData", DataType::UInt8)
            .doc("The latest frame, flattened (dims[0] fastest); element type per ArrayDataType"),
        array_data_type: enumeration("ArrayDataType", DATA_TYPE_OUT_CHOICES, DATA_TYPE_AUTOMATIC)
            .doc("Element type of ArrayData (Automatic = the frame's own type, no copy)"),
    }
}

/// NDPluginStdArrays. Stateless per frame (the store holds the array): up to 8 threads.
#[derive(Debug)]
pub struct StdArraysPlugin {
    p: StdArraysParams,
}

impl StdArraysPlugin {
    pub fn new() -> StdArraysPlugin {
        StdArraysPlugin {
            p: bind(&plugin_layout(STD_ARRAYS_PARAMS), StdArraysParams::bind),
        }
    }
}

impl Default for StdArraysPlugin {
    fn default() -> Self {
        Self::new()
    }
}

/// The frame's pixels as `want` (None = its own type, shared).
fn array_value(
    frame: &NDArray,
    want: Option<DataType>,
    ctx: &ProcessContext<'_>,
) -> Result<ArrayValue, PluginError> {
    if frame.is_compressed() {
        let data_type = match want {
            Some(DataType::Int8) => DataType::Int8,
            _ => DataType::UInt8,
        };
        return Ok(ArrayValue {
            data_type,
            buffer: frame.buffer.clone(),
            len: frame.compressed_size.min(frame.buffer.len()),
        });
    }
    let n = frame.n_elements();
    let from = frame.data_type;
    let to = want.unwrap_or(from);
    if to == from {
        // Checks that the buffer really holds the pixels before sharing it.
        with_pixel_type!(from, T => frame.pixels::<T>().map(|_| ()))?;
        return Ok(ArrayValue {
            data_type: from,
            buffer: frame.buffer.clone(),
            len: n,
        });
    }
    let mut buf = ctx.alloc(n * to.size())?;
    with_pixel_type!(from, S => {
        let src = frame.pixels::<S>()?;
        with_pixel_type!(to, D => convert_slice(src, buf.as_mut_slice::<D>()))
    });
    Ok(ArrayValue {
        data_type: to,
        buffer: buf.freeze(),
        len: n,
    })
}

impl Plugin for StdArraysPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginStdArrays"
    }

    fn params(&self) -> &'static [ParamDef] {
        STD_ARRAYS_PARAMS
    }

    /// One thread: with several, an older frame could overwrite a newer one in ArrayData.
    fn max_threads(&self) -> usize {
        1
    }

    fn accepts_compressed(&self) -> bool {
        true
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let want = DataType::from_index(self.p.array_data_type.get(ctx.params));
        let value = array_value(input, want, ctx)?;
        self.p.array_data.set(ctx.params, value);
        ctx.emit(Arc::clone(input));
        Ok(())
    }
}

/// The port type `type = "stdarrays"`.
pub const PORT: PortType = PortType::plugin(
    "stdarrays",
    "NDPluginStdArrays",
    "The latest frame as an array parameter (waveform)",
    |_| Ok(Built::Plugin(std::sync::Arc::new(StdArraysPlugin::new()))),
);
