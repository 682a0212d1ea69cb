//! File and stream inputs: the TIFF reader, the HDF5 XML layout, the NDAttribute XML, the
//! config TOML, the GenICam XML and the EIGER stream (v1 JSON, v2 CBOR) with its frames.

use std::io::Cursor;
use std::path::Path;
use std::sync::OnceLock;

use bytes::Bytes;
use ndflow_core::{DataType, NDArray, ParamStore, Pool};
use ndflow_eiger::decode::{make_array, Output};
use ndflow_eiger::stream::{v1, v2, Event};
use ndflow_io::hdf5::xml_layout::{walk, Layout};
use ndflow_runtime::attr_file::AttributeList;
use ndflow_runtime::port_params::driver_layout;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(crate::MAX_POOL))
}

/// The text of a text input: invalid UTF-8 is replaced, as a lossy reader would (the parsers
/// take `&str`; the bytes still reach them).
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// A TIFF file, read as NDFileTIFF's ReadFile does (into a frame from a capped pool).
pub fn tiff_read(data: &[u8]) {
    let _ = ndflow_io::tiff::read::read_tiff_from(Cursor::new(data), Path::new("fuzz.tif"), pool());
}

/// An NDFileHDF5 XML layout file, parsed, then every query the writer makes of it.
pub fn hdf5_layout(data: &[u8]) {
    let Ok(layout) = Layout::parse(&text(data)) else {
        return;
    };
    let _ = layout.detector_paths();
    let _ = layout.ndattr_datasets();
    let _ = layout.ndattr_default_group();
    let _ = layout.performance_group();
    walk(&layout.root, "", &mut |_, _| {});
}

/// An NDAttributes file (macros `P=F:,R=cam1:` substituted), parsed against a driver's
/// parameters, then attached to a frame.
pub fn ndattr_xml(data: &[u8]) {
    thread_local! {
        static PARAMS: ParamStore = ParamStore::from_layout(driver_layout(&[]));
    }
    PARAMS.with(|params| {
        let Ok(list) = AttributeList::parse(&text(data), "P=F:,R=cam1:", params, None) else {
            return;
        };
        let Ok(buf) = pool().alloc(16) else { return };
        if let Ok(mut frame) = NDArray::new(&[4, 4], DataType::UInt8, buf.freeze()) {
            list.apply(&mut frame, params);
        }
    });
}

/// An IOC config file (TOML), as `ndflow run` and `ndflow check` read it.
pub fn config_toml(data: &[u8]) {
    let _ = ndflow::config::Config::parse(&text(data), "fuzz.toml");
}

/// A GenICam XML file (a camera's, or a saved copy), parsed into its features and each
/// enumeration's EPICS states.
pub fn genicam_xml(data: &[u8]) {
    if let Ok(list) = ndflow_aravis::features::parse(&text(data)) {
        for f in &list.features {
            let _ = f.epics_states();
        }
    }
}

/// An EIGER stream message: byte 0 bit 0 picks the interface (0 Stream v1, 1 Stream v2), the
/// rest is the ZeroMQ multipart message as records (see [`crate::records`]; tags ignored).
/// Every frame of a decoded image becomes an NDArray both ways the driver makes one
/// (decompressed, and passed through compressed).
pub fn eiger_stream(data: &[u8]) {
    let Some((&version, rest)) = data.split_first() else {
        return;
    };
    let parts: Vec<Bytes> = crate::records(rest)
        .into_iter()
        .map(|(_, b)| Bytes::copy_from_slice(b))
        .collect();
    let mut events = Vec::new();
    let _ = if version & 1 == 0 {
        v1::decode_message(&parts, &mut events)
    } else {
        v2::decode_message(&parts, &mut events)
    };
    for ev in &events {
        if let Event::Image(img) = ev {
            for f in &img.frames {
                for decompress in [true, false] {
                    let out = Output {
                        decompress,
                        signed: false,
                    };
                    let _ = make_array(f, out, pool());
                }
            }
        }
    }
}
