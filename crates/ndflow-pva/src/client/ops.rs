//! One-shot operations: GET (INIT, then exec), PUT (INIT to learn the type, optionally fetch the
//! current value for enum choices, then send the changed fields) and GET_FIELD.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::{timeout_at, Instant};

use crate::request;
use crate::wire::{BitSet, FieldDesc, Value};

use super::connection::{Connection, OpMsg};
use super::ctx::{ChannelRef, Ctx};
use super::proto::{self, cmd, sub, OpEvent, OpKind};
use super::putvalue::{self, PutValue};
use super::ClientError;

/// Destroys the request on the server when the operation ends, however it ends.
pub(crate) struct OpGuard {
    pub(crate) conn: Arc<Connection>,
    pub(crate) ioid: u32,
}

impl Drop for OpGuard {
    fn drop(&mut self) {
        self.conn.remove_op(self.ioid, true);
    }
}

/// Next event for an operation, or why there is none.
pub(crate) async fn next_event(
    rx: &mut mpsc::UnboundedReceiver<OpMsg>,
    deadline: Instant,
    what: &str,
) -> Result<OpEvent, ClientError> {
    match timeout_at(deadline, rx.recv()).await {
        Err(_) => Err(ClientError::Timeout(what.to_owned())),
        Ok(None) | Ok(Some(OpMsg::Disconnected)) => Err(ClientError::Disconnected),
        Ok(Some(OpMsg::Failed(e))) => Err(ClientError::Protocol(e)),
        Ok(Some(OpMsg::Event(ev))) => Ok(ev),
    }
}

fn remote(status: &crate::wire::Status) -> ClientError {
    ClientError::Remote(status.message.clone())
}

/// Send INIT and wait for the type.
async fn init(
    ch: &ChannelRef,
    ioid: u32,
    kind: OpKind,
    req: &(FieldDesc, Value),
    rx: &mut mpsc::UnboundedReceiver<OpMsg>,
    deadline: Instant,
    name: &str,
) -> Result<Arc<FieldDesc>, ClientError> {
    ch.conn.send(kind.command(), |w| {
        proto::encode_op_init(w, ch.sid, ioid, sub::INIT, (&req.0, &req.1), None)
    })?;
    match next_event(rx, deadline, &format!("INIT of {name}")).await? {
        OpEvent::Init {
            status,
            desc: Some(d),
        } if status.is_success() => Ok(d),
        OpEvent::Init { status, .. } => Err(remote(&status)),
        other => Err(ClientError::Protocol(format!(
            "unexpected reply to INIT: {other:?}"
        ))),
    }
}

pub(crate) async fn get(
    ctx: &Ctx,
    name: &str,
    request: &str,
    deadline: Instant,
) -> Result<(FieldDesc, Value), ClientError> {
    let req = request::build_str(request).map_err(ClientError::Request)?;
    let ch = ctx.open_channel(name, deadline).await?;
    let (ioid, mut rx) = ch.conn.register_op(OpKind::Get, ch.sid)?;
    let _guard = OpGuard {
        conn: Arc::clone(&ch.conn),
        ioid,
    };
    let desc = init(&ch, ioid, OpKind::Get, &req, &mut rx, deadline, name).await?;
    ch.conn.send(cmd::GET, |w| {
        proto::encode_op_simple(w, ch.sid, ioid, sub::EXEC);
        Ok(())
    })?;
    match next_event(&mut rx, deadline, &format!("GET of {name}")).await? {
        OpEvent::Data { status, value, .. } if status.is_success() => {
            Ok((Arc::unwrap_or_clone(desc), value))
        }
        OpEvent::Data { status, .. } => Err(remote(&status)),
        other => Err(ClientError::Protocol(format!(
            "unexpected reply to GET: {other:?}"
        ))),
    }
}

pub(crate) async fn put(
    ctx: &Ctx,
    name: &str,
    fields: Vec<(String, PutValue)>,
    deadline: Instant,
) -> Result<(), ClientError> {
    let req = request::build("", &[]);
    let ch = ctx.open_channel(name, deadline).await?;
    let (ioid, mut rx) = ch.conn.register_op(OpKind::Put, ch.sid)?;
    let _guard = OpGuard {
        conn: Arc::clone(&ch.conn),
        ioid,
    };
    let desc = init(&ch, ioid, OpKind::Put, &req, &mut rx, deadline, name).await?;
    let mut value = Value::default_for(&desc);
    if fields
        .iter()
        .any(|(p, v)| putvalue::needs_current(&desc, p, v))
    {
        // Choice strings need the current choices: PUT's "get" subcommand fetches them.
        ch.conn.send(cmd::PUT, |w| {
            proto::encode_op_simple(w, ch.sid, ioid, sub::GET);
            Ok(())
        })?;
        match next_event(&mut rx, deadline, &format!("PUT (get) of {name}")).await? {
            OpEvent::Data {
                status, value: v, ..
            } if status.is_success() => value = v,
            OpEvent::Data { status, .. } => return Err(remote(&status)),
            other => {
                return Err(ClientError::Protocol(format!(
                    "unexpected reply to PUT get: {other:?}"
                )))
            }
        }
    }
    let mut changed = BitSet::new();
    for (path, v) in &fields {
        putvalue::apply(&desc, &mut value, path, v, &mut changed).map_err(ClientError::Put)?;
    }
    ch.conn.send(cmd::PUT, |w| {
        proto::encode_put(w, ch.sid, ioid, &desc, &value, &changed)
    })?;
    match next_event(&mut rx, deadline, &format!("PUT of {name}")).await? {
        OpEvent::Done { status } if status.is_success() => Ok(()),
        OpEvent::Done { status } => Err(remote(&status)),
        other => Err(ClientError::Protocol(format!(
            "unexpected reply to PUT: {other:?}"
        ))),
    }
}

/// The channel's type (GET_FIELD), without reading its value.
pub(crate) async fn get_field(
    ctx: &Ctx,
    name: &str,
    deadline: Instant,
) -> Result<FieldDesc, ClientError> {
    let ch = ctx.open_channel(name, deadline).await?;
    let (ioid, mut rx) = ch.conn.register_op(OpKind::GetField, ch.sid)?;
    // GET_FIELD has no DESTROY_REQUEST; just forget the id afterwards.
    let conn = Arc::clone(&ch.conn);
    let res = async {
        conn.send(cmd::GET_FIELD, |w| {
            proto::encode_get_field(w, ch.sid, ioid, "")
        })?;
        match next_event(&mut rx, deadline, &format!("GET_FIELD of {name}")).await? {
            OpEvent::Init {
                status,
                desc: Some(d),
            } if status.is_success() => Ok(Arc::unwrap_or_clone(d)),
            OpEvent::Init { status, .. } => Err(remote(&status)),
            other => Err(ClientError::Protocol(format!(
                "unexpected reply to GET_FIELD: {other:?}"
            ))),
        }
    }
    .await;
    conn.remove_op(ioid, false);
    res
}
