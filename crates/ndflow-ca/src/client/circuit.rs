//! One TCP circuit to a server: a writer task (requests, periodic ECHO) and a reader task that
//! routes replies to whoever waits for them (by cid, ioid or subscription id).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::ClientError;
use crate::header::{cmd, message, string_message, Header, MINOR_VERSION};

/// A reply (header and payload) or the error that replaced it.
pub(crate) type Reply = Result<(Header, Vec<u8>), ClientError>;

/// Called with each SEARCH reply a circuit receives (a name server answers searches sent on
/// its circuit) and the circuit's server address.
pub(crate) type SearchHook = Arc<dyn Fn(&Header, SocketAddr) + Send + Sync>;

/// Monitor updates waiting for the consumer; the oldest is dropped when full.
const SUB_QUEUE: usize = 64;

pub(crate) struct SubQueue {
    pub(crate) q: Mutex<(VecDeque<Reply>, bool)>,
    pub(crate) cv: Condvar,
}

impl SubQueue {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            q: Mutex::new((VecDeque::new(), false)),
            cv: Condvar::new(),
        })
    }

    fn push(&self, r: Reply) {
        let mut g = self.q.lock();
        if g.0.len() >= SUB_QUEUE {
            g.0.pop_front();
        }
        g.0.push_back(r);
        self.cv.notify_all();
    }

    fn close(&self) {
        let mut g = self.q.lock();
        g.1 = true;
        self.cv.notify_all();
    }
}

#[derive(Default)]
struct Routes {
    /// cid → CREATE_CHAN reply; ioid → READ/WRITE_NOTIFY reply.
    pending: HashMap<u32, oneshot::Sender<Reply>>,
    /// cid → rights from ACCESS_RIGHTS.
    rights: HashMap<u32, u32>,
    subs: HashMap<u32, Arc<SubQueue>>,
    /// sid → cid of channels disconnected by the server.
    dead_cids: Vec<u32>,
}

pub(crate) struct Circuit {
    pub(crate) addr: SocketAddr,
    tx: mpsc::UnboundedSender<Vec<u8>>,
    routes: Mutex<Routes>,
    alive: AtomicBool,
    on_search: SearchHook,
}

impl Circuit {
    pub(crate) async fn connect(
        addr: SocketAddr,
        host: &str,
        user: &str,
        max_payload: usize,
        on_search: SearchHook,
    ) -> Result<Arc<Circuit>, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        let _ = stream.set_nodelay(true);
        let (mut rd, mut wr) = stream.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let c = Arc::new(Circuit {
            addr,
            tx,
            routes: Mutex::new(Routes::default()),
            alive: AtomicBool::new(true),
            on_search,
        });
        c.send(message(
            Header::new(cmd::VERSION, 0, u32::from(MINOR_VERSION), 0, 0),
            &[],
        ));
        c.send(string_message(
            Header::new(cmd::HOST_NAME, 0, 0, 0, 0),
            host,
        ));
        c.send(string_message(
            Header::new(cmd::CLIENT_NAME, 0, 0, 0, 0),
            user,
        ));
        tokio::spawn(async move {
            let echo = message(Header::new(cmd::ECHO, 0, 0, 0, 0), &[]);
            loop {
                let m = tokio::select! {
                    // An empty message is `close()`: shut the connection down.
                    m = rx.recv() => match m { Some(m) if !m.is_empty() => m, _ => break },
                    // Keep-alive, so that servers and middleboxes see a live circuit.
                    _ = tokio::time::sleep(Duration::from_secs(20)) => echo.clone(),
                };
                if wr.write_all(&m).await.is_err() {
                    break;
                }
            }
        });
        let me = Arc::clone(&c);
        tokio::spawn(async move {
            let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
            'outer: loop {
                let mut start = 0;
                loop {
                    match Header::parse(&buf[start..], max_payload) {
                        Err(e) => {
                            tracing::warn!("CA circuit {}: {e}", me.addr);
                            break 'outer;
                        }
                        Ok(None) => break,
                        Ok(Some((h, hlen))) => {
                            let total = hlen + h.payload_size as usize;
                            if buf.len() - start < total {
                                break;
                            }
                            let payload = buf[start + hlen..start + total].to_vec();
                            start += total;
                            me.dispatch(h, payload);
                        }
                    }
                }
                buf.drain(..start);
                match rd.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            me.fail_all();
        });
        Ok(c)
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    pub(crate) fn send(&self, m: Vec<u8>) {
        if !m.is_empty() {
            let _ = self.tx.send(m);
        }
    }

    /// Close the connection (the server then closes its side and the reader ends).
    pub(crate) fn close(&self) {
        let _ = self.tx.send(Vec::new());
    }

    /// Where the reply routed by `id` (cid or ioid) will arrive; register before sending.
    pub(crate) fn reply_for(&self, id: u32) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        if self.is_alive() {
            self.routes.lock().pending.insert(id, tx);
        } else {
            let _ = tx.send(Err(ClientError::Disconnected));
        }
        rx
    }

    pub(crate) fn forget(&self, id: u32) {
        self.routes.lock().pending.remove(&id);
    }

    pub(crate) fn rights(&self, cid: u32) -> u32 {
        self.routes.lock().rights.get(&cid).copied().unwrap_or(3)
    }

    pub(crate) fn channel_dead(&self, cid: u32) -> bool {
        self.routes.lock().dead_cids.contains(&cid)
    }

    pub(crate) fn add_sub(&self, subid: u32, q: Arc<SubQueue>) {
        if self.is_alive() {
            self.routes.lock().subs.insert(subid, q);
        } else {
            q.close();
        }
    }

    pub(crate) fn remove_sub(&self, subid: u32) {
        self.routes.lock().subs.remove(&subid);
    }

    fn dispatch(&self, h: Header, payload: Vec<u8>) {
        if h.command == cmd::SEARCH {
            (self.on_search)(&h, self.addr);
            return;
        }
        let mut r = self.routes.lock();
        match h.command {
            cmd::ACCESS_RIGHTS => {
                r.rights.insert(h.p1, h.p2);
            }
            cmd::CREATE_CHAN | cmd::CREATE_CH_FAIL => {
                if let Some(tx) = r.pending.remove(&h.p1) {
                    let _ = tx.send(Ok((h, payload)));
                }
            }
            cmd::READ_NOTIFY | cmd::WRITE_NOTIFY => {
                if let Some(tx) = r.pending.remove(&h.p2) {
                    let _ = tx.send(Ok((h, payload)));
                }
            }
            cmd::EVENT_ADD => {
                if let Some(q) = r.subs.get(&h.p2) {
                    if h.payload_size == 0 {
                        // EVENT_CANCEL confirmed.
                        q.close();
                        r.subs.remove(&h.p2);
                    } else {
                        q.push(Ok((h, payload)));
                    }
                }
            }
            cmd::SERVER_DISCONN => r.dead_cids.push(h.p1),
            cmd::ERROR => {
                let Ok(Some((orig, hlen))) = Header::parse(&payload, usize::MAX) else {
                    return;
                };
                let text = crate::header::payload_str(payload.get(hlen..).unwrap_or(&[]));
                let err = || ClientError::Eca {
                    code: h.p2,
                    text: text.clone(),
                };
                match orig.command {
                    cmd::CREATE_CHAN => {
                        if let Some(tx) = r.pending.remove(&orig.p1) {
                            let _ = tx.send(Err(err()));
                        }
                    }
                    cmd::READ_NOTIFY | cmd::WRITE_NOTIFY => {
                        if let Some(tx) = r.pending.remove(&orig.p2) {
                            let _ = tx.send(Err(err()));
                        }
                    }
                    cmd::EVENT_ADD => {
                        if let Some(q) = r.subs.remove(&orig.p2) {
                            q.push(Err(err()));
                            q.close();
                        }
                    }
                    _ => tracing::debug!("CA server error {}: {text}", h.p2),
                }
            }
            _ => {}
        }
    }

    fn fail_all(&self) {
        self.alive.store(false, Ordering::Relaxed);
        let mut r = self.routes.lock();
        for (_, tx) in r.pending.drain() {
            let _ = tx.send(Err(ClientError::Disconnected));
        }
        for (_, q) in r.subs.drain() {
            q.push(Err(ClientError::Disconnected));
            q.close();
        }
    }
}
