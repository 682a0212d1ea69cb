//! The fixed PV set of the `ca_serve` example and the interop tests: one PV of every native
//! type with metadata, a char waveform holding a path, a 1024×1024 Short image with a known
//! ramp, a slow (busy-like) PV, a read-only PV and one whose put handler fails.

use std::sync::Arc;
use std::time::Duration;

use crate::pv::{CaPv, PvMeta, StaticProvider};
use crate::value::{CaValue, NativeType};

/// Image waveform size (elements).
pub const IMAGE_LEN: usize = 1024 * 1024;

/// Element `k` of the image ramp.
pub fn image_ramp(k: usize) -> i16 {
    (k % 30_000) as i16
}

/// The text in the char waveform.
pub const PATH_TEXT: &str = "/data/images/run1";

fn meta(native: NativeType, record: &str, f: impl FnOnce(&mut PvMeta)) -> PvMeta {
    let mut m = PvMeta::scalar(native);
    m.record_type = record.into();
    f(&mut m);
    m
}

/// Every PV of the set, named `prefix` + suffix.
pub fn demo_pvs(prefix: &str) -> Vec<(String, CaPv)> {
    let mut v: Vec<(&str, CaPv)> = Vec::new();
    let double = meta(NativeType::Double, "ao", |m| {
        m.units = "mm".into();
        m.precision = 3;
        m.display_low = -10.0;
        m.display_high = 10.0;
        m.control_low = -5.0;
        m.control_high = 5.0;
        m.description = "A double".into();
    });
    v.push(("double", CaPv::new(double, CaValue::Double(vec![1.5]))));
    let float = meta(NativeType::Float, "ao", |m| {
        m.units = "V".into();
        m.precision = 2;
        m.display_high = 100.0;
    });
    v.push(("float", CaPv::new(float, CaValue::Float(vec![2.5]))));
    let long = meta(NativeType::Long, "longout", |m| {
        m.units = "counts".into();
        m.display_high = 1000.0;
    });
    v.push(("long", CaPv::new(long, CaValue::Long(vec![42]))));
    let short = meta(NativeType::Short, "longout", |m| m.display_high = 100.0);
    v.push(("short", CaPv::new(short, CaValue::Short(vec![7]))));
    let en = meta(NativeType::Enum, "mbbo", |m| {
        m.enum_strings = vec!["Off".into(), "On".into(), "Auto".into()];
    });
    v.push(("enum", CaPv::new(en, CaValue::Enum(1))));
    let st = meta(NativeType::String, "stringout", |_| {});
    v.push(("string", CaPv::new(st, CaValue::String("hello".into()))));
    let mut ch = PvMeta::array(NativeType::Char, 256);
    ch.description = "File path".into();
    let mut text = PATH_TEXT.as_bytes().to_vec();
    text.push(0);
    v.push(("char", CaPv::new(ch, CaValue::Char(text))));
    let mut dw = PvMeta::array(NativeType::Double, 100);
    dw.precision = 2;
    v.push((
        "doubles",
        CaPv::new(
            dw,
            CaValue::Double((0..10).map(|i| f64::from(i) * 0.5).collect()),
        ),
    ));
    let mut im = PvMeta::array(NativeType::Short, IMAGE_LEN);
    im.description = "1024x1024 ramp".into();
    let ramp: Vec<u8> = (0..IMAGE_LEN)
        .flat_map(|k| image_ramp(k).to_ne_bytes())
        .collect();
    v.push((
        "image",
        CaPv::new(
            im,
            CaValue::Shared {
                ty: NativeType::Short,
                bytes: Arc::new(ramp),
            },
        ),
    ));
    // Busy-like: the put completes (and the value changes) 500 ms later, from another thread.
    let slow = meta(NativeType::Double, "busy", |m| m.precision = 1);
    let slow = CaPv::new(slow, CaValue::Double(vec![0.0])).with_put_handler(|pv, value, done| {
        let pv = pv.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            pv.post(value);
            done.done();
        });
    });
    v.push(("slow", slow));
    let ro = meta(NativeType::Double, "ai", |m| {
        m.writable = false;
        m.precision = 2;
    });
    v.push(("ro", CaPv::new(ro, CaValue::Double(vec![3.25]))));
    let fail = meta(NativeType::Long, "longout", |_| {});
    let fail = CaPv::new(fail, CaValue::Long(vec![0]))
        .with_put_handler(|_, _, done| done.fail("refused by the handler".into()));
    v.push(("fail", fail));
    v.into_iter()
        .map(|(n, pv)| (format!("{prefix}{n}"), pv))
        .collect()
}

/// A provider serving [`demo_pvs`].
pub fn demo_provider(prefix: &str) -> Arc<StaticProvider> {
    let p = Arc::new(StaticProvider::new());
    for (n, pv) in demo_pvs(prefix) {
        p.add(n, pv);
    }
    p
}
