//! pvAccess client: GET, PUT, GET_FIELD and MONITOR (with pipelining) behind a blocking API.
//!
//! The client owns a small Tokio runtime; every call hands an async operation to it and waits, so
//! callers need no runtime of their own (and may call from inside one, from a plain thread).
//! Inside, the pieces follow pvxs' split:
//!
//! - [`config`]: EPICS_PVA_* variables → [`ClientConfig`];
//! - `search`: UDP search (address list) and TCP search (name servers) with backoff;
//! - `connection`: one TCP connection per server shared by all channels — validation, byte order,
//!   echo, the receive type cache, and routing of replies to operations;
//! - `ctx`: connection sharing and name → server cache;
//! - `ops` / [`putvalue`]: one-shot GET / PUT / GET_FIELD;
//! - [`monitor`]: subscriptions with pipelined flow control and automatic re-subscription;
//! - [`proto`]: the client-side message bodies, pure and fuzzable.
//!
//! Received arrays are views of the received message buffer ([`crate::SharedBytes`]): a 32 MB
//! frame is read once from the socket into one buffer and never copied after.

pub mod config;
pub mod monitor;
pub mod proto;
pub mod putvalue;

mod connection;
mod ctx;
mod ops;
mod search;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::wire::{FieldDesc, Value};

pub use config::{AuthMethod, ClientConfig, ConfigError};
pub use monitor::{Monitor, MonitorEvent, MonitorOptions, MonitorStats};
pub use putvalue::PutValue;

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("timed out {0}")]
    Timeout(String),
    /// The server refused (its status message).
    #[error("server error: {0}")]
    Remote(String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("disconnected")]
    Disconnected,
    #[error("bad pvRequest: {0}")]
    Request(String),
    /// The value cannot be put into the channel's type (nothing was sent).
    #[error("cannot put: {0}")]
    Put(String),
    #[error("cannot encode: {0}")]
    Encode(String),
    /// The configuration forbids this address.
    #[error("refused: {0}")]
    Refused(String),
    #[error("closed: {0}")]
    Closed(String),
}

impl ClientError {
    /// Whether this is a search that no server answered in time (the channel was not found),
    /// as opposed to a server that was found but did not answer.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Timeout(m) if m.starts_with(search::SEARCHING))
    }
}

impl From<ConfigError> for ClientError {
    fn from(e: ConfigError) -> Self {
        ClientError::Config(e.to_string())
    }
}

/// Owns the runtime; the last owner (client or monitor) shuts it down without blocking.
pub(crate) struct RtGuard(Option<tokio::runtime::Runtime>);

impl RtGuard {
    pub(crate) fn handle(&self) -> Result<&tokio::runtime::Handle, ClientError> {
        self.0
            .as_ref()
            .map(|r| r.handle())
            .ok_or_else(|| ClientError::Closed("client runtime stopped".into()))
    }

    /// Run `fut` on the runtime and wait for it from this (any) thread.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T, ClientError>> + Send + 'static,
    ) -> Result<T, ClientError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle()?.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| ClientError::Closed("client runtime stopped".into()))?
    }
}

impl Drop for RtGuard {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A pvAccess client. Cheap to share by reference across threads; channels and connections are
/// shared between its operations.
pub struct Client {
    rt: Arc<RtGuard>,
    ctx: Arc<ctx::Ctx>,
}

impl Client {
    pub fn new(cfg: ClientConfig) -> Result<Client, ClientError> {
        // One worker: a connection's messages are decoded in order by one reader task anyway,
        // and a second worker only adds wake-ups (tokio wakes an idle worker to look for work
        // at every hand-off). Measured with `ndflow bench pva` on 2 cores: context switches per
        // 2 MiB frame went from ~6.5 to ~3.5 with one worker.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ndflow-pva-client")
            .enable_all()
            .build()?;
        let rt = Arc::new(RtGuard(Some(rt)));
        let ctx = rt.run(ctx::Ctx::start(cfg))?;
        Ok(Client { rt, ctx })
    }

    /// A client configured from the EPICS_PVA_* environment.
    pub fn from_env() -> Result<Client, ClientError> {
        Client::new(ClientConfig::from_env()?)
    }

    pub fn config(&self) -> &ClientConfig {
        &self.ctx.cfg
    }

    /// Read a channel. `request` is a pvRequest string ("" = every field, "field(value)").
    /// Returns the type and the value (fields the server did not send are defaults).
    pub fn get(
        &self,
        name: &str,
        request: &str,
        timeout: Duration,
    ) -> Result<(FieldDesc, Value), ClientError> {
        let (ctx, name, request) = (Arc::clone(&self.ctx), name.to_owned(), request.to_owned());
        let deadline = Instant::now() + timeout;
        self.rt
            .run(async move { ops::get(&ctx, &name, &request, deadline).await })
    }

    /// Write fields of a channel, e.g. `[("value", PutValue::Float(1.5))]` or an enum by choice
    /// `[("value", PutValue::Str("On".into()))]`. A refusal by the server is
    /// [`ClientError::Remote`] with its message.
    pub fn put(
        &self,
        name: &str,
        fields: &[(&str, PutValue)],
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let ctx = Arc::clone(&self.ctx);
        let name = name.to_owned();
        let fields: Vec<(String, PutValue)> = fields
            .iter()
            .map(|(p, v)| ((*p).to_owned(), v.clone()))
            .collect();
        let deadline = Instant::now() + timeout;
        self.rt
            .run(async move { ops::put(&ctx, &name, fields, deadline).await })
    }

    /// The channel's type (GET_FIELD).
    pub fn get_field(&self, name: &str, timeout: Duration) -> Result<FieldDesc, ClientError> {
        let (ctx, name) = (Arc::clone(&self.ctx), name.to_owned());
        let deadline = Instant::now() + timeout;
        self.rt
            .run(async move { ops::get_field(&ctx, &name, deadline).await })
    }

    /// Subscribe. Returns at once; the first event is `Connected` once the channel is found.
    pub fn monitor(&self, name: &str, opts: MonitorOptions) -> Result<Monitor, ClientError> {
        Monitor::start(Arc::clone(&self.ctx), Arc::clone(&self.rt), name, opts)
    }
}
