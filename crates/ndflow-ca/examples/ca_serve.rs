//! A test Channel Access server, for interop tests (python/tests/test_ca_server.py).
//!
//! Configuration comes from the EPICS_CAS_* / EPICS_CA_* variables (source
//! scripts/loopback.env first; EPICS_CA_SERVER_PORT=0 picks a free port). The first line on
//! stdout is `CA tcp=127.0.0.1:NNNN udp=127.0.0.1:NNNN`. The server exits on stdin EOF.
//!
//! PVs (prefix `--prefix`, default `CATEST:`), see `ndflow_ca::testing`:
//! - `double` (ao, PREC 3, EGU mm, display ±10, control ±5), `float`, `long`, `short`,
//!   `enum` (mbbo: Off On Auto), `string` (stringout "hello"),
//! - `char` (waveform of 256 chars holding "/data/images/run1"), `doubles` (waveform, NELM 100,
//!   10 elements), `image` (Short waveform of 1024*1024 elements, element k = k % 30000),
//! - `slow` (busy-like: a put completes 500 ms later), `ro` (read-only), `fail` (puts fail),
//! - `many:0` .. `many:<N-1>` (longout, N = `--many`, default 1000).
//!
//! stdin commands (one line each, answered with one line): `post NAME NUMBER` (posts a
//! double/long/short/float PV), `alarm NAME STATUS SEVERITY`.

use std::io::{BufRead, Write};

use ndflow_ca::testing::demo_provider;
use ndflow_ca::{CaPv, CaValue, NativeType, PvMeta, PvProvider, Server, ServerConfig};

fn main() {
    let mut prefix = "CATEST:".to_owned();
    let mut many = 1000usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--prefix" => prefix = args.next().unwrap_or_default(),
            "--many" => many = args.next().and_then(|v| v.parse().ok()).unwrap_or(1000),
            _ => {
                eprintln!("usage: ca_serve [--prefix P] [--many N]");
                std::process::exit(2);
            }
        }
    }
    let provider = demo_provider(&prefix);
    for i in 0..many {
        let pv = CaPv::new(
            PvMeta::scalar(NativeType::Long),
            CaValue::Long(vec![i as i32]),
        );
        provider.add(format!("{prefix}many:{i}"), pv);
    }
    let cfg = match ServerConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ca_serve: {e}");
            std::process::exit(2);
        }
    };
    let server = match Server::start(cfg, provider.clone()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ca_serve: {e}");
            std::process::exit(1);
        }
    };
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "CA tcp={} udp={}",
        server.tcp_addr(),
        server.udp_addr()
    );
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let w: Vec<&str> = line.split_whitespace().collect();
        let reply = match w.as_slice() {
            ["post", name, v] => match (provider.lookup(name), v.parse::<f64>()) {
                (Some(pv), Ok(x)) => {
                    let value = match pv.meta().native {
                        NativeType::Long => CaValue::Long(vec![x as i32]),
                        NativeType::Short => CaValue::Short(vec![x as i16]),
                        NativeType::Float => CaValue::Float(vec![x as f32]),
                        _ => CaValue::Double(vec![x]),
                    };
                    pv.post(value);
                    "ok".to_owned()
                }
                _ => "error".to_owned(),
            },
            ["alarm", name, st, sv] => match (provider.lookup(name), st.parse(), sv.parse()) {
                (Some(pv), Ok(st), Ok(sv)) => {
                    pv.set_alarm(st, sv);
                    "ok".to_owned()
                }
                _ => "error".to_owned(),
            },
            _ => "error".to_owned(),
        };
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
    server.stop();
}
