//! MONITOR: start/stop, pipelining window and acks, squashing with overrun bits, field masks,
//! destroy — over a loopback socket, and deterministically through the handler harness.

use std::sync::Arc;
use std::time::Duration;

use crate::server_support::{start, value_of, Raw};
use ndflow_pva::nt::scalar;
use ndflow_pva::server::fuzz::Harness;
use ndflow_pva::server::{SharedPv, StaticProvider};
use ndflow_pva::transport::{cmd, subcmd};
use ndflow_pva::{
    BitSet, ByteOrder, FieldDesc, Header, Reader, ScalarType, TypeCache, Value, Writer,
};

fn i32_pv(x: i32) -> SharedPv {
    SharedPv::new(
        scalar::desc(ScalarType::I32),
        scalar::value(ScalarType::I32, Value::I32(x)),
    )
}

fn post_value(pv: &SharedPv, x: i32) {
    let d = pv.desc();
    let mut v = pv.current();
    let bits = scalar::set_value(&d, &mut v, Value::I32(x)).unwrap();
    pv.post(v, &bits).unwrap();
}

#[test]
fn monitor_start_updates_stop_restart_destroy() {
    let pv = i32_pv(5);
    let (server, _p) = start(vec![("T:m", pv.clone())]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:m").unwrap();
    let ioid = c.id();
    let desc = c
        .init(cmd::MONITOR, sid, ioid, subcmd::INIT, "", None)
        .unwrap();
    // Starts stopped: nothing until 0x44.
    post_value(&pv, 6);
    assert!(c.quiet_for(Duration::from_millis(100)));
    c.start(sid, ioid);
    let mut v = Value::default_for(&desc);
    let (bits, overrun) = c.monitor_update(ioid, &desc, &mut v);
    assert_eq!(
        bits,
        BitSet::from_bits(&[0]),
        "first update marks everything"
    );
    assert!(overrun.is_empty());
    assert_eq!(value_of(&desc, &v), &Value::I32(6));
    for x in 7..10 {
        post_value(&pv, x);
        let (bits, _) = c.monitor_update(ioid, &desc, &mut v);
        assert_eq!(bits, BitSet::from_bits(&[1]));
        assert_eq!(value_of(&desc, &v), &Value::I32(x));
    }
    // Stop: silence; restart: the current value again, in full.
    c.monitor_ctl(sid, ioid, subcmd::PROCESS, None);
    std::thread::sleep(Duration::from_millis(50));
    post_value(&pv, 10);
    assert!(c.quiet_for(Duration::from_millis(100)));
    c.start(sid, ioid);
    let (bits, _) = c.monitor_update(ioid, &desc, &mut v);
    assert_eq!(bits, BitSet::from_bits(&[0]));
    assert_eq!(value_of(&desc, &v), &Value::I32(10));
    assert_eq!(pv.subscribers(), 1);
    c.send(cmd::DESTROY_REQUEST, |w| {
        w.u32(sid);
        w.u32(ioid);
    });
    std::thread::sleep(Duration::from_millis(100));
    post_value(&pv, 11);
    assert!(c.quiet_for(Duration::from_millis(100)));
    assert_eq!(pv.subscribers(), 0);
    assert_eq!(server.stats().monitors, 0);
}

#[test]
fn pipeline_window_stops_sending_until_acked() {
    let pv = i32_pv(0);
    let (server, _p) = start(vec![("T:m", pv.clone())]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:m").unwrap();
    let ioid = c.id();
    let req = "record[queueSize=4,pipeline=true]";
    let desc = c
        .init(
            cmd::MONITOR,
            sid,
            ioid,
            subcmd::INIT | subcmd::PIPELINE,
            req,
            Some(2),
        )
        .unwrap();
    c.start(sid, ioid);
    let mut v = Value::default_for(&desc);
    c.monitor_update(ioid, &desc, &mut v); // initial: window 2 -> 1
    for x in 1..=8 {
        post_value(&pv, x);
    }
    c.monitor_update(ioid, &desc, &mut v); // window 1 -> 0
    assert!(
        c.quiet_for(Duration::from_millis(200)),
        "window exhausted: server must wait"
    );
    c.ack(sid, ioid, 100);
    let mut n = 2;
    let mut overruns = 0;
    while value_of(&desc, &v) != &Value::I32(8) {
        let (_, o) = c.monitor_update(ioid, &desc, &mut v);
        overruns += usize::from(!o.is_empty());
        n += 1;
    }
    // Queue of 4: of the 8 posts some were squashed, and that was reported.
    assert!(n <= 6, "{n} updates");
    assert!(overruns >= 1);
    assert!(pv.overruns() >= 1);
}

#[test]
fn monitor_field_mask_skips_unselected_changes() {
    let pv = i32_pv(1);
    let (server, _p) = start(vec![("T:m", pv.clone())]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:m").unwrap();
    let ioid = c.id();
    let desc = c
        .init(cmd::MONITOR, sid, ioid, subcmd::INIT, "field(value)", None)
        .unwrap();
    c.start(sid, ioid);
    let mut v = Value::default_for(&desc);
    let (bits, _) = c.monitor_update(ioid, &desc, &mut v);
    assert_eq!(
        bits,
        BitSet::from_bits(&[1]),
        "the mask turns the full update into value only"
    );
    let d = pv.desc();
    let mut cur = pv.current();
    let b = ndflow_pva::nt::set_alarm(&d, &mut cur, 2, 1, "HIHI").unwrap();
    pv.post(cur, &b).unwrap();
    assert!(
        c.quiet_for(Duration::from_millis(150)),
        "alarm-only change not sent"
    );
    post_value(&pv, 3);
    let (bits, _) = c.monitor_update(ioid, &desc, &mut v);
    assert_eq!(bits, BitSet::from_bits(&[1]));
    assert_eq!(value_of(&desc, &v), &Value::I32(3));
}

fn msg(command: u8, body: impl FnOnce(&mut Writer)) -> (Header, Vec<u8>) {
    let mut w = Writer::new(ByteOrder::Little);
    body(&mut w);
    (
        Header::application(command, false, ByteOrder::Little, w.len() as u32),
        w.into_inner(),
    )
}

/// Latest-wins squashing, deterministic: nobody drains the queue while we post.
#[test]
fn squash_into_last_entry_sets_overrun_bits() {
    let pv = i32_pv(0);
    let provider = Arc::new(StaticProvider::new());
    provider.add("T:m", pv.clone());
    let mut h = Harness::new(provider);
    h.greeting();
    let (hd, b) = msg(cmd::CONNECTION_VALIDATION, |w| {
        w.u32(1);
        w.u16(1);
        w.u16(0);
        w.string("anonymous").unwrap();
        w.null_size();
    });
    h.feed(hd, &b);
    assert!(h.is_validated());
    let (hd, b) = msg(cmd::CREATE_CHANNEL, |w| {
        w.u16(1);
        w.u32(9);
        w.string("T:m").unwrap();
    });
    let r = h.feed(hd, &b);
    let mut rd = Reader::new(&r[0].parts[0], ByteOrder::NATIVE);
    rd.u32().unwrap();
    let sid = rd.u32().unwrap();
    let (rq, rv) = ndflow_pva::request::build("", &[("queueSize", "2")]);
    let (hd, b) = msg(cmd::MONITOR, |w| {
        w.u32(sid);
        w.u32(1);
        w.u8(subcmd::INIT);
        rq.encode(w).unwrap();
        rv.encode(&rq, w).unwrap();
    });
    assert_eq!(h.feed(hd, &b).len(), 1);
    let (hd, b) = msg(cmd::MONITOR, |w| {
        w.u32(sid);
        w.u32(1);
        w.u8(0x44);
    });
    h.feed(hd, &b);
    for x in 1..=5 {
        post_value(&pv, x);
    }
    let out = h.drain_monitors();
    assert_eq!(
        out.len(),
        2,
        "queue of 2: the initial value and one squashed update"
    );
    let body: Vec<u8> = out[1]
        .parts
        .iter()
        .flat_map(|p| p.iter().copied())
        .collect();
    let mut r = Reader::new(&body, ByteOrder::NATIVE);
    assert_eq!(r.u32().unwrap(), 1);
    assert_eq!(r.u8().unwrap(), 0);
    let desc: FieldDesc = pv.desc();
    let bits = r.bitset().unwrap();
    let mut v = Value::default_for(&desc);
    v.decode_partial(&desc, &bits, &mut r, &mut TypeCache::new())
        .unwrap();
    assert_eq!(value_of(&desc, &v), &Value::I32(5));
    assert_eq!(
        r.bitset().unwrap(),
        BitSet::from_bits(&[1]),
        "value changed more than once"
    );
    assert_eq!(pv.overruns(), 4);
}
