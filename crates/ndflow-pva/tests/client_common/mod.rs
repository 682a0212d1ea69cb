//! Helpers for the client tests: loopback environment, free ports, and a Python pvAccess server
//! (p4p or pvapy) driven through stdin/stdout.
#![allow(dead_code)]

pub mod fake;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ndflow_pva::client::ClientConfig;

/// The workspace root (override with NDFLOW_WORKSPACE when the crate is built elsewhere).
pub fn workspace() -> PathBuf {
    std::env::var_os("NDFLOW_WORKSPACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The variables of scripts/loopback.env (everything on 127.0.0.1).
pub fn loopback_env() -> Option<HashMap<String, String>> {
    let text = std::fs::read_to_string(workspace().join("scripts/loopback.env")).ok()?;
    Some(
        text.lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect(),
    )
}

/// A TCP and a UDP port free on 127.0.0.1 right now.
pub fn free_ports() -> (u16, u16) {
    loop {
        let t = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let u = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let (tp, up) = (
            t.local_addr().expect("addr").port(),
            u.local_addr().expect("addr").port(),
        );
        // The server binds both protocols on each port; make sure the other one is free too.
        if TcpListener::bind(("127.0.0.1", up)).is_ok()
            && UdpSocket::bind(("127.0.0.1", tp)).is_ok()
        {
            return (tp, up);
        }
    }
}

/// The environment a test server gets: loopback.env plus its ports.
pub fn server_env(tcp: u16, udp: u16) -> Option<HashMap<String, String>> {
    let mut env = loopback_env()?;
    env.insert("EPICS_PVA_SERVER_PORT".into(), tcp.to_string());
    env.insert("EPICS_PVAS_SERVER_PORT".into(), tcp.to_string());
    env.insert("EPICS_PVA_BROADCAST_PORT".into(), udp.to_string());
    env.insert("EPICS_PVAS_BROADCAST_PORT".into(), udp.to_string());
    env.insert("EPICS_PVA_ADDR_LIST".into(), format!("127.0.0.1:{udp}"));
    Some(env)
}

/// Client configuration read from the same environment (exercises `from_lookup`), loopback only.
pub fn client_config(tcp: u16, udp: u16) -> ClientConfig {
    let env = server_env(tcp, udp).expect("loopback.env");
    let mut cfg = ClientConfig::from_lookup(|k| env.get(k).cloned()).expect("config");
    cfg.loopback_only = true;
    cfg.search_max_interval = Duration::from_millis(500);
    assert!(cfg
        .search_destinations()
        .iter()
        .all(|a| a.ip().is_loopback()));
    cfg
}

pub fn python() -> Option<PathBuf> {
    let p = workspace().join(".venv/bin/python");
    p.exists().then_some(p)
}

/// A Python server script of python/tests/pva_client_support/, killed (by its PID) on drop.
pub struct PyServer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    pub tcp: u16,
    pub udp: u16,
    pub prefix: String,
}

impl PyServer {
    /// Start `script` on fresh ports. The suite's set-up installs Python and its clients, so
    /// their absence fails the test rather than skipping it.
    pub fn start(script: &str, prefix: &str) -> Option<PyServer> {
        let (tcp, udp) = free_ports();
        Self::start_on(script, prefix, tcp, udp)
    }

    pub fn start_on(script: &str, prefix: &str, tcp: u16, udp: u16) -> Option<PyServer> {
        let Some(py) = python() else {
            panic!(
                "{} is missing: run ./scripts/setup.sh",
                workspace().join(".venv").display()
            );
        };
        let Some(env) = server_env(tcp, udp) else {
            panic!("scripts/loopback.env not found");
        };
        let script_path = workspace()
            .join("python/tests/pva_client_support")
            .join(script);
        let mut cmd = Command::new(py);
        cmd.arg(&script_path)
            .arg(prefix)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("EPICS_")) {
            cmd.env_remove(k);
        }
        cmd.envs(&env);
        let mut child = cmd.spawn().expect("spawn python server");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = PyServer {
            child,
            stdin,
            lines,
            tcp,
            udp,
            prefix: prefix.to_owned(),
        };
        let ready = s.read_line(Duration::from_secs(60));
        assert_eq!(ready.as_deref(), Some("READY"), "server did not start");
        Some(s)
    }

    fn read_line(&mut self, t: Duration) -> Option<String> {
        self.lines.recv_timeout(t).ok()
    }

    /// Send a command and return the text after "OK".
    pub fn cmd(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").expect("write to server");
        self.stdin.flush().expect("flush");
        let reply = self
            .read_line(Duration::from_secs(120))
            .unwrap_or_else(|| panic!("no reply to {line:?}"));
        let rest = reply
            .strip_prefix("OK")
            .unwrap_or_else(|| panic!("{line:?} -> {reply}"));
        rest.trim().to_owned()
    }

    pub fn pv(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    pub fn client_config(&self) -> ClientConfig {
        client_config(self.tcp, self.udp)
    }

    /// Ask the server to quit and wait for it (killing it after a while).
    pub fn stop(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Pixel value the server scripts generate: (x + 3y + 5 uid) % 100 (+0.25 for floats).
pub fn pixel(x: usize, y: usize, uid: i32) -> f64 {
    ((x + 3 * y + 5 * uid as usize) % 100) as f64
}
