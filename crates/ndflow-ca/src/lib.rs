//! EPICS Channel Access (protocol 4.13) for ndflow: a server and a blocking client, usable
//! without the pipeline.
//!
//! Channel Access is the protocol every EPICS control tool speaks (MEDM, caQtDM, CS-Studio,
//! pyepics, ophyd, caproto). Messages are a 16-byte big-endian header (24 bytes in the
//! extended form used for payloads over 16368 bytes or counts over 65535) and a payload padded
//! to 8 bytes; values travel as DBR structures: the bare value, or the value with alarm status
//! (STS), plus timestamp (TIME), plus display metadata (GR) or control limits (CTRL).
//!
//! The crate is split by concern:
//! * [`header`]: message framing, command numbers, ECA status codes;
//! * [`dbr`]: the DBR layouts (every family × type, with db_access.h's padding);
//! * [`value`]: [`CaValue`], typed [`Values`] and the conversions RSRV performs between types;
//! * [`pv`]: [`CaPv`] (a served PV: value, alarm, metadata, put handler), [`PvProvider`];
//! * [`server`]: the Tokio server (own runtime, sync API), with record fields (`.EGU`,
//!   `.PREC`, `.SEVR` ...) served from [`PvMeta`];
//! * [`client`]: a blocking client over Tokio (search, get, put, put-notify, monitor).
//!
//! Everything decoded from the network returns an error on malformed input instead of
//! panicking; sizes are bounded by EPICS_CA_MAX_ARRAY_BYTES. Servers serve this host only
//! unless EPICS_CAS_INTF_ADDR_LIST (or `ServerConfig::listen`) says otherwise, and broadcast
//! beacons only when serving other hosts.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ndflow_ca::{CaPv, CaValue, NativeType, PvMeta, Server, ServerConfig, StaticProvider};
//!
//! let provider = Arc::new(StaticProvider::new());
//! let pv = CaPv::new(PvMeta::scalar(NativeType::Double), CaValue::Double(vec![1.0]));
//! provider.add("TEST:x", pv.clone());
//! let server = Server::start(ServerConfig::from_env().unwrap(), provider).unwrap();
//! pv.post(CaValue::Double(vec![2.0]));
//! server.stop();
//! ```

pub mod client;
pub mod dbr;
pub mod header;
pub mod pv;
pub mod server;
pub mod value;

/// The PV set of the `ca_serve` example and the interop tests.
#[doc(hidden)]
pub mod testing;

pub use client::{Client, ClientConfig, ClientError, Reading, Subscription};
pub use dbr::{DbrInfo, DbrType, Family};
pub use pv::{Access, AlarmLimits, CaPv, PutCompletion, PvMeta, PvProvider, StaticProvider};
pub use server::{ConfigError, Server, ServerConfig};
pub use value::{CaValue, NativeType, Values};
