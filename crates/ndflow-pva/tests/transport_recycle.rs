//! Large payloads are read into recycled buffers: once every view of a message is dropped, the
//! next large message lands in the same memory (no new mapping, no page faults), while a
//! message still held keeps its bytes untouched.

use ndflow_pva::transport::MessageReader;
use ndflow_pva::{ByteOrder, Header};

fn app(payload: &[u8]) -> Vec<u8> {
    let h = Header::application(0x0D, true, ByteOrder::Little, payload.len() as u32);
    let mut v = h.encode().to_vec();
    v.extend_from_slice(payload);
    v
}

#[test]
fn dropped_payload_buffers_are_reused_and_held_ones_are_not() {
    let n = 1 << 20;
    let frames: Vec<Vec<u8>> = (0..4u8).map(|k| vec![k + 1; n]).collect();
    let stream: Vec<u8> = frames.iter().flat_map(|f| app(f)).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut r = MessageReader::new(&stream[..], 1 << 30);
        let first = r.next().await.unwrap().unwrap();
        let p1 = first.payload.as_ptr();
        assert_eq!(&first.payload[..], &frames[0][..]);
        // Held: the second message must not reuse the first one's memory.
        let second = r.next().await.unwrap().unwrap();
        assert_ne!(second.payload.as_ptr(), p1);
        assert_eq!(&first.payload[..], &frames[0][..], "held payload intact");
        assert_eq!(&second.payload[..], &frames[1][..]);
        // A sub-slice keeps the buffer alive too.
        let view = first.payload.slice(10, 100).unwrap();
        drop(first);
        let third = r.next().await.unwrap().unwrap();
        assert_ne!(third.payload.as_ptr(), p1, "a live view pins its buffer");
        assert_eq!(&third.payload[..], &frames[2][..]);
        assert!(view.iter().all(|&b| b == 1));
        drop(view);
        let fourth = r.next().await.unwrap().unwrap();
        assert_eq!(fourth.payload.as_ptr(), p1, "released buffer reused");
        assert_eq!(&fourth.payload[..], &frames[3][..]);
        assert!(r.next().await.unwrap().is_none());
    });
}

/// A reader over a real socket with its receive low-water mark raised during large payloads:
/// large messages (above, at and below the mark) arrive intact, and small messages sent while
/// the reader waits, the last one followed by nothing, are still delivered. (A mark left above
/// what remains of a message stalls this test.)
#[cfg(unix)]
#[test]
fn low_water_mark_saves_wake_ups_without_stalling_small_messages() {
    use std::io::Write;
    use std::time::Duration;

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let sizes = [9 << 20, 4 << 20, 300 << 10, 100, 5 << 20, 7];
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| (0..n).map(|i| (i * 7 + k) as u8).collect())
        .collect();
    let expected = frames.clone();
    let sender = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        for f in &frames {
            if f.len() < 1024 {
                // The reader is waiting for it by then.
                std::thread::sleep(Duration::from_millis(300));
            }
            // In pieces with pauses, so the reader catches up and waits mid-message.
            for piece in app(f).chunks(1 << 20) {
                s.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        // Keep the connection open: the last small message must arrive on its own.
        std::thread::sleep(Duration::from_secs(3));
    });
    let (conn, _) = listener.accept().unwrap();
    conn.set_nonblocking(true).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let stream = tokio::net::TcpStream::from_std(conn).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
        let mut r = MessageReader::new(stream, 1 << 30)
            .with_low_water(ndflow_pva::transport::tcp_low_water(fd));
        for (k, want) in expected.iter().enumerate() {
            let m = tokio::time::timeout(Duration::from_secs(2), r.next())
                .await
                .unwrap_or_else(|_| panic!("message {k} ({} bytes) stalled", want.len()))
                .unwrap()
                .unwrap();
            assert!(m.payload[..] == want[..], "message {k} differs");
        }
    });
    sender.join().unwrap();
}
