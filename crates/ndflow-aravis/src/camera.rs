//! A GenICam camera opened through Aravis, with its features read and written by name.
//!
//! Opening is by IPv4 literal unless the caller opts in to discovery: Aravis 0.8 finds a
//! camera by name by broadcasting to 255.255.255.255:3956 on every up interface (it cannot
//! be restricted before 0.9), which a facility network may not welcome.

use std::net::Ipv4Addr;

use aravis::glib;
use aravis::glib::prelude::Cast;
use aravis::prelude::*;

/// What went wrong, with the camera's or Aravis' own message where there is one.
#[derive(Debug, thiserror::Error)]
pub enum CameraError {
    #[error(
        "camera id {id:?} is not an IPv4 address: opening a camera by name makes Aravis 0.8 \
         broadcast discovery packets to 255.255.255.255:3956 on every network interface (and \
         may look the name up in DNS); give the camera's IPv4 address, or set \
         OpenOptions::allow_discovery to accept the broadcasts"
    )]
    DiscoveryRefused { id: String },
    #[error("opening camera {id:?}: {message}")]
    Open { id: String, message: String },
    /// A feature read, write or command failed; `op` says which.
    #[error("{op} {feature}: {message}")]
    Feature {
        op: &'static str,
        feature: String,
        message: String,
    },
    #[error("stream: {0}")]
    Stream(String),
}

impl CameraError {
    pub(crate) fn feature(op: &'static str, feature: &str, e: glib::Error) -> CameraError {
        CameraError::Feature {
            op,
            feature: feature.to_string(),
            message: e.message().to_string(),
        }
    }
}

/// How [`Camera::open_with`] may find the camera.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Let Aravis look up a non-IP id (serial, name, `Vendor-Model-Serial`) by discovery
    /// broadcasts on every interface.
    pub allow_discovery: bool,
}

/// Whether `id` opens without discovery: a bare dotted IPv4 address.
pub fn is_ip_literal(id: &str) -> bool {
    id.parse::<Ipv4Addr>().is_ok()
}

pub struct Camera {
    pub(crate) cam: aravis::Camera,
    device: aravis::Device,
    id: String,
}

impl std::fmt::Debug for Camera {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Camera").field("id", &self.id).finish()
    }
}

/// Aravis 0.8 parses a camera's GenICam XML while opening it, and two parses at once (two
/// cameras of one IOC, or a port's probe beside its control thread) corrupt each other's DOM
/// (`arv_dom_node_append_child: self is not a ArvDomNode`, then a crash): one open at a time.
static OPENING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn opening() -> std::sync::MutexGuard<'static, ()> {
    OPENING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Camera {
    /// Opens the camera at an IPv4 address; any other id is refused (see [`OpenOptions`]).
    pub fn open(id: &str) -> Result<Camera, CameraError> {
        Camera::open_with(id, OpenOptions::default())
    }

    pub fn open_with(id: &str, options: OpenOptions) -> Result<Camera, CameraError> {
        if !is_ip_literal(id) && !options.allow_discovery {
            return Err(CameraError::DiscoveryRefused { id: id.to_string() });
        }
        let open_err = |message: String| CameraError::Open {
            id: id.to_string(),
            message,
        };
        let cam = {
            let _one_at_a_time = opening();
            aravis::Camera::new(Some(id)).map_err(|e| open_err(e.message().to_string()))?
        };
        let device = cam
            .device()
            .ok_or_else(|| open_err("Aravis returned a camera without a device".into()))?;
        Ok(Camera::checked(cam, device, id.to_string()))
    }

    /// Aravis' in-process fake camera (`ArvFakeDevice`): no socket, no discovery; for tests
    /// and simulation. Its stream is fed by a thread of its own.
    pub fn open_fake(serial: &str) -> Result<Camera, CameraError> {
        let open_err = |message: String| CameraError::Open {
            id: format!("fake:{serial}"),
            message,
        };
        let _one_at_a_time = opening();
        let device =
            aravis::FakeDevice::new(serial).map_err(|e| open_err(e.message().to_string()))?;
        let cam =
            aravis::Camera::with_device(&device).map_err(|e| open_err(e.message().to_string()))?;
        Ok(Camera::checked(
            cam,
            device.upcast(),
            format!("fake:{serial}"),
        ))
    }

    /// Aravis 0.8 writes any value by default, even past a feature's limits or to a
    /// read-only one, and the camera then silently clamps or ignores it: with both checks on,
    /// a bad write is refused with the reason (`… is out of range [16, 2048]`), as ADGenICam
    /// reports it.
    fn checked(cam: aravis::Camera, device: aravis::Device, id: String) -> Camera {
        cam.set_range_check_policy(aravis::RangeCheckPolicy::Enable);
        cam.set_access_check_policy(aravis::AccessCheckPolicy::Enable);
        Camera { cam, device, id }
    }

    /// The id it was opened with.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn is_gige(&self) -> bool {
        self.cam.is_gv_device()
    }

    /// GigE: the stream's packet size (GevSCPSPacketSize), in bytes; 0 negotiates the largest
    /// the path between camera and host carries (Aravis sends test packets). Returns the size
    /// now in use.
    pub fn set_packet_size(&self, bytes: u32) -> Result<u32, CameraError> {
        let e = |e: aravis::glib::Error| CameraError::feature("writing", "GevSCPSPacketSize", e);
        if bytes == 0 {
            self.cam.gv_auto_packet_size().map_err(e)?;
        } else {
            let n = i32::try_from(bytes).unwrap_or(i32::MAX);
            self.cam.gv_set_packet_size(n).map_err(e)?;
        }
        self.cam
            .gv_get_packet_size()
            .map_err(|err| CameraError::feature("reading", "GevSCPSPacketSize", err))
    }

    pub fn get_int(&self, name: &str) -> Result<i64, CameraError> {
        self.cam
            .integer(name)
            .map_err(|e| CameraError::feature("reading", name, e))
    }

    pub fn set_int(&self, name: &str, value: i64) -> Result<(), CameraError> {
        self.cam
            .set_integer(name, value)
            .map_err(|e| CameraError::feature("writing", name, e))
    }

    pub fn get_float(&self, name: &str) -> Result<f64, CameraError> {
        self.cam
            .float(name)
            .map_err(|e| CameraError::feature("reading", name, e))
    }

    pub fn set_float(&self, name: &str, value: f64) -> Result<(), CameraError> {
        self.cam
            .set_float(name, value)
            .map_err(|e| CameraError::feature("writing", name, e))
    }

    pub fn get_bool(&self, name: &str) -> Result<bool, CameraError> {
        self.cam
            .boolean(name)
            .map_err(|e| CameraError::feature("reading", name, e))
    }

    pub fn set_bool(&self, name: &str, value: bool) -> Result<(), CameraError> {
        self.cam
            .set_boolean(name, value)
            .map_err(|e| CameraError::feature("writing", name, e))
    }

    pub fn get_string(&self, name: &str) -> Result<String, CameraError> {
        self.cam
            .string(name)
            .map(|s| s.to_string())
            .map_err(|e| CameraError::feature("reading", name, e))
    }

    pub fn set_string(&self, name: &str, value: &str) -> Result<(), CameraError> {
        self.cam
            .set_string(name, value)
            .map_err(|e| CameraError::feature("writing", name, e))
    }

    fn enumeration(
        &self,
        op: &'static str,
        name: &str,
    ) -> Result<aravis::GcEnumeration, CameraError> {
        let node = self
            .device
            .feature(name)
            .ok_or_else(|| CameraError::Feature {
                op,
                feature: name.to_string(),
                message: "no such feature".into(),
            })?;
        node.downcast::<aravis::GcEnumeration>()
            .map_err(|_| CameraError::Feature {
                op,
                feature: name.to_string(),
                message: "not an enumeration".into(),
            })
    }

    /// An enumeration's current entry, by name.
    pub fn get_enum(&self, name: &str) -> Result<String, CameraError> {
        self.enumeration("reading", name)?
            .string_value()
            .map(|s| s.to_string())
            .map_err(|e| CameraError::feature("reading", name, e))
    }

    /// Selects an enumeration entry by name.
    pub fn set_enum(&self, name: &str, entry: &str) -> Result<(), CameraError> {
        self.enumeration("writing", name)?
            .set_string_value(entry)
            .map_err(|e| CameraError::feature("writing", name, e))
    }

    /// An enumeration's current entry, as its integer value.
    pub fn get_enum_int(&self, name: &str) -> Result<i64, CameraError> {
        self.enumeration("reading", name)?
            .int_value()
            .map_err(|e| CameraError::feature("reading", name, e))
    }

    /// The entries the camera offers now (implemented and available ones only).
    pub fn enum_entries(&self, name: &str) -> Result<Vec<String>, CameraError> {
        self.cam
            .dup_available_enumerations_as_strings(name)
            .map(|v| v.into_iter().map(|s| s.to_string()).collect())
            .map_err(|e| CameraError::feature("listing entries of", name, e))
    }

    pub fn execute(&self, command: &str) -> Result<(), CameraError> {
        self.cam
            .execute_command(command)
            .map_err(|e| CameraError::feature("executing", command, e))
    }

    pub fn bounds_int(&self, name: &str) -> Result<(i64, i64), CameraError> {
        self.cam
            .integer_bounds(name)
            .map_err(|e| CameraError::feature("reading bounds of", name, e))
    }

    pub fn bounds_float(&self, name: &str) -> Result<(f64, f64), CameraError> {
        self.cam
            .float_bounds(name)
            .map_err(|e| CameraError::feature("reading bounds of", name, e))
    }

    /// Implemented and available now (false for a feature the camera does not have).
    pub fn is_available(&self, name: &str) -> bool {
        self.device.feature(name).is_some() && self.cam.is_feature_available(name).unwrap_or(false)
    }

    /// Whether a write may succeed now. Asks the node, not `arv_device_get_feature_access_mode`,
    /// which in 0.8.26 returns a boolean cast to an access mode (every writable feature reads WO).
    pub fn is_writable(&self, name: &str) -> bool {
        let Some(node) = self.device.feature(name) else {
            return false;
        };
        match node.downcast::<aravis::GcFeatureNode>() {
            Ok(f) => matches!(
                f.actual_access_mode(),
                aravis::GcAccessMode::Rw | aravis::GcAccessMode::Wo
            ),
            Err(_) => false,
        }
    }

    /// The camera's GenICam description, as Aravis loaded it (unzipped).
    pub fn genicam_xml(&self) -> String {
        self.device.genicam_xml().0.to_string()
    }

    /// PixelFormat as the camera names it (`Mono8`).
    pub fn pixel_format_name(&self) -> Result<String, CameraError> {
        self.cam
            .pixel_format_as_string()
            .map(|s| s.to_string())
            .map_err(|e| CameraError::feature("reading", "PixelFormat", e))
    }

    /// PixelFormat as its PFNC number (`Mono8` = 0x01080001).
    pub fn pixel_format(&self) -> Result<u32, CameraError> {
        self.cam
            .pixel_format()
            .map(|p| p.raw())
            .map_err(|e| CameraError::feature("reading", "PixelFormat", e))
    }

    pub fn set_pixel_format_name(&self, name: &str) -> Result<(), CameraError> {
        self.cam
            .set_pixel_format_from_string(name)
            .map_err(|e| CameraError::feature("writing", "PixelFormat", e))
    }

    /// Bytes per frame, from the camera's PayloadSize.
    pub fn payload_size(&self) -> Result<usize, CameraError> {
        self.cam
            .payload()
            .map(|p| p as usize)
            .map_err(|e| CameraError::feature("reading", "PayloadSize", e))
    }
}

/// Bits per pixel encoded in a PFNC pixel format number.
pub fn bits_per_pixel(pixel_format: u32) -> u32 {
    (pixel_format >> 16) & 0xff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_refused_before_any_network_call() {
        // No Aravis call is made for a refused id, so this runs anywhere.
        for id in [
            "FakeCamera",
            "camera.example.org",
            "127.0.0.1:3956",
            "Aravis-Fake-GV01",
        ] {
            let err = Camera::open(id).unwrap_err();
            assert!(
                matches!(err, CameraError::DiscoveryRefused { .. }),
                "{id}: {err}"
            );
            assert!(err.to_string().contains("255.255.255.255:3956"));
            assert!(err.to_string().contains("every network interface"));
        }
        assert!(is_ip_literal("127.0.0.1"));
        assert!(!is_ip_literal("::1"));
    }

    #[test]
    fn pixel_format_bits() {
        assert_eq!(bits_per_pixel(0x0108_0001), 8); // Mono8
        assert_eq!(bits_per_pixel(0x0110_0007), 16); // Mono16
        assert_eq!(bits_per_pixel(0x0218_0014), 24); // RGB8
    }
}
