//! A scripted pvAccess server on 127.0.0.1 (blocking std threads) for client tests: it can
//! segment its replies, define/reuse types through the 0xFD/0xFE cache as pvAccessCPP does,
//! stream pre-encoded monitor updates as fast as the socket takes them, or garble its replies.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ndflow_pva::{BitSet, ByteOrder, FieldDesc, Header, Reader, Value, Writer};

const LE: ByteOrder = ByteOrder::Little;

/// Body of one monitor update after `ioid, subcmd`: BitSet, partial value, overrun BitSet.
pub type UpdateFn = Arc<dyn Fn(usize) -> Option<Arc<Vec<u8>>> + Send + Sync>;

#[derive(Clone)]
pub struct Script {
    pub names: Vec<String>,
    pub desc: FieldDesc,
    pub value: Value,
    /// Monitor update `i` (after the first, which is `value` in full); `None` ends the stream.
    pub updates: UpdateFn,
    /// Split replies into segments of at most this many payload bytes.
    pub segment: Option<usize>,
    /// Send the data type as a 0xFD definition the first time and 0xFE afterwards.
    pub cache: bool,
    /// Mutate replies after validation with this seed (fuzzing).
    pub garble: Option<u64>,
    /// Byte order of everything the server sends (updates from `updates` must match).
    pub order: ByteOrder,
}

impl Script {
    pub fn new(name: &str, desc: FieldDesc, value: Value) -> Self {
        Script {
            names: vec![name.to_owned()],
            desc,
            value,
            updates: Arc::new(|_| None),
            segment: None,
            cache: false,
            garble: None,
            order: LE,
        }
    }
}

/// Encode a full-value update body (BitSet {0}, value, empty overrun), little-endian.
pub fn full_update(desc: &FieldDesc, v: &Value) -> Arc<Vec<u8>> {
    full_update_in(LE, desc, v)
}

pub fn full_update_in(order: ByteOrder, desc: &FieldDesc, v: &Value) -> Arc<Vec<u8>> {
    let mut w = Writer::new(order);
    let _ = w.bitset(&BitSet::from_bits(&[0]));
    let _ = v.encode(desc, &mut w);
    let _ = w.bitset(&BitSet::new());
    Arc::new(w.into_inner())
}

pub struct FakeServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    pub connections: Arc<AtomicU64>,
}

impl FakeServer {
    pub fn start(script: Script) -> FakeServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicU64::new(0));
        let (st, conns) = (Arc::clone(&stop), Arc::clone(&connections));
        l.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        n += 1;
                        conns.fetch_add(1, Ordering::Relaxed);
                        let mut sc = script.clone();
                        sc.garble = sc.garble.map(|g| g.wrapping_add(n.wrapping_mul(0x9E37)));
                        let port = addr.port();
                        let st2 = Arc::clone(&st);
                        std::thread::spawn(move || {
                            let _ = s.set_nonblocking(false);
                            let _ = serve(s, sc, port, st2);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FakeServer {
            addr,
            stop,
            connections,
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

struct Out {
    s: Mutex<TcpStream>,
    order: ByteOrder,
    segment: Option<usize>,
    rng: Mutex<Option<u64>>,
}

impl Out {
    fn send(&self, cmd: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut p = payload.to_vec();
        let mut garble_header = None;
        if let Some(state) = self.rng.lock().expect("rng").as_mut() {
            garble(state, &mut p);
            if next(state).is_multiple_of(16) {
                garble_header = Some(next(state));
            }
        }
        let mut s = self.s.lock().expect("stream");
        let chunks: Vec<&[u8]> = match self.segment {
            Some(n) if p.len() > n => p.chunks(n.max(1)).collect(),
            _ => vec![&p[..]],
        };
        let k = chunks.len();
        for (i, c) in chunks.into_iter().enumerate() {
            let mut h = Header::application(cmd, true, self.order, c.len() as u32);
            if k > 1 {
                h.flags |= match i {
                    0 => 0x10,
                    _ if i == k - 1 => 0x20,
                    _ => 0x30,
                };
            }
            let mut hb = h.encode();
            if let Some(g) = garble_header {
                hb[(g % 8) as usize] ^= (g >> 8) as u8 | 1;
            }
            s.write_all(&hb)?;
            s.write_all(c)?;
        }
        Ok(())
    }

    /// Header + ioid/subcmd prefix + a shared body, unsegmented (streaming bench path).
    fn send_update(&self, prefix: &[u8], body: &[u8]) -> std::io::Result<()> {
        if self.segment.is_some() || self.rng.lock().expect("rng").is_some() {
            let mut p = prefix.to_vec();
            p.extend_from_slice(body);
            return self.send(0x0D, &p);
        }
        let h = Header::application(0x0D, true, self.order, (prefix.len() + body.len()) as u32);
        let mut s = self.s.lock().expect("stream");
        s.write_all(&h.encode())?;
        s.write_all(prefix)?;
        s.write_all(body)
    }
}

fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn garble(state: &mut u64, p: &mut Vec<u8>) {
    match next(state) % 4 {
        0 => {
            let n = (next(state) as usize) % (p.len() + 1);
            p.truncate(n);
        }
        1 | 2 => {
            for _ in 0..1 + next(state) % 4 {
                if !p.is_empty() {
                    let i = (next(state) as usize) % p.len();
                    p[i] = next(state) as u8;
                }
            }
        }
        _ => {}
    }
}

fn body_in(order: ByteOrder, f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(order);
    f(&mut w);
    w.into_inner()
}

fn serve(s: TcpStream, script: Script, port: u16, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut rd = s.try_clone()?;
    let order = script.order;
    let body = |f: &dyn Fn(&mut Writer)| body_in(order, f);
    let out = Arc::new(Out {
        s: Mutex::new(s),
        order,
        segment: script.segment,
        rng: Mutex::new(None),
    });
    {
        let mut w = out.s.lock().expect("stream");
        w.write_all(&Header::control(2, true, order, 0).encode())?;
    }
    out.send(
        0x01,
        &body(&|w: &mut Writer| {
            w.i32(0x10000);
            w.i16(0x7fff);
            let _ = w.size(2);
            let _ = w.string("anonymous");
            let _ = w.string("ca");
        }),
    )?;
    let mut defined = false;
    let mut started = std::collections::HashSet::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut hb = [0u8; 8];
        rd.read_exact(&mut hb)?;
        let Ok(h) = Header::decode(&hb) else {
            return Ok(());
        };
        let mut p = vec![0u8; h.payload_len()];
        rd.read_exact(&mut p)?;
        let mut r = Reader::new(&p, h.byte_order());
        let bad = || std::io::Error::other("bad request");
        match h.command {
            0x01 => {
                out.send(0x09, &[0xff])?;
                *out.rng.lock().expect("rng") = script.garble;
            }
            0x02 => out.send(0x02, &p)?,
            0x03 => {
                let seq = r.u32().map_err(|_| bad())?;
                r.take(4 + 16 + 2).map_err(|_| bad())?;
                let np = r.count().map_err(|_| bad())?;
                for _ in 0..np {
                    r.string().map_err(|_| bad())?;
                }
                let n = r.u16().map_err(|_| bad())?;
                let mut ids = Vec::new();
                for _ in 0..n {
                    let id = r.u32().map_err(|_| bad())?;
                    let name = r.string().map_err(|_| bad())?;
                    if script.names.contains(&name) {
                        ids.push(id);
                    }
                }
                if !ids.is_empty() {
                    out.send(
                        0x04,
                        &body(&|w: &mut Writer| {
                            w.bytes(&[1; 12]);
                            w.u32(seq);
                            w.bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0]);
                            w.u16(port);
                            let _ = w.string("tcp");
                            w.bool(true);
                            w.u16(ids.len() as u16);
                            for id in &ids {
                                w.u32(*id);
                            }
                        }),
                    )?;
                }
            }
            0x07 => {
                r.u16().map_err(|_| bad())?;
                let cid = r.u32().map_err(|_| bad())?;
                let name = r.string().map_err(|_| bad())?;
                out.send(
                    0x07,
                    &body(&|w: &mut Writer| {
                        w.u32(cid);
                        w.u32(cid + 100);
                        if script.names.contains(&name) {
                            w.u8(0xff);
                        } else {
                            let _ = w.status(&ndflow_pva::Status::error("no such channel"));
                        }
                    }),
                )?;
            }
            0x0A | 0x0B | 0x0D => {
                let _sid = r.u32().map_err(|_| bad())?;
                let ioid = r.u32().map_err(|_| bad())?;
                let sub = r.u8().map_err(|_| bad())?;
                if sub & 0x08 != 0 {
                    let b = body(&|w: &mut Writer| {
                        w.u32(ioid);
                        w.u8(0x08);
                        w.u8(0xff);
                        if script.cache && defined {
                            w.u8(0xfe);
                            w.u16(1);
                        } else {
                            if script.cache {
                                w.u8(0xfd);
                                w.u16(1);
                            }
                            let _ = script.desc.encode(w);
                        }
                    });
                    defined = true;
                    out.send(h.command, &b)?;
                } else if h.command == 0x0B && sub & 0x40 == 0 {
                    // PUT exec: accept.
                    out.send(
                        0x0B,
                        &body(&|w: &mut Writer| {
                            w.u32(ioid);
                            w.u8(sub);
                            w.u8(0xff);
                        }),
                    )?;
                } else if h.command != 0x0D {
                    let b = body(&|w: &mut Writer| {
                        w.u32(ioid);
                        w.u8(sub);
                        w.u8(0xff);
                        let _ = w.bitset(&BitSet::from_bits(&[0]));
                        let _ = script.value.encode(&script.desc, w);
                    });
                    out.send(h.command, &b)?;
                } else if sub & 0x44 == 0x44 && sub & 0x80 == 0 && started.insert(ioid) {
                    // Clients may repeat START (ours does after each ack): start only once.
                    start_updates(Arc::clone(&out), &script, ioid, &stop);
                }
            }
            _ => {}
        }
    }
}

/// The first full value, then `script.updates(i)` until it says stop (on its own thread, so
/// the request loop keeps reading acks and destroys).
fn start_updates(out: Arc<Out>, script: &Script, ioid: u32, stop: &Arc<AtomicBool>) {
    let first = full_update_in(script.order, &script.desc, &script.value);
    let order = script.order;
    let updates = Arc::clone(&script.updates);
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let mut prefix = match order {
            ByteOrder::Little => ioid.to_le_bytes().to_vec(),
            ByteOrder::Big => ioid.to_be_bytes().to_vec(),
        };
        prefix.push(0);
        if out.send_update(&prefix, &first).is_err() {
            return;
        }
        let mut i = 0;
        while let Some(b) = updates(i) {
            if stop.load(Ordering::Relaxed) || out.send_update(&prefix, &b).is_err() {
                return;
            }
            i += 1;
        }
    });
}
