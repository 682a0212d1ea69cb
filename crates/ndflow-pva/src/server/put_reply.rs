//! Deferred PUT completion: a handler may answer a PUT later, from any thread, when the
//! operation behind it has ended (areaDetector's busy records: Acquire returns when the
//! acquisition is done). A reply given before the handler returns goes out in line, in request
//! order; a later one is sent through the connection's writer.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::transport::{cmd, OutMessage};
use crate::wire::{ByteOrder, Status};

/// Who sent a request: the peer's address and the user of "ca" authentication (empty for
/// anonymous clients).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientId {
    pub peer: Option<SocketAddr>,
    pub user: String,
}

/// Where a late reply goes.
pub(crate) struct LateTarget {
    pub tx: mpsc::Sender<OutMessage>,
    pub rt: tokio::runtime::Handle,
    pub order: ByteOrder,
    pub ioid: u32,
    pub sub: u8,
}

pub(crate) enum ReplyState {
    Waiting(Option<LateTarget>),
    Done(Status),
}

/// The answer to one PUT: call [`PutReply::done`] exactly once. Dropping it unanswered fails
/// the PUT ("put not completed"), so a client is never left waiting for a lost handler.
pub struct PutReply {
    state: Option<Arc<Mutex<ReplyState>>>,
    block: bool,
}

impl PutReply {
    pub(crate) fn new(block: bool) -> (PutReply, Arc<Mutex<ReplyState>>) {
        let st = Arc::new(Mutex::new(ReplyState::Waiting(None)));
        (
            PutReply {
                state: Some(Arc::clone(&st)),
                block,
            },
            st,
        )
    }

    /// Whether the client asked to wait for the operation to end (`record[block=true]`);
    /// otherwise answer once the value has been applied.
    pub fn wants_completion(&self) -> bool {
        self.block
    }

    /// Completes the PUT: `Ok` → success status, `Err(message)` → error status with it.
    pub fn done(mut self, result: Result<(), String>) {
        let status = match result {
            Ok(()) => Status::ok(),
            Err(m) => Status::error(m),
        };
        if let Some(st) = self.state.take() {
            finish(&st, status);
        }
    }
}

impl Drop for PutReply {
    fn drop(&mut self) {
        if let Some(st) = self.state.take() {
            finish(&st, Status::error("put not completed"));
        }
    }
}

fn finish(st: &Mutex<ReplyState>, status: Status) {
    let mut g = st.lock();
    match std::mem::replace(&mut *g, ReplyState::Done(status.clone())) {
        ReplyState::Waiting(Some(t)) => {
            let built = OutMessage::build(cmd::PUT, true, t.order, |w| {
                w.u32(t.ioid);
                w.u8(t.sub);
                w.status(&status)
            });
            if let Ok(m) = built {
                let tx = t.tx;
                t.rt.spawn(async move {
                    // The connection may be gone; then nobody is waiting.
                    let _ = tx.send(m).await;
                });
            }
        }
        // Answered before the handler returned (sent in line), or a second answer: ignore.
        ReplyState::Waiting(None) | ReplyState::Done(_) => {}
    }
}
