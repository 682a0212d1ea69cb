//! The client context: the searcher, one connection per server shared by all channels, and a
//! name → server cache so repeated operations on a channel skip the search.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::{timeout_at, Instant};

use super::config::ClientConfig;
use super::connection::{Connection, SearchSink};
use super::proto::{self, cmd};
use super::search::Searcher;
use super::ClientError;

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Connection>>>>;

pub(crate) struct Ctx {
    pub(crate) cfg: ClientConfig,
    pub(crate) searcher: Arc<Searcher>,
    conns: Mutex<HashMap<SocketAddr, Slot>>,
    resolved: Mutex<HashMap<String, SocketAddr>>,
}

/// A channel in use; dropping it releases the channel (the last user destroys it).
pub(crate) struct ChannelRef {
    pub(crate) conn: Arc<Connection>,
    pub(crate) sid: u32,
    name: String,
}

impl Drop for ChannelRef {
    fn drop(&mut self) {
        self.conn.release_channel(&self.name);
    }
}

impl Ctx {
    pub(crate) async fn start(cfg: ClientConfig) -> Result<Arc<Ctx>, ClientError> {
        let searcher = Searcher::start(&cfg).await?;
        let ctx = Arc::new(Ctx {
            cfg,
            searcher,
            conns: Mutex::new(HashMap::new()),
            resolved: Mutex::new(HashMap::new()),
        });
        if !ctx.cfg.name_server_destinations().is_empty() {
            let weak = Arc::downgrade(&ctx);
            ctx.searcher.set_tcp(Arc::new(move |names: &[(u32, &str)]| {
                if let Some(c) = weak.upgrade() {
                    c.tcp_search(names);
                }
            }));
        }
        Ok(ctx)
    }

    fn search_sink(&self) -> SearchSink {
        let s = Arc::clone(&self.searcher);
        Arc::new(move |r, peer| s.on_response(r, peer))
    }

    fn slot(&self, addr: SocketAddr) -> Slot {
        Arc::clone(self.conns.lock().entry(addr).or_default())
    }

    /// The live connection to `addr`, opening one if needed (concurrent callers share it).
    pub(crate) async fn connection(
        &self,
        addr: SocketAddr,
        deadline: Instant,
    ) -> Result<Arc<Connection>, ClientError> {
        let slot = self.slot(addr);
        let mut g = timeout_at(deadline, slot.lock())
            .await
            .map_err(|_| ClientError::Timeout(format!("connecting to {addr}")))?;
        if let Some(c) = g.as_ref().filter(|c| !c.is_dead()) {
            return Ok(Arc::clone(c));
        }
        let c = Connection::open(addr, &self.cfg, deadline, Some(self.search_sink())).await?;
        *g = Some(Arc::clone(&c));
        Ok(c)
    }

    /// Send a search over every name-server connection; connect those that are not up yet (the
    /// next search round uses them).
    fn tcp_search(self: &Arc<Self>, names: &[(u32, &str)]) {
        for ns in self.cfg.name_server_destinations() {
            let slot = self.slot(ns);
            let live = slot
                .try_lock()
                .ok()
                .and_then(|g| g.as_ref().filter(|c| !c.is_dead()).cloned());
            match live {
                Some(c) => {
                    let _ = c.send(cmd::SEARCH, |w| {
                        proto::encode_search(w, proto::SEARCH_SEQ, 0, 0, names)
                    });
                }
                None => {
                    let me = Arc::clone(self);
                    tokio::spawn(async move {
                        let deadline = Instant::now() + Duration::from_secs(5);
                        let _ = me.connection(ns, deadline).await;
                    });
                }
            }
        }
    }

    /// Find `name`, connect to its server and create (or share) the channel.
    pub(crate) async fn open_channel(
        &self,
        name: &str,
        deadline: Instant,
    ) -> Result<ChannelRef, ClientError> {
        loop {
            let cached = self.resolved.lock().get(name).copied();
            let addr = match cached {
                Some(a) => a,
                None => self.searcher.find(name, deadline).await?,
            };
            let res = async {
                let conn = self.connection(addr, deadline).await?;
                let sid = conn.acquire_channel(name, deadline).await?;
                Ok::<_, ClientError>(ChannelRef {
                    conn,
                    sid,
                    name: name.to_owned(),
                })
            }
            .await;
            match res {
                Ok(ch) => {
                    self.resolved.lock().insert(name.to_owned(), addr);
                    return Ok(ch);
                }
                Err(e) => {
                    self.resolved.lock().remove(name);
                    if matches!(e, ClientError::Timeout(_)) || Instant::now() >= deadline {
                        return Err(e);
                    }
                    if cached.is_some() {
                        // The server we remembered is gone or forgot the name: search again.
                        continue;
                    }
                    if matches!(e, ClientError::Remote(_) | ClientError::Refused(_)) {
                        return Err(e);
                    }
                    // The server answered the search but the connection failed (it may be
                    // restarting): back off a little and search again.
                    let pause = Instant::now() + Duration::from_millis(100);
                    tokio::time::sleep_until(pause.min(deadline)).await;
                }
            }
        }
    }
}
