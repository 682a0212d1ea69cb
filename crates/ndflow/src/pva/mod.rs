//! pvAccess in the IOC: every parameter as a PV ([`param_pvs`]), the NTNDArray publisher plugin
//! ([`plugin`], type `pva`), the NTNDArray source driver ([`driver`], type `pvadriver`), and the
//! NDArray ⇄ NTNDArray conversion they share ([`convert`]). The protocol itself is the
//! `ndflow-pva` crate; this module is where it meets the pipeline.

pub mod convert;
pub mod driver;
pub mod field_pvs;
pub mod param_pvs;
pub mod plugin;

use std::sync::Arc;

use ndflow_net::Listen;
use ndflow_pva::server::{Server, ServerConfig};

use crate::pvdir::PvDirectory;
pub use param_pvs::{ImagePvs, PvaProvider};

/// The running pvAccess side of an IOC. Dropping it stops the server.
pub struct PvaService {
    server: Option<Server>,
    provider: Arc<PvaProvider>,
}

impl PvaService {
    /// Serves every entry of `dir` and the image PVs of `pva` ports, with the server configured
    /// from the EPICS_PVAS_* variables (and `listen`, when given, over them).
    pub fn start(
        dir: &Arc<PvDirectory>,
        images: Arc<ImagePvs>,
        listen: Option<&Listen>,
    ) -> Result<PvaService, String> {
        let provider = PvaProvider::new(dir, images)?;
        let mut scfg =
            ServerConfig::from_env().map_err(|e| format!("pvAccess configuration: {e}"))?;
        if let Some(l) = listen {
            scfg.listen = l.clone();
        }
        let server = Server::start(scfg, provider.clone())
            .map_err(|e| format!("cannot start the pvAccess server: {e}"))?;
        Ok(PvaService {
            server: Some(server),
            provider,
        })
    }

    /// "pvAccess: N PVs on tcp 127.0.0.1:5075, udp 127.0.0.1:5076" for the start-up banner.
    pub fn describe(&self) -> String {
        match &self.server {
            Some(s) => format!(
                "pvAccess: {} PVs on tcp {}, udp {}",
                self.provider.len(),
                s.tcp_addr(),
                s.udp_addr()
            ),
            None => "pvAccess: off".into(),
        }
    }

    /// "pvAccess 812 PVs tcp 127.0.0.1:5075 udp 5076" for the banner.
    pub fn where_text(&self) -> String {
        match &self.server {
            Some(s) => format!(
                "pvAccess {} PVs tcp {}{} udp {}",
                self.provider.len(),
                s.tcp_addr(),
                crate::serve::taken_text(s.tcp_port_taken()),
                s.udp_addr().port()
            ),
            None => "pvAccess off".into(),
        }
    }

    /// Whom the server serves.
    pub fn listen(&self) -> Listen {
        self.server
            .as_ref()
            .map(|s| s.listen().clone())
            .unwrap_or_default()
    }

    pub fn provider(&self) -> &PvaProvider {
        &self.provider
    }

    /// The running server (its counters).
    pub fn server(&self) -> Option<&Server> {
        self.server.as_ref()
    }
}

impl Drop for PvaService {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}
