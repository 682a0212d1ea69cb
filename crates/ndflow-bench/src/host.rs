//! What the benchmarks set up on this machine, shared by all of them: child processes (`ndflow
//! run` IOCs, the Python references), free loopback ports for their servers, the environment
//! that keeps their EPICS traffic on 127.0.0.1, raw loopback TCP (the ceiling a network path
//! is compared with) and the process's CPU time.
//!
//! Every child is ours and is stopped through its [`std::process::Child`] (by PID) when its
//! [`Proc`] is dropped, so a bench that fails half-way leaves nothing running.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value as Json;

/// A path inside the repository (the Python references under `python/bench`, `.venv`).
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(relative)
}

/// The repository's virtualenv Python, where scripts/setup.sh installs what the references
/// import (p4p, h5py, hdf5plugin, bitshuffle, pyepics, pythonSoftIOC).
pub fn venv_python() -> PathBuf {
    repo_path(".venv/bin/python")
}

/// [`venv_python`] when it exists: the benches whose reference is optional run without it.
pub fn venv_python_if_present() -> Option<PathBuf> {
    Some(venv_python()).filter(|p| p.exists())
}

/// The `ndflow` binary running the bench: the IOCs a bench starts are `ndflow run` processes
/// of the very build being measured.
pub fn ndflow_exe() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("own executable: {e}"))
}

/// Process CPU time (user + system, all threads) in seconds, to the nanosecond; NaN when the
/// clock cannot be read.
pub fn process_cpu_seconds() -> f64 {
    use nix::time::{clock_gettime, ClockId};
    match clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID) {
        Ok(t) => t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9,
        Err(_) => f64::NAN,
    }
}

/// The EPICS environment of every child: servers and clients on 127.0.0.1 only, no
/// broadcasts, no automatic address lists, beacons to loopback (a bench must not reach, or
/// be reached from, the network it runs on); large CA arrays allowed, for frames. The
/// repository's one list of them, `scripts/loopback.env`, built into the binary.
pub fn loopback_vars() -> impl Iterator<Item = (&'static str, &'static str)> {
    include_str!("../../../scripts/loopback.env")
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
}

/// Puts [`loopback_vars`] on `cmd`.
pub fn loopback_env(cmd: &mut Command) -> &mut Command {
    cmd.envs(loopback_vars())
}

/// The Channel Access ports of a child: its server (or the server its clients look for) on
/// TCP and UDP `port`, beacons and the repeater on `repeater`.
pub fn ca_ports_env(cmd: &mut Command, port: u16, repeater: u16) -> &mut Command {
    let (p, r) = (port.to_string(), repeater.to_string());
    cmd.env("EPICS_CA_SERVER_PORT", &p)
        .env("EPICS_CAS_SERVER_PORT", &p)
        .env("EPICS_CA_REPEATER_PORT", &r)
        .env("EPICS_CAS_BEACON_PORT", &r)
}

/// The pvAccess ports of a child: its server on `bind`:`tcp` with searches on UDP `udp`, and
/// its clients looking only at `name_servers` (space-separated host:port; none: no name
/// servers, searches only).
pub fn pva_ports_env<'a>(
    cmd: &'a mut Command,
    bind: &str,
    tcp: u16,
    udp: u16,
    name_servers: Option<&str>,
) -> &'a mut Command {
    let (t, u) = (tcp.to_string(), udp.to_string());
    cmd.env("EPICS_PVAS_INTF_ADDR_LIST", bind)
        .env("EPICS_PVAS_SERVER_PORT", &t)
        .env("EPICS_PVA_SERVER_PORT", &t)
        .env("EPICS_PVAS_BROADCAST_PORT", &u)
        .env("EPICS_PVA_BROADCAST_PORT", &u)
        .env("EPICS_PVA_NAME_SERVERS", name_servers.unwrap_or(""))
}

/// `n` distinct free TCP ports and `n` distinct free UDP ports on 127.0.0.1. Every socket is
/// held until all are chosen: a port released and handed out again would put two servers on
/// one number, and the second would fall back to an ephemeral port nobody looks for.
pub fn free_ports(n: usize) -> Result<(Vec<u16>, Vec<u16>), String> {
    let err = |e: std::io::Error| format!("no free loopback port: {e}");
    let tcp: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let udp: Vec<UdpSocket> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let tcp = tcp
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let udp = udp
        .iter()
        .map(|s| s.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    Ok((tcp, udp))
}

/// A free UDP port on 127.0.0.1 (a CA repeater or beacon port).
pub fn free_udp_port() -> Result<u16, String> {
    Ok(free_ports(1)?.1[0])
}

/// Ports for a Channel Access server: one number free for both TCP and UDP (a CA server uses
/// the same for both) and a different free UDP port for its beacons and repeater.
pub fn free_ca_ports() -> Result<(u16, u16), String> {
    let err = |e: std::io::Error| format!("no free loopback port: {e}");
    for _ in 0..50 {
        let tcp = TcpListener::bind("127.0.0.1:0").map_err(err)?;
        let port = tcp.local_addr().map_err(err)?.port();
        let Ok(udp) = UdpSocket::bind(("127.0.0.1", port)) else {
            continue;
        };
        // Bound while both above are held, so it differs from `port`.
        let repeater = UdpSocket::bind("127.0.0.1:0").map_err(err)?;
        let repeater = repeater.local_addr().map_err(err)?.port();
        drop((tcp, udp));
        return Ok((port, repeater));
    }
    Err("no port free for both TCP and UDP on 127.0.0.1".into())
}

/// Raw loopback TCP, the ceiling of every network path: `frames` writes of `bytes` from a
/// thread, read into one reused buffer. Timed from the arrival of frame `warm` (at least 1)
/// to the last, like the paths it is compared with; returns those seconds, which cover
/// `frames - warm` frames.
pub fn raw_tcp(bytes: usize, frames: usize, warm: usize) -> Result<f64, String> {
    let warm = warm.max(1);
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let sender = std::thread::spawn(move || write_frames(TcpStream::connect(addr)?, bytes, frames));
    let (mut conn, _) = listener.accept().map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; bytes];
    let mut t0 = None;
    for i in 1..=frames {
        conn.read_exact(&mut buf).map_err(|e| e.to_string())?;
        if i == warm {
            t0 = Some(Instant::now());
        }
    }
    let secs = t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
    sender
        .join()
        .map_err(|_| "sender panicked".to_string())?
        .map_err(|e| e.to_string())?;
    Ok(secs)
}

/// Writes `frames` messages of `bytes` to `stream`, back to back.
pub fn write_frames(mut stream: TcpStream, bytes: usize, frames: usize) -> std::io::Result<()> {
    let data = vec![0x5au8; bytes];
    for _ in 0..frames {
        stream.write_all(&data)?;
    }
    Ok(())
}

/// The first connection to `listener` within `timeout` (a child that fails to connect must
/// not hang the bench).
pub fn accept_within(listener: &TcpListener, timeout: Duration) -> Result<TcpStream, String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(format!("nothing connected within {timeout:?}"));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// A child process of a bench.
///
/// Started [`Proc::piped`] it talks over pipes: stdout lines arrive on a channel (read them
/// with [`Proc::json_line`]) and stdin stays open until [`Proc::close_stdin`], which is how the
/// Python helpers are told to stop. Started [`Proc::logged`] (an `ndflow run` IOC) its output
/// goes to a log file that is read only when something fails.
pub struct Proc {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Option<Receiver<String>>,
    log: Option<PathBuf>,
    /// Sent by [`Proc::stop`] before the grace time: an IOC stops acquiring, drains and closes
    /// its files; without one the child is killed once the grace time is over.
    signal: Option<Signal>,
    grace: Duration,
}

impl Proc {
    /// Starts `cmd` with stdin and stdout piped; stderr goes to `log` when given (the Python
    /// helpers' tracebacks, shown in errors), else to ours.
    pub fn piped(name: &str, mut cmd: Command, log: Option<PathBuf>) -> Result<Proc, String> {
        let stderr = match &log {
            Some(path) => Stdio::from(
                File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?,
            ),
            None => Stdio::inherit(),
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        let stdin = child.stdin.take();
        let (tx, lines) = channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(l) = line else { break };
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Proc {
            name: name.into(),
            child,
            stdin,
            lines: Some(lines),
            log,
            signal: None,
            grace: Duration::ZERO,
        })
    }

    /// Starts `cmd` with stdout and stderr into `log` and no stdin.
    pub fn logged(name: &str, mut cmd: Command, log: &Path) -> Result<Proc, String> {
        let out = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start the {name}: {e}"))?;
        Ok(Proc {
            name: name.into(),
            child,
            stdin: None,
            lines: None,
            log: Some(log.to_path_buf()),
            signal: None,
            grace: Duration::ZERO,
        })
    }

    /// How [`Proc::stop`] (and dropping) ends the child: `signal` by PID, then up to `grace`
    /// for it to exit by itself before it is killed.
    pub fn stopped_by(mut self, signal: Signal, grace: Duration) -> Proc {
        self.signal = Some(signal);
        self.grace = grace;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's process id (to read its CPU time from /proc).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// An error with the exit status and the log's end once the child has exited.
    pub fn check(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!(
                "the {} exited ({status}):\n{}",
                self.name,
                self.log_tail(40)
            )),
            _ => Ok(()),
        }
    }

    /// The last `n` lines of the child's log, for an error message. Blank lines and libca's
    /// complaints about its caRepeater (a second repeater finding the port taken, harmless)
    /// are left out so that the lines that say what failed fit.
    pub fn log_tail(&self, n: usize) -> String {
        let Some(log) = &self.log else {
            return String::new();
        };
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.contains("caRepeater"))
            .collect();
        let tail = lines[lines.len().saturating_sub(n)..].join("\n");
        format!("--- {} ({}):\n{tail}", self.name, log.display())
    }

    /// Writes one line to the child's stdin.
    pub fn send_line(&mut self, line: &str) -> Result<(), String> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{}: stdin is closed", self.name))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("{} closed its input: {e}", self.name))
    }

    /// The next stdout line that parses as a JSON object (other lines are skipped).
    pub fn json_line(&mut self, timeout: Duration) -> Result<Json, String> {
        let Some(lines) = &self.lines else {
            return Err(format!("{}: its output is not piped", self.name));
        };
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(l) => {
                    if let Ok(j @ Json::Object(_)) = serde_json::from_str::<Json>(l.trim()) {
                        return Ok(j);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "{}: no result within {:.0} s\n{}",
                        self.name,
                        timeout.as_secs_f64(),
                        self.log_tail(8)
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(format!(
                        "{} exited ({status}) without a result\n{}",
                        self.name,
                        self.log_tail(8)
                    ));
                }
            }
        }
    }

    /// Closes stdin (the Python helpers' "stop").
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Closes stdin and waits up to `timeout` for the child to exit by itself, then kills it.
    pub fn finish(&mut self, timeout: Duration) {
        self.close_stdin();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Ends the child as [`Proc::stopped_by`] says (killed at once when it says nothing).
    pub fn stop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        if let Some(signal) = self.signal {
            use nix::sys::signal::kill;
            use nix::unistd::Pid;
            if let Ok(pid) = i32::try_from(self.child.id()) {
                let _ = kill(Pid::from_raw(pid), signal);
            }
        }
        self.finish(self.grace);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A long-running Python reference: started once, then one JSON request per line on stdin,
/// one JSON answer per line on stdout, so its interpreter start-up and imports are paid once
/// and a single repetition can be interleaved with ours. An answer with an `"error"` key is
/// returned as an error (the Python side reports its own exceptions that way); its stderr
/// goes to ours.
pub struct PyWorker {
    proc: Proc,
}

/// Longest wait for one answer (a reference file of thousands of frames takes seconds).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

impl PyWorker {
    /// Starts `python script args…`.
    pub fn start(python: &Path, script: &Path, args: &[&str]) -> Result<PyWorker, String> {
        let mut cmd = Command::new(python);
        // One OpenMP thread: the references are timed as one core, like ours.
        cmd.arg(script).args(args).env("OMP_NUM_THREADS", "1");
        loopback_env(&mut cmd);
        let name = format!("{} {}", python.display(), script.display());
        Ok(PyWorker {
            proc: Proc::piped(&name, cmd, None)?,
        })
    }

    /// Sends one request and waits for its answer.
    pub fn call(&mut self, request: &Json) -> Result<Json, String> {
        let line = request.to_string();
        self.proc.send_line(&line)?;
        let value = self
            .proc
            .json_line(ANSWER_TIMEOUT)
            .map_err(|e| format!("the reference, asked {line}: {e}"))?;
        if let Some(err) = value.get("error") {
            return Err(format!("the reference failed: {err}"));
        }
        Ok(value)
    }
}

impl Drop for PyWorker {
    fn drop(&mut self) {
        // Closing stdin ends the worker's loop; it is killed if it does not go within a second.
        self.proc.finish(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python() -> Option<PathBuf> {
        ["python3", "/usr/bin/python3"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| {
                Command::new(p)
                    .args(["-c", "pass"])
                    .status()
                    .is_ok_and(|s| s.success())
            })
    }

    #[test]
    fn a_python_worker_answers_line_by_line_and_reports_errors() {
        let Some(python) = python() else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("ndflow-pyworker-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let script = dir.join("echo.py");
        let body = "import json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n    \
                    out = {'error': 'bad'} if r.get('fail') else {'twice': r['x'] * 2}\n    \
                    print(json.dumps(out), flush=True)\n";
        assert!(std::fs::write(&script, body).is_ok());
        let mut w = match PyWorker::start(&python, &script, &[]) {
            Ok(w) => w,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            w.call(&serde_json::json!({"x": 21})).ok(),
            Some(serde_json::json!({"twice": 42}))
        );
        let err = w.call(&serde_json::json!({"fail": true}));
        assert!(matches!(err, Err(ref e) if e.contains("bad")), "{err:?}");
        assert_eq!(
            w.call(&serde_json::json!({"x": 1})).ok(),
            Some(serde_json::json!({"twice": 2}))
        );
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_logged_child_that_exits_is_reported_with_its_log() {
        let log = std::env::temp_dir().join(format!("ndflow-proc-{}.log", std::process::id()));
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo first; echo; echo it failed >&2; exit 3"]);
        let mut p = match Proc::logged("failing child", cmd, &log) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match p.check() {
                Err(e) => break e,
                Ok(()) if Instant::now() > deadline => panic!("the child did not exit"),
                Ok(()) => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        assert!(err.contains("failing child") && err.contains("3"), "{err}");
        assert!(err.contains("first\nit failed"), "{err}");
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn ca_ports_are_free_and_distinct() {
        let (port, repeater) = match free_ca_ports() {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert_ne!(port, repeater);
        assert!(TcpListener::bind(("127.0.0.1", port)).is_ok());
        assert!(UdpSocket::bind(("127.0.0.1", port)).is_ok());
    }

    #[test]
    fn raw_tcp_times_the_frames_after_the_warm_up() {
        let secs = match raw_tcp(1 << 16, 20, 2) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert!(secs > 0.0 && secs < 10.0, "{secs}");
    }
}
