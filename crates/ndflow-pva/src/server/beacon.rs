//! BEACON: the server announces itself to its beacon destinations (see
//! `ServerConfig::beacon_destinations`: the list, plus the loopback group when serving this
//! host only or every interface's broadcast address when serving others). Beacons merely
//! speed up clients' re-search.

use std::sync::Arc;

use ndflow_net::DiscoverySocket;
use tokio::sync::watch;

use crate::transport::OutMessage;
use crate::wire::{ByteOrder, EncodeError};

use super::search::encode_addr;
use super::ServerShared;
use crate::transport::cmd::BEACON as CMD_BEACON;

/// One beacon datagram (big-endian, like pvxs's UDP traffic).
pub(crate) fn encode(srv: &ServerShared, sequence: u8) -> Result<Vec<u8>, EncodeError> {
    let msg = OutMessage::build(CMD_BEACON, true, ByteOrder::Big, |w| {
        w.bytes(&srv.guid);
        w.u8(0); // flags
        w.u8(sequence);
        w.u16(0); // change count
        w.bytes(&encode_addr(srv.tcp_addr.ip()));
        w.u16(srv.tcp_addr.port());
        w.string("tcp")?;
        w.null_size(); // server status: null type
        Ok(())
    })?;
    let mut out = msg.header.encode().to_vec();
    for p in &msg.parts {
        out.extend_from_slice(p);
    }
    Ok(out)
}

/// Send a beacon to every destination each period, until shutdown (the destinations are
/// looked up each time: interfaces come and go).
pub(crate) async fn beacon_loop(
    sock: Arc<DiscoverySocket>,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(srv.cfg.beacon_period);
    let mut seq: u8 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let addrs = srv.cfg.beacon_destinations();
        if addrs.is_empty() {
            continue;
        }
        if let Ok(bytes) = encode(&srv, seq) {
            for a in &addrs {
                let _ = sock.send_to(&bytes, *a).await;
            }
        }
        seq = seq.wrapping_add(1);
    }
}
