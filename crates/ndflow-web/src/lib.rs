//! # ndflow-web: the live viewer an IOC serves
//!
//! An HTTP server on its own Tokio runtime ([`server`]) serves a page compiled into the
//! binary ([`assets`]: vanilla JavaScript, WebGL2) and streams the frames of `web` ports as
//! binary WebSocket messages: a fixed [`header`] and the pixels, decoded and binned on the
//! server ([`binning`]), latest-wins per client ([`slot`], [`ws`]). The page's plots and
//! controls read and write the IOC's parameters through a [`server::Backend`] that the IOC
//! implements over its PV directory, so the browser's puts meet the same checks and access
//! rules as Channel Access and pvAccess ones.

pub mod assets;
pub mod binning;
pub mod header;
pub mod hub;
pub mod server;
pub mod slot;
pub mod ws;

pub use header::FrameHeader;
pub use hub::{FrameHub, FrameSource};
pub use server::{set_this_thread_nice, Backend, WebServer};
