//! Serving a built graph: the PV directory, the pvAccess and Channel Access services and the
//! publisher that keeps their values current. The IOC (`ndflow run`) and the Python package
//! serve through this one path, and both install the EPICS_PV attribute reader the same way.

use std::collections::HashMap;
use std::sync::Arc;

use ndflow_runtime::Graph;

use crate::access::AccessRules;
use crate::ca::CaService;
use crate::pv_attrs::{AttrPvReader, LocalPvs};
use crate::pva::{ImagePvs, PvaService};
use crate::pvdir::{IocPort, Publisher, PvDirectory};

/// What to serve and under which names.
pub struct ServeOptions<'a> {
    pub pva: bool,
    pub ca: bool,
    /// The IOC prefix.
    pub prefix: &'a str,
    /// Port name → port prefix.
    pub port_prefixes: &'a HashMap<String, String>,
    pub access: AccessRules,
    /// Whom to serve; `None`: as the EPICS variables say (default: this host only).
    pub listen: Option<ndflow_net::Listen>,
}

/// The running servers; dropping them stops Channel Access, then pvAccess, then publishing.
pub struct Servers {
    pub ca: Option<CaService>,
    pub pva: Option<PvaService>,
    /// The directory both serve (none when neither runs).
    pub dir: Option<Arc<PvDirectory>>,
    _publisher: Option<Publisher>,
}

impl Servers {
    /// One line per running server (address, port, PV count), for the start-up message.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(p) = &self.pva {
            out.push(p.describe());
        }
        if let Some(c) = &self.ca {
            out.push(c.describe());
        }
        out
    }

    /// The start-up banner's line: whom the servers serve, where, and how to change it.
    pub fn banner(&self) -> Option<String> {
        let mut parts = Vec::new();
        let mut local = true;
        let mut scope = None;
        if let Some(p) = &self.pva {
            parts.push(p.where_text());
            local &= p.listen().is_local();
            scope.get_or_insert_with(|| p.listen().to_string());
        }
        if let Some(c) = &self.ca {
            parts.push(c.where_text());
            local &= c.listen().is_local();
            scope.get_or_insert_with(|| c.listen().to_string());
        }
        let scope = scope?;
        let hint = if local {
            "; other hosts: --listen 0.0.0.0 or listen = \"all\""
        } else {
            ""
        };
        Some(format!("serving {scope}: {}{hint}", parts.join(", ")))
    }
}

/// " (5064 taken)" after a server's address when another server of the host had the port.
pub(crate) fn taken_text(asked: Option<u16>) -> String {
    asked.map_or(String::new(), |p| format!(" ({p} taken)"))
}

/// Builds the PV directory of `graph` and starts the servers `o` asks for (none: nothing is
/// built or started).
pub fn serve(
    graph: &Arc<Graph>,
    images: Arc<ImagePvs>,
    o: &ServeOptions<'_>,
) -> Result<Servers, String> {
    serve_with(graph, images, o, &[])
}

/// [`serve`], with the IOC's own parameters (`$(P)NDFLOW:LogLevel`) served too.
pub fn serve_with(
    graph: &Arc<Graph>,
    images: Arc<ImagePvs>,
    o: &ServeOptions<'_>,
    ioc: &[IocPort],
) -> Result<Servers, String> {
    if !o.pva && !o.ca {
        return Ok(Servers {
            ca: None,
            pva: None,
            dir: None,
            _publisher: None,
        });
    }
    let dir = PvDirectory::build_with(graph, o.prefix, o.port_prefixes, o.access.clone(), ioc)?;
    let pva = if o.pva {
        Some(PvaService::start(&dir, images, o.listen.as_ref())?)
    } else {
        None
    };
    let ca = if o.ca {
        Some(CaService::start(&dir, o.listen.as_ref())?)
    } else {
        None
    };
    Ok(Servers {
        ca,
        pva,
        _publisher: Some(dir.start_publisher()?),
        dir: Some(dir),
    })
}

/// Installs the reader of NDAttributes files' EPICS_PV entries on `graph`: this IOC's own PVs
/// in process, others over pvAccess (`pva://`) or Channel Access. Install it before the ports
/// are built (their attribute files are read as they are configured), then call
/// [`set_local_pvs`] once the ports exist.
pub fn install_pv_reader(graph: &Graph) -> Arc<AttrPvReader> {
    let reader = Arc::new(AttrPvReader::default());
    graph.set_pv_reader(reader.clone());
    reader
}

/// Tells `reader` which PVs this IOC serves (its ports as they are now); EPICS_PV entries
/// that named one of them before are resolved in process from then on.
pub fn set_local_pvs(
    reader: &AttrPvReader,
    graph: &Graph,
    prefix: &str,
    port_prefixes: &HashMap<String, String>,
) {
    reader.set_local(LocalPvs::build(graph, prefix, port_prefixes));
}
