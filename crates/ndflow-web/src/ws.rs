//! One WebSocket client of a port's frames.
//!
//! Flow control is by credit: the server sends a frame only while the client holds a credit,
//! and the client returns one (`ack`) once it has drawn a frame; a client starts with
//! [`CREDITS`]. Between sends the newest frame wins ([`crate::slot`]): a slow client or a slow
//! link is sent fewer frames, never older ones, and the frame path never waits for it.
//!
//! Clients that take the same frame at the same size share one encoding (decode, bin, copy):
//! the source keeps the last message encoded, and each client sends it with its own skipped
//! count (the same bytes when the counts agree, else a copy).
//!
//! Client → server text messages: `ack` (one frame drawn), `max N` (bin to at most N pixels a
//! side; 0: the port's limit).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use tokio::time::Instant;

use crate::binning::encode_frame;
use crate::header::{set_skipped, skipped_of};
use crate::hub::FrameSource;
use crate::slot::skipped;

/// Frames a client may have unacknowledged.
pub const CREDITS: u32 = 2;

/// The side a client gets: what it asked for within the port's limit (0: none).
fn effective_side(asked: usize, limit: usize) -> usize {
    match (asked, limit) {
        (0, l) => l,
        (a, 0) => a,
        (a, l) => a.min(l),
    }
}

/// Serves frames of `src` to `socket` until the client leaves or the server stops.
pub async fn stream_frames(socket: WebSocket, src: Arc<FrameSource>, mut asked_side: usize) {
    let _client = src.client();
    let (mut tx, mut rx) = socket.split();
    let mut credits = CREDITS;
    let mut seen = 0u64;
    let mut next_at = Instant::now();
    loop {
        tokio::select! {
            msg = rx.next() => match msg {
                Some(Ok(Message::Text(t))) => match t.as_str().split_once(' ') {
                    _ if t.as_str() == "ack" => credits = (credits + 1).min(CREDITS),
                    Some(("max", n)) => asked_side = n.trim().parse().unwrap_or(asked_side),
                    _ => tracing::debug!("web client: unknown message {:?}", t.as_str()),
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            got = wait_frame(&src, seen, next_at), if credits > 0 => {
                let (seq, frame) = got;
                let missed = skipped(seen, seq);
                seen = seq;
                let side = effective_side(asked_side, src.max_side());
                let missed32 = missed.min(u32::MAX as u64) as u32;
                // One encoding per frame and size for all clients, each sent with this
                // client's own skipped count (shared as is when the counts agree).
                let encoded = src
                    .shared_encoding(seq, side, move || encode_frame(&frame, side, missed32))
                    .await;
                let bytes = match encoded {
                    Some(Ok(b)) => with_skipped(b, missed32),
                    Some(Err(e)) => {
                        tracing::debug!("web client: frame not sent: {e}");
                        continue;
                    }
                    None => break,
                };
                if tx.send(Message::Binary(bytes)).await.is_err() {
                    break;
                }
                src.count_sent(missed);
                credits -= 1;
                let rate = src.max_rate();
                next_at = Instant::now()
                    + if rate > 0.0 { Duration::from_secs_f64(1.0 / rate) } else { Duration::ZERO };
            }
        }
    }
}

/// `msg` with its `skipped` field set to `n`: the same bytes when it already says so, else a
/// copy.
fn with_skipped(msg: Bytes, n: u32) -> Bytes {
    if skipped_of(&msg) == Some(n) {
        return msg;
    }
    let mut own = msg.to_vec();
    set_skipped(&mut own, n);
    Bytes::from(own)
}

/// The newest frame after `seen`, no earlier than `at` (the rate limit).
async fn wait_frame(src: &FrameSource, seen: u64, at: Instant) -> (u64, Arc<ndflow_core::NDArray>) {
    tokio::time::sleep_until(at).await;
    src.slot.next(seen).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_limit_caps_what_a_client_asks() {
        assert_eq!(effective_side(0, 1024), 1024);
        assert_eq!(effective_side(512, 1024), 512);
        assert_eq!(effective_side(4096, 1024), 1024);
        assert_eq!(effective_side(300, 0), 300);
    }

    #[test]
    fn a_shared_message_gets_each_clients_skipped_count() {
        let mut m = Vec::new();
        crate::header::FrameHeader {
            unique_id: 1,
            time_stamp: 0.0,
            data_type: ndflow_core::DataType::UInt8,
            color_mode: ndflow_core::ColorMode::Mono,
            width: 1,
            height: 1,
            full_width: 1,
            full_height: 1,
            bin_x: 1,
            bin_y: 1,
            skipped: 2,
        }
        .encode(&mut m);
        m.push(42);
        let shared = Bytes::from(m);
        let same = with_skipped(shared.clone(), 2);
        assert_eq!(
            same.as_ptr(),
            shared.as_ptr(),
            "equal counts: the same bytes"
        );
        let other = with_skipped(shared.clone(), 5);
        assert_eq!(skipped_of(&other), Some(5));
        assert_eq!(
            skipped_of(&shared),
            Some(2),
            "the shared message is left as it was"
        );
        assert_eq!(other[48], 42);
    }
}
