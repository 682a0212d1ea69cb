//! The port types: `eiger` (EIGER2), `eiger1` (the first EIGER) and `pilatus4`, one per
//! ADEiger template set, built from the detector's address.

use ndflow_runtime::{Built, ConstructorKey, PortArgs, PortType};

use crate::driver::{EigerDriver, Endpoints};
use crate::params::Family;

const KEYS: &[ConstructorKey] = &[
    ConstructorKey {
        name: "Host",
        doc: "The detector's SIMPLON REST address, \"host[:port]\" (default port 80); the streams connect to the same host",
    },
    ConstructorKey {
        name: "StreamPort",
        doc: "Stream v1 (ZeroMQ, multipart JSON) port, default 9999",
    },
    ConstructorKey {
        name: "Stream2Port",
        doc: "Stream v2 (ZeroMQ, CBOR) port, default 31001",
    },
    ConstructorKey {
        name: "DecodeThreads",
        doc: "Threads decompressing frames (StreamDecompress = Enable), 1..64, default 2",
    },
];

fn build(family: Family, a: &PortArgs<'_>) -> Result<Built, String> {
    let rest = a.string("Host")?.unwrap_or_else(|| "127.0.0.1".into());
    let trimmed = rest.trim().trim_start_matches("http://");
    let host = match trimmed.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|c| c.is_ascii_digit()) => h,
        _ => trimmed,
    };
    let host = host.trim_end_matches('/').to_string();
    if host.is_empty() {
        return Err(format!("Host must name the detector, not \"{rest}\""));
    }
    let port =
        |key, default| -> Result<u16, String> { a.int(key, 1..=65535, default).map(|p| p as u16) };
    let ends = Endpoints {
        rest,
        host,
        stream_port: port("StreamPort", 9999)?,
        stream2_port: port("Stream2Port", 31001)?,
        workers: a.int("DecodeThreads", 1..=64, 2)? as usize,
    };
    Ok(Built::Driver(Box::new(EigerDriver::new(family, ends)?)))
}

/// `type = "eiger"`: EIGER2 (eigerBase + eiger2 records).
pub const EIGER2: PortType = PortType::driver(
    "eiger",
    "eigerDetector",
    "DECTRIS EIGER2: SIMPLON REST control, frames from Stream v1 or v2 (decompressed or passed on compressed)",
    |a| build(Family::Eiger2, a),
)
.keys(KEYS);

/// `type = "eiger1"`: the first-generation EIGER (eigerBase + eiger1 records).
pub const EIGER1: PortType = PortType::driver(
    "eiger1",
    "eigerDetector",
    "DECTRIS EIGER (first generation): SIMPLON REST control, frames from Stream v1",
    |a| build(Family::Eiger1, a),
)
.keys(KEYS);

/// `type = "pilatus4"`: PILATUS4 (eigerBase + eiger2 + pilatus4 records).
pub const PILATUS4: PortType = PortType::driver(
    "pilatus4",
    "eigerDetector",
    "DECTRIS PILATUS4: as eiger, with four thresholds",
    |a| build(Family::Pilatus4, a),
)
.keys(KEYS);
