//! Our client against EPICS base's own server (RSRV, through pythonSoftIOC): starts
//! `.venv/bin/python tests/softioc_server.py` on free loopback ports and gets, puts and
//! monitors ao, longout, mbbo, waveforms of char and double, and stringout records.
//! Fails (naming the fix) when `.venv/bin/python -c 'import softioc'` fails: the set-up installs it.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ndflow_ca::{CaValue, Client, ClientConfig, ClientError, DbrType, Family, NativeType, Values};

const T: Duration = Duration::from_secs(5);

fn python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python")
}

fn free_port_pair() -> u16 {
    for _ in 0..50 {
        let Ok(t) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(a) = t.local_addr() else { continue };
        if UdpSocket::bind(("127.0.0.1", a.port())).is_ok() {
            return a.port();
        }
    }
    panic!("no free port");
}

fn free_udp() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("free udp port")
}

/// The loopback variables: the repository's one list, scripts/loopback.env.
fn loopback_env() -> Vec<(String, String)> {
    include_str!("../../../scripts/loopback.env")
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

struct Ioc {
    child: Child,
}

impl Drop for Ioc {
    fn drop(&mut self) {
        // Close stdin: the IOC exits; kill our own child if it does not.
        drop(self.child.stdin.take());
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_ioc(port: u16) -> Option<Ioc> {
    let py = python();
    match Command::new(&py).args(["-c", "import softioc"]).output() {
        Ok(o) if o.status.success() => {}
        // The suite's set-up installs softioc: its absence is a broken set-up, not a skip.
        Ok(o) => panic!(
            "{} -c 'import softioc' failed (run ./scripts/setup.sh): {}",
            py.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("cannot run {} (run ./scripts/setup.sh): {e}", py.display()),
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/softioc_server.py");
    let mut cmd = Command::new(&py);
    cmd.arg(script)
        .envs(loopback_env())
        .env("EPICS_CA_SERVER_PORT", port.to_string())
        .env("EPICS_CA_REPEATER_PORT", free_udp().to_string())
        .env("EPICS_PVAS_SERVER_PORT", "0")
        .env("EPICS_PVAS_BROADCAST_PORT", "0")
        .env("EPICS_PVA_SERVER_PORT", "0")
        .env("EPICS_PVA_BROADCAST_PORT", free_udp().to_string())
        .env_remove("EPICS_CAS_SERVER_PORT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn softioc");
    let stdout = child.stdout.take().expect("stdout");
    let ioc = Ioc { child };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.trim() == "READY" {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("softioc did not become ready");
    Some(ioc)
}

#[test]
fn client_against_rsrv() {
    let port = free_port_pair();
    let Some(mut ioc) = start_ioc(port) else {
        return;
    };
    let c = Client::new(ClientConfig::loopback(port)).unwrap();

    // ao: value, metadata, every DBR family and type.
    let r = c.get("SIOC:AO", T).unwrap();
    assert_eq!(r.value, CaValue::Double(vec![1.5]));
    assert!(r.stamp.is_some());
    let r = c
        .get_as("SIOC:AO", DbrType::new(Family::Ctrl, NativeType::Double), T)
        .unwrap();
    assert_eq!(r.info.units, "mm");
    assert_eq!(r.info.precision, 3);
    assert_eq!(
        (r.info.lower_ctrl_limit, r.info.upper_ctrl_limit),
        (-5.0, 5.0)
    );
    assert_eq!(
        (r.info.lower_disp_limit, r.info.upper_disp_limit),
        (-10.0, 10.0)
    );
    for code in 0..35u16 {
        let ty = DbrType::from_code(code).unwrap();
        let r = c.get_as("SIOC:AO", ty, T).unwrap();
        match &r.value {
            CaValue::String(s) => assert_eq!(s, "1.500", "{ty:?}"),
            v => assert!(
                (v.as_f64().unwrap()
                    - if code % 7 == 2 || code % 7 == 6 {
                        1.5
                    } else {
                        1.0
                    })
                .abs()
                    < 1e-6
                    || code % 7 == 3,
                "{ty:?}: {v:?}"
            ),
        }
    }
    let r = c.get_as("SIOC:AO", DbrType::ClassName, T).unwrap();
    assert_eq!(r.value, CaValue::String("ao".into()));
    assert_eq!(
        c.get("SIOC:AO.EGU", T).unwrap().value,
        CaValue::String("mm".into())
    );
    c.put("SIOC:AO", CaValue::Double(vec![2.5]), true, T)
        .unwrap();
    assert_eq!(
        c.get("SIOC:AO", T).unwrap().value,
        CaValue::Double(vec![2.5])
    );
    c.put("SIOC:AO", CaValue::String("3.25".into()), true, T)
        .unwrap();
    assert_eq!(
        c.get("SIOC:AO", T).unwrap().value,
        CaValue::Double(vec![3.25])
    );

    // longout + monitor.
    assert_eq!(
        c.get("SIOC:LONG", T).unwrap().value,
        CaValue::Long(vec![42])
    );
    let m = c.monitor("SIOC:LONG").unwrap();
    assert_eq!(m.recv_timeout(T).unwrap().value, CaValue::Long(vec![42]));
    c.put("SIOC:LONG", CaValue::Long(vec![43]), true, T)
        .unwrap();
    assert_eq!(m.recv_timeout(T).unwrap().value, CaValue::Long(vec![43]));
    c.put("SIOC:LONG", CaValue::Long(vec![44]), false, T)
        .unwrap();
    assert_eq!(m.recv_timeout(T).unwrap().value, CaValue::Long(vec![44]));
    drop(m);

    // mbbo: choices, put by string and by index.
    let r = c
        .get_as("SIOC:MBBO", DbrType::new(Family::Ctrl, NativeType::Enum), T)
        .unwrap();
    assert_eq!(r.info.enum_strings, vec!["Off", "On", "Auto"]);
    assert_eq!(r.value, CaValue::Enum(1));
    c.put("SIOC:MBBO", CaValue::String("Auto".into()), true, T)
        .unwrap();
    assert_eq!(c.get("SIOC:MBBO", T).unwrap().value, CaValue::Enum(2));
    c.put("SIOC:MBBO", CaValue::Enum(0), true, T).unwrap();
    let s = c
        .get_as(
            "SIOC:MBBO",
            DbrType::new(Family::Plain, NativeType::String),
            T,
        )
        .unwrap();
    assert_eq!(s.value, CaValue::String("Off".into()));

    // Char waveform holding a path.
    let info = c.info("SIOC:CHARWF", T).unwrap();
    assert_eq!((info.native, info.count), (NativeType::Char, 256));
    let r = c.get("SIOC:CHARWF", T).unwrap();
    let CaValue::Char(b) = &r.value else {
        panic!("{r:?}")
    };
    assert!(b.starts_with(b"/data/run1"), "{b:?}");
    let mut text = b"/tmp/x".to_vec();
    text.push(0);
    c.put("SIOC:CHARWF", CaValue::Char(text.clone()), true, T)
        .unwrap();
    let r = c.get("SIOC:CHARWF", T).unwrap();
    assert_eq!(r.value, CaValue::Char(text));

    // Double waveform: dynamic count.
    let r = c.get("SIOC:DBLWF", T).unwrap();
    assert_eq!(
        r.value,
        CaValue::Double((0..10).map(|i| f64::from(i) * 0.5).collect())
    );
    let big: Vec<f64> = (0..100).map(f64::from).collect();
    c.put("SIOC:DBLWF", CaValue::Double(big.clone()), true, T)
        .unwrap();
    assert_eq!(c.get("SIOC:DBLWF", T).unwrap().value, CaValue::Double(big));
    let r = c
        .get_count(
            "SIOC:DBLWF",
            DbrType::new(Family::Plain, NativeType::Long),
            3,
            T,
        )
        .unwrap();
    assert_eq!(r.values, Values::Long(vec![0, 1, 2]));

    // stringout.
    assert_eq!(
        c.get("SIOC:STR", T).unwrap().value,
        CaValue::String("hello".into())
    );
    c.put("SIOC:STR", CaValue::String("world".into()), true, T)
        .unwrap();
    assert_eq!(
        c.get("SIOC:STR", T).unwrap().value,
        CaValue::String("world".into())
    );
    // STS/GR/CTRL of a string: status, severity, value (RSRV's layout, as ours).
    let r = c
        .get_as(
            "SIOC:STR",
            DbrType::new(Family::Ctrl, NativeType::String),
            T,
        )
        .unwrap();
    assert_eq!(r.value, CaValue::String("world".into()));

    // Unknown names.
    assert!(matches!(
        c.get("SIOC:NOPE", Duration::from_millis(500)),
        Err(ClientError::NotFound(_))
    ));
    // The IOC is still ours and alive.
    assert!(ioc.child.try_wait().unwrap().is_none());
    let _ = ioc.child.stdin.as_mut().map(|s| s.flush());
}
