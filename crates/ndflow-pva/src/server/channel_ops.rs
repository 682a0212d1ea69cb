//! Channel operations: GET, PUT (with the 0x40 fetch-current), MONITOR (INIT with
//! pipelining, start/stop/ack/destroy), GET_FIELD, and polite refusals of RPC/PROCESS/PUT_GET.
//!
//! Each handler reads `sid, ioid[, subcmd]` and answers `ioid, subcmd, Status[, ...]`. A request
//! for an unknown channel gets an error status; a late message for a destroyed request is
//! ignored ("late messages must be ignored, not treated as fatal").

use std::sync::Arc;

use crate::request::apply_mask;
use crate::transport::{cmd, subcmd};
use crate::wire::{BitSet, DecodeError, FieldDesc, Reader, Status};

use super::monitor::{MonitorParams, Subscription};
use super::put_reply::{ClientId, LateTarget, PutReply, ReplyState};
use super::session::{Op, OpKind, Session};
use super::shared_pv::{DeferredPutHandler, Handler, SharedPv};

/// Run a user callback that may block (a lossless post inside a PUT handler) without stalling
/// the runtime's other tasks.
fn run_blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Session {
    fn channel_pv(&self, sid: u32) -> Option<SharedPv> {
        self.channels.get(&sid).map(|c| c.pv.clone())
    }

    /// Common INIT: read the pvRequest, check channel and ioid, compute the field mask. On
    /// failure the error reply is queued and `None` returned.
    fn init_request(
        &mut self,
        command: u8,
        sid: u32,
        ioid: u32,
        r: &mut Reader<'_>,
    ) -> Result<Option<(SharedPv, Option<BitSet>, crate::request::PvRequest)>, DecodeError> {
        let req = self.read_request(r)?;
        let checked = self
            .channel_pv(sid)
            .ok_or_else(|| Status::error("no such channel"))
            .and_then(|pv| self.ioid_free(ioid).map(|()| pv))
            .and_then(|pv| {
                req.mask(&pv.desc_arc())
                    .map(|m| (pv, m))
                    .map_err(Status::error)
            });
        match checked {
            Ok((pv, mask)) => Ok(Some((pv, mask, req))),
            Err(st) => {
                self.status_reply(command, ioid, subcmd::INIT, &st);
                Ok(None)
            }
        }
    }

    /// INIT reply: subcommand 0x08 (also for a pipelined 0x88 INIT), status OK and the full
    /// type (the mask is applied to data, as pvxs does).
    fn init_reply(&mut self, command: u8, ioid: u32, desc: &FieldDesc) {
        self.reply(command, |w| {
            w.u32(ioid);
            w.u8(subcmd::INIT);
            w.status(&Status::ok())?;
            desc.encode(w)
        });
    }

    /// `ioid, subcmd, OK, changed, partial value` for the PV's current value, every selected
    /// field marked.
    fn data_reply(
        &mut self,
        command: u8,
        ioid: u32,
        sub: u8,
        pv: &SharedPv,
        mask: Option<&BitSet>,
    ) {
        let desc = pv.desc_arc();
        let value = pv.current();
        let changed = apply_mask(&desc, &BitSet::from_bits(&[0]), mask);
        self.reply(command, |w| {
            w.u32(ioid);
            w.u8(sub);
            w.status(&Status::ok())?;
            w.bitset(&changed)?;
            value.encode_partial(&desc, &changed, w)
        });
    }

    /// The open request `ioid` of the expected kind and its channel's PV, if both still exist.
    fn op_pv(&self, ioid: u32, want: fn(&OpKind) -> bool) -> Option<(SharedPv, Option<BitSet>)> {
        let op = self.ops.get(&ioid).filter(|op| want(&op.kind))?;
        Some((self.channel_pv(op.sid)?, op.mask.clone()))
    }

    pub(crate) fn get(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let sid = r.u32()?;
        let ioid = r.u32()?;
        let sub = r.u8()?;
        if sub & subcmd::INIT != 0 {
            if let Some((pv, mask, _)) = self.init_request(cmd::GET, sid, ioid, r)? {
                let desc = pv.desc_arc();
                self.ops.insert(
                    ioid,
                    Op {
                        sid,
                        kind: OpKind::Get,
                        mask,
                    },
                );
                self.init_reply(cmd::GET, ioid, &desc);
            }
            return Ok(());
        }
        // pvxs sends 0x00, pvAccessCPP 0x40 or 0x50 (get + destroy): all are a GET.
        if let Some((pv, mask)) = self.op_pv(ioid, |k| matches!(k, OpKind::Get)) {
            self.data_reply(cmd::GET, ioid, sub, &pv, mask.as_ref());
        }
        if sub & subcmd::DESTROY != 0 {
            self.remove_op(ioid);
        }
        Ok(())
    }

    pub(crate) fn put(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let sid = r.u32()?;
        let ioid = r.u32()?;
        let sub = r.u8()?;
        if sub & subcmd::INIT != 0 {
            if let Some((pv, mask, req)) = self.init_request(cmd::PUT, sid, ioid, r)? {
                let desc = pv.desc_arc();
                self.ops.insert(
                    ioid,
                    Op {
                        sid,
                        kind: OpKind::Put { block: req.block() },
                        mask,
                    },
                );
                self.init_reply(cmd::PUT, ioid, &desc);
            }
            return Ok(());
        }
        let Some((pv, mask)) = self.op_pv(ioid, |k| matches!(k, OpKind::Put { .. })) else {
            return Ok(());
        };
        let block = matches!(
            self.ops.get(&ioid).map(|o| &o.kind),
            Some(OpKind::Put { block: true })
        );
        if sub & subcmd::GET != 0 {
            // Fetch the current value (p4p does this before building the value to put).
            self.data_reply(cmd::PUT, ioid, sub, &pv, mask.as_ref());
        } else {
            let status = match self.decode_put(&pv, r, ioid, sub, block) {
                Ok(st) => st,
                Err(e) => {
                    self.srv.stats.malformed();
                    Some(Status::error(format!("malformed put data: {e}")))
                }
            };
            if let Some(status) = status {
                self.status_reply(cmd::PUT, ioid, sub, &status);
            }
        }
        if sub & subcmd::DESTROY != 0 {
            self.remove_op(ioid);
        }
        Ok(())
    }

    /// Apply the client's fields to a copy of the current value and hand it to the PV's PUT
    /// handler; its verdict is the status. `None`: a deferred handler answers later itself.
    fn decode_put(
        &mut self,
        pv: &SharedPv,
        r: &mut Reader<'_>,
        ioid: u32,
        sub: u8,
        block: bool,
    ) -> Result<Option<Status>, DecodeError> {
        let desc = pv.desc_arc();
        let bits = r.bitset()?;
        let mut value = pv.current();
        value.decode_partial(&desc, &bits, r, &mut self.cache)?;
        let handler = match pv.put_handler() {
            None => return Ok(Some(Status::error("read-only"))),
            Some(Handler::Now(h)) => h,
            Some(Handler::Deferred(h)) => {
                return Ok(self.deferred_put(pv, h.as_ref(), &value, &bits, (ioid, sub, block)))
            }
        };
        Ok(Some(match run_blocking(|| handler(pv, &value, &bits)) {
            Ok(()) => Status::ok(),
            Err(msg) => Status::error(msg),
        }))
    }

    /// Runs a deferred handler: an answer given before it returns is sent in line; otherwise the
    /// reply is left to the connection's writer when the handler's [`PutReply`] is answered.
    fn deferred_put(
        &mut self,
        pv: &SharedPv,
        handler: &DeferredPutHandler,
        value: &crate::wire::Value,
        bits: &BitSet,
        (ioid, sub, block): (u32, u8, bool),
    ) -> Option<Status> {
        let client = ClientId {
            peer: self.peer,
            user: self.user.clone(),
        };
        let (reply, state) = PutReply::new(block);
        run_blocking(|| handler(pv, value, bits, &client, reply));
        let mut g = state.lock();
        match &*g {
            ReplyState::Done(st) => Some(st.clone()),
            ReplyState::Waiting(_) => {
                if let Some((tx, rt)) = &self.late {
                    *g = ReplyState::Waiting(Some(LateTarget {
                        tx: tx.clone(),
                        rt: rt.clone(),
                        order: self.order,
                        ioid,
                        sub,
                    }));
                }
                None
            }
        }
    }

    pub(crate) fn monitor(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let sid = r.u32()?;
        let ioid = r.u32()?;
        let sub = r.u8()?;
        if sub & subcmd::INIT != 0 {
            let Some((pv, mask, req)) = self.init_request(cmd::MONITOR, sid, ioid, r)? else {
                return Ok(());
            };
            // 0x88 carries the client's initial window after the request.
            let nfree = if sub & subcmd::PIPELINE != 0 && r.remaining() >= 4 {
                Some(r.u32()?)
            } else {
                None
            };
            let queue_size = req.queue_size();
            let pipeline = req.pipeline();
            let params = MonitorParams {
                queue_size,
                pipeline,
                // pvxs < 1.4 clients may send 0; a window of the queue size never stalls.
                initial_window: nfree.filter(|&n| n > 0).unwrap_or(queue_size),
            };
            let desc = pv.desc_arc();
            let s = Arc::new(Subscription::new(
                ioid,
                Arc::clone(&desc),
                mask.clone(),
                params,
                Arc::clone(&self.wake),
                pv.room(),
                self.sock.clone(),
            ));
            pv.subscribe(Arc::clone(&s));
            self.monitors.lock().push(Arc::clone(&s));
            self.srv.stats.monitors(1);
            self.ops.insert(
                ioid,
                Op {
                    sid,
                    kind: OpKind::Monitor(s),
                    mask,
                },
            );
            self.init_reply(cmd::MONITOR, ioid, &desc);
            return Ok(());
        }
        let Some(op) = self.ops.get(&ioid) else {
            return Ok(());
        };
        let OpKind::Monitor(s) = &op.kind else {
            return Ok(());
        };
        let s = Arc::clone(s);
        if sub & subcmd::DESTROY != 0 {
            self.remove_op(ioid);
            return Ok(());
        }
        if sub & subcmd::PIPELINE != 0 {
            let n = r.u32()?;
            s.ack(n);
        }
        if sub & subcmd::PROCESS != 0 {
            if sub & subcmd::GET != 0 {
                if let Some(pv) = self.channel_pv(op.sid) {
                    pv.start(&s);
                }
            } else {
                s.stop();
            }
        }
        Ok(())
    }

    pub(crate) fn get_field(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let sid = r.u32()?;
        let ioid = r.u32()?;
        let sub_field = if r.is_empty() {
            String::new()
        } else {
            r.string()?
        };
        let found = match self.channel_pv(sid) {
            None => Err(Status::error("no such channel")),
            Some(pv) => {
                let desc = pv.desc_arc();
                desc.find(&sub_field)
                    .map(|(_, f)| f.clone())
                    .ok_or_else(|| Status::error(format!("no field {sub_field:?}")))
            }
        };
        // GET_FIELD replies carry no subcommand byte.
        match found {
            Ok(d) => self.reply(cmd::GET_FIELD, |w| {
                w.u32(ioid);
                w.status(&Status::ok())?;
                d.encode(w)
            }),
            Err(st) => self.reply(cmd::GET_FIELD, |w| {
                w.u32(ioid);
                w.status(&st)
            }),
        }
        Ok(())
    }

    /// RPC, PROCESS and PUT_GET: answered with an error status so clients fail fast.
    pub(crate) fn unsupported(
        &mut self,
        command: u8,
        r: &mut Reader<'_>,
    ) -> Result<(), DecodeError> {
        let _sid = r.u32()?;
        let ioid = r.u32()?;
        let sub = r.u8()?;
        let what = match command {
            cmd::RPC => "RPC",
            cmd::PROCESS => "PROCESS",
            _ => "PUT_GET",
        };
        self.status_reply(
            command,
            ioid,
            sub,
            &Status::error(format!("{what} not supported")),
        );
        Ok(())
    }
}
