//! The IOC's web viewer: the `web` port type ([`plugin`]) and the HTTP server started by
//! `ndflow run --web [ADDR:]PORT` or the config's `[web]` table ([`start`]), which serves
//! the page, the frames of every `web` port and the parameters ([`backend`]).

pub mod backend;
pub mod plugin;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use ndflow_runtime::Graph;
use ndflow_web::{FrameHub, WebServer};

use crate::config::Config;
use crate::pvdir::{IocPort, PvDirectory};

/// `PORT` or `ADDR:PORT` (an IPv4 address, or `[v6]:PORT`); without an address, 127.0.0.1:
/// this host only, like the EPICS servers.
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    t.parse::<SocketAddr>().map_err(|_| {
        format!("web address '{text}' must be PORT or ADDR:PORT (e.g. 8080 or 0.0.0.0:8080)")
    })
}

/// The config's `[web]` table: `port` (0: any free port) and `bind` (default 127.0.0.1).
/// The error names the key.
pub fn parse_table(t: &toml_edit::Table) -> Result<SocketAddr, (String, String)> {
    let mut port = None;
    let mut bind = IpAddr::V4(Ipv4Addr::LOCALHOST);
    for (k, v) in t.iter() {
        match k {
            "port" => {
                let p = v
                    .as_integer()
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or_else(|| (k.to_string(), "must be an integer 0..65535".to_string()))?;
                port = Some(p);
            }
            "bind" => {
                let text = v.as_str().unwrap_or_default();
                bind = text.parse().map_err(|_| {
                    (
                        k.to_string(),
                        format!("'{text}' is not an IP address (e.g. \"127.0.0.1\", \"0.0.0.0\")"),
                    )
                })?;
            }
            other => {
                return Err((
                    other.to_string(),
                    "unknown key (expected port, bind)".into(),
                ));
            }
        }
    }
    let port =
        port.ok_or_else(|| ("port".to_string(), "missing (e.g. port = 8080)".to_string()))?;
    Ok(SocketAddr::new(bind, port))
}

/// Starts the web server on `addr` over `dir` (the directory the EPICS servers use; `None`
/// when neither runs: one is built for the web server alone).
pub fn start(
    addr: SocketAddr,
    graph: &Arc<Graph>,
    cfg: &Config,
    dir: Option<Arc<PvDirectory>>,
    hub: Arc<FrameHub>,
    ioc: &[IocPort],
) -> Result<WebServer, String> {
    let port_prefixes: HashMap<String, String> = cfg.port_prefixes();
    let dir = match dir {
        Some(d) => d,
        None => {
            PvDirectory::build_with(graph, &cfg.prefix, &port_prefixes, cfg.access.clone(), ioc)?
        }
    };
    let ports = cfg
        .ports
        .iter()
        .map(|p| backend::WebPort {
            name: p.name.clone(),
            type_name: p.type_name.clone(),
            prefix: format!("{}{}", cfg.prefix, p.prefix),
            driver: crate::registry::is_driver(&p.type_name),
        })
        .collect();
    let backend = Arc::new(backend::DirBackend { dir, ports });
    WebServer::start(addr, hub, backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_this_host() {
        assert_eq!(parse_addr("8080").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(parse_addr("0.0.0.0:81").unwrap().to_string(), "0.0.0.0:81");
        assert!(parse_addr("localhost:x")
            .unwrap_err()
            .contains("localhost:x"));
    }

    #[test]
    fn the_web_table_names_a_bad_key() {
        let doc: toml_edit::Document<String> =
            "[web]\nport = 8080\nbind = \"0.0.0.0\"\n".parse().unwrap();
        let t = doc["web"].as_table().unwrap();
        assert_eq!(parse_table(t).unwrap().to_string(), "0.0.0.0:8080");
        let bad = |text: &str| {
            let doc: toml_edit::Document<String> = text.parse().unwrap();
            parse_table(doc["web"].as_table().unwrap()).unwrap_err()
        };
        assert_eq!(bad("[web]\nport = 70000\n").0, "port");
        assert_eq!(bad("[web]\nport = 1\nbind = \"here\"\n").0, "bind");
        assert_eq!(bad("[web]\nbind = \"::1\"\n").0, "port");
        assert_eq!(bad("[web]\nport = 1\nhost = 2\n").0, "host");
    }
}
