//! The port type `aravis` (areaDetector's aravisCamera): a GigE Vision camera opened by its
//! IPv4 address through Aravis 0.8.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ndflow_runtime::{Built, ConstructorKey, PortArgs, PortType};

use crate::camera::{is_ip_literal, CameraError};
use crate::control::{Menus, Source};
use crate::driver::AravisDriver;
use crate::features::{self, FeatureList};
use crate::params::CAMERA_MENUS;

const KEYS: &[ConstructorKey] = &[
    ConstructorKey {
        name: "CameraId",
        doc: "The camera's IPv4 address (\"192.168.1.20\"); names are refused because Aravis 0.8 finds them by broadcasting discovery packets on every interface",
    },
    ConstructorKey {
        name: "NumBuffers",
        doc: "Aravis buffers in the stream's ring, 1..1024, default 16",
    },
    ConstructorKey {
        name: "GenICamXml",
        doc: "A saved copy of the camera's GenICam XML (`arv-tool-0.8 -a IP genicam > cam.xml`): its GC_ records and menus are served when the camera is not there at start-up",
    },
];

/// How long construction waits for the camera to list its menus (a camera that answers does
/// so in milliseconds; an absent one would hold the IOC's start for Aravis' 2.5 s timeout).
const PROBE: Duration = Duration::from_secs(1);

/// What the port knows of the camera when it is built: the entries of the camera-filled
/// menus and the features that become `GC_*` records, and where they came from.
#[derive(Debug, Clone, Default)]
pub struct Description {
    pub menus: Menus,
    pub features: FeatureList,
    /// "the camera at 10.0.0.5", "/etc/cam.xml", or empty when neither was there.
    pub from: String,
}

impl Description {
    /// The camera-filled menus of a saved XML: each enumeration's entries, in XML order.
    fn from_xml(xml: &str, from: String) -> Result<Description, String> {
        let features = features::parse(xml).map_err(|e| format!("{from}: {e}"))?;
        let menus = CAMERA_MENUS
            .iter()
            .map(|&name| {
                let entries = features.get(name).map_or_else(Vec::new, |f| {
                    f.entries.iter().map(|e| e.name.clone()).collect()
                });
                (name, entries)
            })
            .collect();
        Ok(Description {
            menus,
            features,
            from,
        })
    }
}

/// The camera's menus and GenICam XML, if it answers within [`PROBE`]. Runs on a thread of
/// its own, which is left to finish alone when the camera is slow; the camera it opened is
/// closed again before the control thread opens its own.
fn probe(source: &Source) -> Option<(Menus, String)> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let source = source.clone();
    std::thread::Builder::new()
        .name("ndflow-aravis-probe".into())
        .spawn(move || {
            let found: Result<(Menus, String), CameraError> = source.open().map(|cam| {
                let menus = CAMERA_MENUS
                    .iter()
                    .map(|&name| (name, cam.enum_entries(name).unwrap_or_default()))
                    .collect();
                (menus, cam.genicam_xml())
            });
            let _ = tx.send(found);
        })
        .ok()?;
    rx.recv_timeout(PROBE).ok()?.ok()
}

/// The camera's description: from the camera itself when it answers now, else from the saved
/// XML `xml_file` (so that the records do not depend on the camera being up when the IOC
/// starts), else empty (template menus, no `GC_*` records). A saved XML that cannot be read
/// or parsed is an error naming the file; a camera whose own XML does not parse keeps its
/// menus and gets no `GC_*` records (the reason is logged).
pub fn describe(source: &Source, xml_file: Option<&Path>) -> Result<Description, String> {
    if !matches!(source, Source::Unset) {
        if let Some((menus, xml)) = probe(source) {
            let from = format!("the camera at {}", source.describe());
            let features = features::parse(&xml).unwrap_or_else(|e| {
                tracing::warn!("{from}: its GenICam XML gives no GC_ records: {e}");
                FeatureList::default()
            });
            return Ok(Description {
                menus,
                features,
                from,
            });
        }
    }
    match xml_file {
        Some(path) => {
            let xml = std::fs::read_to_string(path)
                .map_err(|e| format!("GenICamXml {}: {e}", path.display()))?;
            Description::from_xml(&xml, format!("GenICamXml {}", path.display()))
        }
        None => Ok(Description::default()),
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
    let xml = a.string("GenICamXml")?.map(PathBuf::from);
    let description = describe(&source, xml.as_deref())?;
    Ok(Built::Driver(Box::new(AravisDriver::new(
        source,
        n_buffers,
        description,
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
