//! BEACON: the server announces itself to the configured beacon list only (never to
//! automatic broadcast addresses). Beacons merely speed up clients' re-search.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::UdpSocket;
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

/// Send a beacon to every address of the list each period, until shutdown.
pub(crate) async fn beacon_loop(
    sock: Arc<UdpSocket>,
    srv: Arc<ServerShared>,
    addrs: Vec<SocketAddr>,
    period: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    if addrs.is_empty() {
        return;
    }
    let mut tick = tokio::time::interval(period);
    let mut seq: u8 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if let Ok(bytes) = encode(&srv, seq) {
            for a in &addrs {
                let _ = sock.send_to(&bytes, a).await;
            }
        }
        seq = seq.wrapping_add(1);
    }
}
