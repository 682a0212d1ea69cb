//! One monitor of 1024x1024 uint16 NTNDArray frames over loopback, posted as fast as the
//! poster can, in the three ways detector clients subscribe: latest-wins without a pipeline,
//! latest-wins with a pipelined window, and lossless with a pipelined window. It checks what
//! a client relies on under load, not speed (`ndflow bench pva` measures that):
//!
//! - every update that arrives is one posted frame, whole: its dimensions, uniqueId and every
//!   pixel of that frame's own pattern (a torn or stale buffer would show);
//! - updates arrive in posting order, and the last frame posted always arrives;
//! - the counters add up: frames received + updates squashed = frames posted, an update
//!   carries overrun bits exactly when something was squashed into it, and a lossless
//!   subscriber gets every frame with nothing squashed.

use std::time::Duration;

use crate::server_support;
use crate::server_support::{start, Raw};
use ndflow_pva::nt::ntndarray::{ntndarray_desc, NtNdArray};
use ndflow_pva::server::SharedPv;
use ndflow_pva::transport::{cmd, subcmd};
use ndflow_pva::{BitSet, NumArray, Value};

const NX: i32 = 1024;
const NY: i32 = 1024;
/// Frames posted per run: enough for the queues to fill and squash many times over.
const FRAMES: i32 = 60;

/// Frame `uid`'s pixels: a different pattern per frame, so a frame carrying another frame's
/// pixels (or a mix of two) fails the comparison.
fn pixels(uid: i32) -> Vec<u16> {
    (0..(NX * NY) as u32)
        .map(|i| i.wrapping_mul(7).wrapping_add(uid as u32 * 1031) as u16)
        .collect()
}

fn frame(uid: i32) -> Value {
    server_support::image_value(uid, &NumArray::from_slice(&pixels(uid)), NX, NY)
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    LatestWins,
    Pipelined,
    Lossless,
}

/// What one subscriber saw: the uniqueIds received after the initial update, and for each
/// whether it carried overrun bits.
struct Seen {
    uids: Vec<i32>,
    overrun: Vec<bool>,
}

fn check_frame(desc: &ndflow_pva::FieldDesc, v: &Value) -> i32 {
    let nt = NtNdArray::from_value(desc, v).expect("an NTNDArray");
    let dims: Vec<i32> = nt.dimension.iter().map(|d| d.size).collect();
    assert_eq!(dims, [NX, NY], "frame {} dimensions", nt.unique_id);
    let got = nt.value.as_ref().expect("a pixel array");
    let got = got.to_vec::<u16>().expect("uint16 pixels");
    assert!(
        got == pixels(nt.unique_id),
        "frame {}: pixels are not that frame's",
        nt.unique_id
    );
    nt.unique_id
}

fn run(mode: Mode) -> (Seen, SharedPv) {
    let pv = SharedPv::new(ntndarray_desc().clone(), frame(0));
    pv.set_lossless(matches!(mode, Mode::Lossless));
    let (server, _p) = start(vec![("T:img", pv.clone())]);
    let mut c = Raw::connect(server.tcp_addr());
    // Generous for a 2 MiB message on a loaded machine; a stalled server fails rather than hangs.
    c.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let sid = c.create("T:img").unwrap();
    let ioid = c.id();
    let window = 4;
    let desc = match mode {
        Mode::LatestWins => c.init(cmd::MONITOR, sid, ioid, subcmd::INIT, "", None),
        Mode::Pipelined | Mode::Lossless => c.init(
            cmd::MONITOR,
            sid,
            ioid,
            subcmd::INIT | subcmd::PIPELINE,
            "record[queueSize=4,pipeline=true]",
            Some(window),
        ),
    }
    .expect("monitor INIT accepted");
    c.start(sid, ioid);
    let pipelined = !matches!(mode, Mode::LatestWins);
    let mut unacked = 0;
    let mut ack = |c: &mut Raw| {
        // Acknowledge in pairs, as a client that processes frames in small batches does.
        unacked += 1;
        if pipelined && unacked >= 2 {
            c.ack(sid, ioid, unacked);
            unacked = 0;
        }
    };
    // The initial update (frame 0) arrives before anything is posted, so every post below
    // reaches a running subscription.
    let mut v = Value::default_for(&desc);
    c.monitor_update(ioid, &desc, &mut v);
    assert_eq!(check_frame(&desc, &v), 0);
    ack(&mut c);

    let poster = {
        let pv = pv.clone();
        std::thread::spawn(move || {
            for uid in 1..=FRAMES {
                pv.post(frame(uid), &BitSet::new())
                    .unwrap_or_else(|e| panic!("post of frame {uid}: {e:?}"));
            }
        })
    };
    let mut seen = Seen {
        uids: Vec::new(),
        overrun: Vec::new(),
    };
    while seen.uids.last() != Some(&FRAMES) {
        let (_, overrun) = c.monitor_update(ioid, &desc, &mut v);
        seen.uids.push(check_frame(&desc, &v));
        seen.overrun.push(!overrun.is_empty());
        ack(&mut c);
    }
    poster.join().expect("every post accepted");
    // Nothing follows the last frame.
    assert!(
        c.quiet_for(Duration::from_millis(200)),
        "{mode:?}: an update after the last frame"
    );
    (seen, pv)
}

fn check_counts(mode: Mode, seen: &Seen, pv: &SharedPv) {
    assert_eq!(pv.posts(), FRAMES as u64, "{mode:?}: posts counted");
    assert!(
        seen.uids.windows(2).all(|w| w[0] < w[1]),
        "{mode:?}: frames out of order or repeated: {:?}",
        seen.uids
    );
    assert_eq!(
        seen.uids.len() as u64 + pv.overruns(),
        FRAMES as u64,
        "{mode:?}: received {:?} + squashed {} != posted",
        seen.uids,
        pv.overruns()
    );
    assert_eq!(
        seen.overrun.iter().any(|&o| o),
        pv.overruns() > 0,
        "{mode:?}: overrun bits and the squash count disagree"
    );
}

#[test]
fn latest_wins_monitor_delivers_whole_frames_and_counts_the_rest() {
    let (seen, pv) = run(Mode::LatestWins);
    check_counts(Mode::LatestWins, &seen, &pv);
}

#[test]
fn pipelined_monitor_delivers_whole_frames_and_counts_the_rest() {
    let (seen, pv) = run(Mode::Pipelined);
    check_counts(Mode::Pipelined, &seen, &pv);
}

#[test]
fn lossless_monitor_delivers_every_frame() {
    let (seen, pv) = run(Mode::Lossless);
    check_counts(Mode::Lossless, &seen, &pv);
    assert_eq!(pv.overruns(), 0);
    assert_eq!(seen.uids, (1..=FRAMES).collect::<Vec<_>>());
    assert!(seen.overrun.iter().all(|&o| !o));
}
