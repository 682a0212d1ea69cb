//! A minimal blocking pvAccess client over a raw socket, built on the wire layer, for the
//! server tests. Loopback only.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use ndflow_pva::nt::ntndarray::{Dimension, NtNdArray};
use ndflow_pva::server::{Server, ServerConfig, SharedPv, StaticProvider};
use ndflow_pva::transport::{cmd, subcmd};
use ndflow_pva::wire::header::HEADER_LEN;
use ndflow_pva::{
    BitSet, ByteOrder, FieldDesc, Header, NumArray, Reader, ScalarType, Status, TypeCache, Value,
    Writer,
};

pub fn start(pvs: Vec<(&str, SharedPv)>) -> (Server, Arc<StaticProvider>) {
    let provider = Arc::new(StaticProvider::new());
    for (n, pv) in pvs {
        provider.add(n, pv);
    }
    let server = Server::start(ServerConfig::loopback_ephemeral(), provider.clone())
        .expect("server starts on loopback");
    (server, provider)
}

pub struct Raw {
    pub s: TcpStream,
    pub order: ByteOrder,
    pub cache: TypeCache,
    next_id: u32,
}

pub struct Msg {
    pub header: Header,
    pub payload: Vec<u8>,
}

impl Msg {
    pub fn reader(&self) -> Reader<'_> {
        Reader::new(&self.payload, self.header.byte_order())
    }
}

impl Raw {
    /// Connect and complete the handshake with `method` ("anonymous" or "ca").
    /// Connect without any handshake.
    pub fn connect_raw(addr: SocketAddr, order: ByteOrder) -> Raw {
        assert!(addr.ip().is_loopback());
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw {
            s,
            order,
            cache: TypeCache::new(),
            next_id: 100,
        }
    }

    pub fn connect_with(addr: SocketAddr, method: &str, order: ByteOrder) -> Raw {
        let mut c = Self::connect_raw(addr, order);
        let m = c.recv_any();
        assert!(m.header.is_control(), "SET_BYTE_ORDER first");
        assert!(m.header.is_from_server());
        let m = c.recv();
        assert_eq!(m.header.command, cmd::CONNECTION_VALIDATION);
        let mut r = m.reader();
        r.u32().unwrap();
        r.u16().unwrap();
        let n = r.count().unwrap();
        let methods: Vec<String> = (0..n).map(|_| r.string().unwrap()).collect();
        assert_eq!(methods, ["anonymous", "ca"]);
        let method = method.to_owned();
        c.send(cmd::CONNECTION_VALIDATION, |w| {
            w.u32(0x10000);
            w.u16(0x7fff);
            w.u16(0);
            w.string(&method).unwrap();
            if method == "ca" {
                let d = FieldDesc::structure(
                    "",
                    vec![
                        ("user", FieldDesc::Scalar(ScalarType::String)),
                        ("host", FieldDesc::Scalar(ScalarType::String)),
                    ],
                );
                d.encode(w).unwrap();
                Value::Structure(vec![
                    Value::String("me".into()),
                    Value::String("here".into()),
                ])
                .encode(&d, w)
                .unwrap();
            } else {
                w.null_size();
            }
        });
        let m = c.recv();
        assert_eq!(m.header.command, cmd::CONNECTION_VALIDATED);
        assert_eq!(m.reader().status().unwrap(), Status::ok());
        c
    }

    pub fn connect(addr: SocketAddr) -> Raw {
        Self::connect_with(addr, "ca", ByteOrder::Little)
    }

    pub fn id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    pub fn send(&mut self, command: u8, body: impl FnOnce(&mut Writer)) {
        let mut w = Writer::new(self.order);
        body(&mut w);
        let h = Header::application(command, false, self.order, w.len() as u32);
        let mut bytes = h.encode().to_vec();
        bytes.extend_from_slice(w.as_slice());
        self.s.write_all(&bytes).unwrap();
    }

    /// Next message, control messages included.
    pub fn try_recv_any(&mut self) -> std::io::Result<Msg> {
        let mut hb = [0u8; HEADER_LEN];
        self.s.read_exact(&mut hb)?;
        let header = Header::decode(&hb).expect("valid header from server");
        assert!(header.is_from_server(), "server flag on every message");
        let mut payload = vec![0u8; header.payload_len()];
        self.s.read_exact(&mut payload)?;
        Ok(Msg { header, payload })
    }

    pub fn recv_any(&mut self) -> Msg {
        self.try_recv_any().expect("message from server")
    }

    /// Next application message other than ECHO.
    pub fn recv(&mut self) -> Msg {
        loop {
            let m = self.recv_any();
            if !m.header.is_control() && m.header.command != cmd::ECHO {
                return m;
            }
        }
    }

    /// Create a channel; Ok(sid) or the error status.
    pub fn create(&mut self, name: &str) -> Result<u32, Status> {
        let cid = self.id();
        let name = name.to_owned();
        self.send(cmd::CREATE_CHANNEL, |w| {
            w.u16(1);
            w.u32(cid);
            w.string(&name).unwrap();
        });
        let m = self.recv();
        assert_eq!(m.header.command, cmd::CREATE_CHANNEL);
        let mut r = m.reader();
        assert_eq!(r.u32().unwrap(), cid);
        let sid = r.u32().unwrap();
        let st = r.status().unwrap();
        if st.is_success() {
            Ok(sid)
        } else {
            Err(st)
        }
    }

    /// Send an INIT for `command` with a pvRequest; returns the type or the error status.
    pub fn init(
        &mut self,
        command: u8,
        sid: u32,
        ioid: u32,
        sub: u8,
        request: &str,
        extra: Option<u32>,
    ) -> Result<FieldDesc, Status> {
        let (rd, rv) = ndflow_pva::request::build_str(request).unwrap();
        self.send(command, |w| {
            w.u32(sid);
            w.u32(ioid);
            w.u8(sub);
            rd.encode(w).unwrap();
            rv.encode(&rd, w).unwrap();
            if let Some(n) = extra {
                w.u32(n);
            }
        });
        let m = self.recv();
        assert_eq!(m.header.command, command);
        let mut r = m.reader();
        assert_eq!(r.u32().unwrap(), ioid);
        assert_eq!(
            r.u8().unwrap(),
            subcmd::INIT,
            "INIT replies carry 0x08 (sent 0x{sub:02x})"
        );
        let st = r.status().unwrap();
        if !st.is_success() {
            return Err(st);
        }
        Ok(FieldDesc::decode(&mut r, &mut self.cache).unwrap().unwrap())
    }

    /// GET exec; returns (changed, value decoded onto defaults).
    pub fn get_exec(&mut self, sid: u32, ioid: u32, desc: &FieldDesc) -> (BitSet, Value) {
        self.send(cmd::GET, |w| {
            w.u32(sid);
            w.u32(ioid);
            w.u8(0x00);
        });
        let m = self.recv();
        assert_eq!(m.header.command, cmd::GET);
        let mut r = m.reader();
        assert_eq!(r.u32().unwrap(), ioid);
        r.u8().unwrap();
        assert!(r.status().unwrap().is_success());
        let bits = r.bitset().unwrap();
        let mut v = Value::default_for(desc);
        v.decode_partial(desc, &bits, &mut r, &mut self.cache)
            .unwrap();
        assert!(r.is_empty());
        (bits, v)
    }

    /// PUT exec of `value` at `path`; returns the status.
    pub fn put_exec(
        &mut self,
        sid: u32,
        ioid: u32,
        desc: &FieldDesc,
        path: &str,
        value: Value,
    ) -> Status {
        let (bit, _) = desc.find(path).unwrap();
        let bits = BitSet::from_bits(&[bit]);
        let mut v = Value::default_for(desc);
        *v.field_mut(desc, path).unwrap() = value;
        let d = desc.clone();
        self.send(cmd::PUT, |w| {
            w.u32(sid);
            w.u32(ioid);
            w.u8(0x00);
            w.bitset(&bits).unwrap();
            v.encode_partial(&d, &bits, w).unwrap();
        });
        let m = self.recv();
        assert_eq!(m.header.command, cmd::PUT);
        let mut r = m.reader();
        assert_eq!(r.u32().unwrap(), ioid);
        r.u8().unwrap();
        r.status().unwrap()
    }

    pub fn monitor_ctl(&mut self, sid: u32, ioid: u32, sub: u8, ack: Option<u32>) {
        self.send(cmd::MONITOR, |w| {
            w.u32(sid);
            w.u32(ioid);
            w.u8(sub);
            if let Some(n) = ack {
                w.u32(n);
            }
        });
    }

    pub fn start(&mut self, sid: u32, ioid: u32) {
        self.monitor_ctl(sid, ioid, 0x44, None);
    }

    pub fn ack(&mut self, sid: u32, ioid: u32, n: u32) {
        self.monitor_ctl(sid, ioid, subcmd::PIPELINE, Some(n));
    }

    /// Next monitor update: (changed, value, overrun).
    pub fn monitor_update(
        &mut self,
        ioid: u32,
        desc: &FieldDesc,
        base: &mut Value,
    ) -> (BitSet, BitSet) {
        let m = self.recv();
        assert_eq!(m.header.command, cmd::MONITOR);
        let mut r = m.reader();
        assert_eq!(r.u32().unwrap(), ioid);
        assert_eq!(r.u8().unwrap(), 0x00);
        let bits = r.bitset().unwrap();
        base.decode_partial(desc, &bits, &mut r, &mut self.cache)
            .unwrap();
        let overrun = r.bitset().unwrap();
        assert!(r.is_empty());
        (bits, overrun)
    }

    /// Whether a message arrives within `t`.
    pub fn quiet_for(&mut self, t: Duration) -> bool {
        self.s.set_read_timeout(Some(t)).unwrap();
        let mut b = [0u8; 1];
        let r = self.s.peek(&mut b);
        self.s
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        r.is_err()
    }
}

/// The `value` field of an NTScalar value.
pub fn value_of<'a>(desc: &FieldDesc, v: &'a Value) -> &'a Value {
    v.field(desc, "value").unwrap()
}

/// An uncompressed `nx`×`ny` NTNDArray value of `pixels` with unique id `uid`.
pub fn image_value(uid: i32, pixels: &NumArray, nx: i32, ny: i32) -> Value {
    let dim = |size| Dimension {
        size,
        offset: 0,
        full_size: size,
        binning: 1,
        reverse: false,
    };
    let n = pixels.bytes().len() as i64;
    NtNdArray {
        value: Some(pixels.clone()),
        codec_name: String::new(),
        codec_parameters: None,
        compressed_size: n,
        uncompressed_size: n,
        dimension: vec![dim(nx), dim(ny)],
        unique_id: uid,
        data_time_stamp: Default::default(),
        attribute: vec![],
        alarm: (0, 0, String::new()),
        time_stamp: Default::default(),
    }
    .to_value()
}
