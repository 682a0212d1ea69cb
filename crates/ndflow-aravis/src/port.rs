//! The port type `aravis` (areaDetector's aravisCamera): a GigE Vision camera opened by its
//! IPv4 address through Aravis 0.8.

use std::time::Duration;

use ndflow_runtime::{Built, ConstructorKey, PortArgs, PortType};

use crate::camera::{is_ip_literal, CameraError};
use crate::control::{Menus, Source};
use crate::driver::AravisDriver;
use crate::params::{table_with_menus, CAMERA_MENUS};

const KEYS: &[ConstructorKey] = &[
    ConstructorKey {
        name: "CameraId",
        doc: "The camera's IPv4 address (\"192.168.1.20\"); names are refused because Aravis 0.8 finds them by broadcasting discovery packets on every interface",
    },
    ConstructorKey {
        name: "NumBuffers",
        doc: "Aravis buffers in the stream's ring, 1..1024, default 16",
    },
];

/// How long construction waits for the camera to list its menus (a camera that answers does
/// so in milliseconds; an absent one would hold the IOC's start for Aravis' 2.5 s timeout).
const PROBE: Duration = Duration::from_secs(1);

/// The camera's entries of the camera-filled menus, if it answers within [`PROBE`]. Runs on
/// a thread of its own, which is left to finish alone when the camera is slow; the camera it
/// opened is closed again before the control thread opens its own.
pub fn probe_menus(source: &Source) -> Menus {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let source = source.clone();
    let spawned = std::thread::Builder::new()
        .name("ndflow-aravis-probe".into())
        .spawn(move || {
            let menus: Result<Menus, CameraError> = source.open().map(|cam| {
                CAMERA_MENUS
                    .iter()
                    .map(|&name| (name, cam.enum_entries(name).unwrap_or_default()))
                    .collect()
            });
            let _ = tx.send(menus);
        });
    if spawned.is_err() {
        return Vec::new();
    }
    match rx.recv_timeout(PROBE) {
        Ok(Ok(m)) => m,
        _ => Vec::new(),
    }
}

fn build(a: &PortArgs<'_>) -> Result<Built, String> {
    let source = match a.string("CameraId")? {
        None => Source::Unset,
        Some(id) => {
            let id = id.trim().to_string();
            if !is_ip_literal(&id) {
                return Err(CameraError::DiscoveryRefused { id }.to_string());
            }
            Source::Ip(id)
        }
    };
    let n_buffers = a.int("NumBuffers", 1..=1024, 16)? as usize;
    let menus = match source {
        Source::Unset => Vec::new(),
        _ => probe_menus(&source),
    };
    let table = table_with_menus(&menus);
    Ok(Built::Driver(Box::new(AravisDriver::new(
        source, n_buffers, menus, table,
    ))))
}

/// `type = "aravis"`.
pub const PORT: PortType = PortType::driver(
    "aravis",
    "aravisCamera",
    "GenICam GigE Vision cameras through Aravis 0.8 (ADAravis/ADGenICam records), opened by IPv4 address",
    build,
)
.keys(KEYS);
