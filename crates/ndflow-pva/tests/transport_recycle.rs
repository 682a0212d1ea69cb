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
