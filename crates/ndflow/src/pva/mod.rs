//! pvAccess in the IOC: every parameter as a PV ([`param_pvs`]), the NTNDArray publisher plugin
//! ([`plugin`], type `pva`), the NTNDArray source driver ([`driver`], type `pvadriver`), and the
//! NDArray ⇄ NTNDArray conversion they share ([`convert`]). The protocol itself is the
//! `ndflow-pva` crate; this module is where it meets the pipeline.

pub mod convert;
pub mod driver;
pub mod param_pvs;
pub mod plugin;

use std::sync::Arc;

use ndflow_pva::server::{Server, ServerConfig};
use ndflow_runtime::Graph;

use crate::config::Config;
pub use param_pvs::{ParamPublisher, PvDirectory};

/// The running pvAccess side of an IOC. Dropping it stops the server and the publisher.
pub struct PvaService {
    server: Option<Server>,
    _publisher: ParamPublisher,
    pvs: Arc<PvDirectory>,
}

impl PvaService {
    /// Serves the parameters of `graph` (named after `cfg`'s prefixes) and the PVs already in
    /// `pvs` (image PVs), with the server configured from the EPICS_PVAS_* variables.
    pub fn start(
        graph: &Arc<Graph>,
        cfg: &Config,
        pvs: Arc<PvDirectory>,
    ) -> Result<PvaService, String> {
        let publisher = param_pvs::serve_params(graph, &cfg.prefix, &cfg.port_prefixes(), &pvs)?;
        let scfg = ServerConfig::from_env().map_err(|e| format!("pvAccess configuration: {e}"))?;
        let server = Server::start(scfg, pvs.clone())
            .map_err(|e| format!("cannot start the pvAccess server: {e}"))?;
        Ok(PvaService {
            server: Some(server),
            _publisher: publisher,
            pvs,
        })
    }

    /// "pvAccess: N PVs on tcp 127.0.0.1:5075, udp 127.0.0.1:5076" for the start-up banner.
    pub fn describe(&self) -> String {
        match &self.server {
            Some(s) => format!(
                "pvAccess: {} PVs on tcp {}, udp {}",
                self.pvs.len(),
                s.tcp_addr(),
                s.udp_addr()
            ),
            None => "pvAccess: off".into(),
        }
    }

    pub fn pvs(&self) -> &PvDirectory {
        &self.pvs
    }
}

impl Drop for PvaService {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}
