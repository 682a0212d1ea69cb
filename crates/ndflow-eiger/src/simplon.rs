//! A small blocking client for the DECTRIS SIMPLON REST API, version [`API_VERSION`].
//!
//! Every request opens its own TCP connection and asks the server to close it afterwards
//! (`Connection: close`): there is no pooled socket that can go stale between two calls, so
//! nothing is ever retried behind the caller's back (a retried `arm` or `trigger` would not be
//! harmless). SIMPLON traffic is a few requests per second at most, so the extra connects cost
//! nothing that matters.
//!
//! A [`Simplon`] holds only the address and the default timeout; it is `Clone + Send + Sync`,
//! and any number of threads may issue requests at the same time.
//!
//! The timeout of a call covers all of it: name resolution and connect, sending the request,
//! and reading the complete response. A server that accepts the connection but never answers
//! gives [`SimplonError::Timeout`]; one that cannot be reached gives [`SimplonError::Connect`].
//! Responses are read with Content-Length, chunked transfer coding, or up to the end of the
//! connection, and never beyond [`MAX_RESPONSE_BYTES`]. No response byte sequence makes this
//! module panic.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The SIMPLON API version this client speaks; it is part of every URL.
pub const API_VERSION: &str = "1.8.0";

/// Largest response body accepted (the SIMPLON answers are small JSON documents; flatfields and
/// pixel masks of a 16M detector, were they ever fetched as JSON, stay well below this).
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Largest response header block accepted.
const MAX_HEADER_BYTES: usize = 64 << 10;

/// Longest excerpt of an error body kept in [`SimplonError::Http`].
const BODY_EXCERPT_CHARS: usize = 300;

/// The SIMPLON subsystems, each with its own URL prefix `/{name}/api/1.8.0/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subsystem {
    Detector,
    Stream,
    FileWriter,
    Monitor,
    System,
}

impl Subsystem {
    /// The name used in URLs: `detector`, `stream`, `filewriter`, `monitor`, `system`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Subsystem::Detector => "detector",
            Subsystem::Stream => "stream",
            Subsystem::FileWriter => "filewriter",
            Subsystem::Monitor => "monitor",
            Subsystem::System => "system",
        }
    }
}

impl fmt::Display for Subsystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One configuration or status parameter as the server describes it.
///
/// SIMPLON answers a GET with a JSON object holding `value` and, where they apply,
/// `value_type`, `min`, `max`, `allowed_values`, `access_mode` and `unit`. Some keys answer with a
/// bare JSON value instead (a number, a string, an array); then that whole document is `value`
/// and every other field is `None`. Fields of an unexpected JSON type are left `None` too.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub value: Value,
    /// `"float"`, `"int"`, `"uint"`, `"bool"`, `"string"`, `"list"`, ...
    pub value_type: Option<String>,
    pub min: Option<Value>,
    pub max: Option<Value>,
    /// The enumeration, where the parameter has one. An empty list means "no restriction".
    pub allowed_values: Option<Vec<String>>,
    /// `"r"`, `"w"` or `"rw"`; SIMPLON says a missing access mode means `"rw"`.
    pub access_mode: Option<String>,
    pub unit: Option<String>,
}

impl Param {
    fn from_json(doc: Value) -> Param {
        match doc {
            Value::Object(mut map) if map.contains_key("value") => {
                let text = |v: Option<Value>| match v {
                    Some(Value::String(s)) => Some(s),
                    _ => None,
                };
                let allowed_values = match map.remove("allowed_values") {
                    Some(Value::Array(items)) => Some(
                        items
                            .into_iter()
                            .map(|item| match item {
                                Value::String(s) => s,
                                other => other.to_string(),
                            })
                            .collect(),
                    ),
                    _ => None,
                };
                Param {
                    value: map.remove("value").unwrap_or(Value::Null),
                    value_type: text(map.remove("value_type")),
                    min: map.remove("min"),
                    max: map.remove("max"),
                    allowed_values,
                    access_mode: text(map.remove("access_mode")),
                    unit: text(map.remove("unit")),
                }
            }
            other => Param {
                value: other,
                value_type: None,
                min: None,
                max: None,
                allowed_values: None,
                access_mode: None,
                unit: None,
            },
        }
    }
}

/// What went wrong with one request. Every variant but `Address` names the request, e.g.
/// `"PUT detector/config/count_time"`, and its `Display` text starts with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimplonError {
    /// [`Simplon::new`] was given an address it cannot use.
    #[error("invalid SIMPLON address {addr:?}: {reason}")]
    Address { addr: String, reason: String },
    /// The server could not be reached: the name did not resolve, the connection was refused,
    /// or connecting took longer than the timeout.
    #[error("{request}: cannot connect to {addr}: {reason}")]
    Connect {
        request: String,
        addr: String,
        reason: String,
    },
    /// Connected, but the complete response did not arrive within the timeout.
    #[error("{request}: no complete response within {timeout:?}")]
    Timeout { request: String, timeout: Duration },
    /// The server answered with a status outside 200–299. `body` is the start of its body.
    #[error("{request}: HTTP {status}: {body}")]
    Http {
        request: String,
        status: u16,
        body: String,
    },
    /// The response was not HTTP, was cut short, was too large, or its body was not what the
    /// request expects.
    #[error("{request}: bad response: {reason}")]
    BadResponse { request: String, reason: String },
}

impl SimplonError {
    /// The request this error belongs to (`""` for [`SimplonError::Address`]).
    pub fn request(&self) -> &str {
        match self {
            SimplonError::Address { .. } => "",
            SimplonError::Connect { request, .. }
            | SimplonError::Timeout { request, .. }
            | SimplonError::Http { request, .. }
            | SimplonError::BadResponse { request, .. } => request,
        }
    }
}

/// A SIMPLON server address and default timeout. Cheap to clone; safe to share between threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Simplon {
    /// Host name or address literal, without IPv6 brackets.
    host: String,
    port: u16,
    /// The value of the `Host:` header (`host` or `host:port`, brackets kept for IPv6).
    host_header: String,
    timeout: Duration,
}

impl Simplon {
    /// Checks `addr` ("host", "host:port", "[v6]:port", optionally prefixed by `http://`; the
    /// port defaults to 80) and remembers `timeout` as the limit of each call. Does no I/O: the
    /// name is resolved at each request, so a detector that changes address is followed.
    pub fn new(addr: &str, timeout: Duration) -> Result<Simplon, SimplonError> {
        let bad = |reason: &str| SimplonError::Address {
            addr: addr.to_string(),
            reason: reason.to_string(),
        };
        if timeout.is_zero() {
            return Err(bad("the timeout must be longer than zero"));
        }
        let rest = addr.trim();
        let rest = rest.strip_prefix("http://").unwrap_or(rest);
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err(bad("empty host"));
        }
        if rest
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '?' | '#' | '@'))
        {
            return Err(bad("the address must be host[:port] only"));
        }
        let (host, port_text, bracketed) = if let Some(after) = rest.strip_prefix('[') {
            let Some((inside, tail)) = after.split_once(']') else {
                return Err(bad("unclosed '[' in IPv6 address"));
            };
            let port = match tail {
                "" => None,
                t => match t.strip_prefix(':') {
                    Some(p) => Some(p),
                    None => return Err(bad("unexpected text after ']'")),
                },
            };
            (inside, port, true)
        } else {
            match rest.split_once(':') {
                Some((h, p)) if !p.contains(':') => (h, Some(p), false),
                Some(_) => {
                    return Err(bad(
                        "IPv6 addresses must be written in brackets, e.g. [::1]:80",
                    ));
                }
                None => (rest, None, false),
            }
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        if bracketed && host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad("not an IPv6 address inside '[...]'"));
        }
        let port = match port_text {
            None => 80,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => return Err(bad("the port must be a number from 1 to 65535")),
                Ok(n) => n,
            },
        };
        let host_for_header = if bracketed {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        let host_header = if port == 80 {
            host_for_header
        } else {
            format!("{host_for_header}:{port}")
        };
        Ok(Simplon {
            host: host.to_string(),
            port,
            host_header,
            timeout,
        })
    }

    /// The address as given to the server in `Host:` (`host` or `host:port`).
    pub fn addr(&self) -> &str {
        &self.host_header
    }

    /// The default limit of each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `GET /detector/api/version`: the API version the server speaks (e.g. `"1.8.0"`;
    /// EIGER1 systems may say `"1.6.0"`, whose URLs and units differ in places).
    pub fn api_version(&self) -> Result<String, SimplonError> {
        let request = "GET detector/api/version".to_string();
        let body = self.exchange("GET", "/detector/api/version", None, self.timeout, &request)?;
        let doc = parse_json(&body, &request)?;
        match Param::from_json(doc).value {
            Value::String(s) => Ok(s),
            other => Err(SimplonError::BadResponse {
                request,
                reason: format!("expected a version string, got {other}"),
            }),
        }
    }

    /// `GET /{sub}/api/1.8.0/config/{key}`.
    pub fn get_config(&self, sub: Subsystem, key: &str) -> Result<Param, SimplonError> {
        self.get(sub, "config", key)
    }

    /// `GET /{sub}/api/1.8.0/status/{key}`.
    pub fn get_status(&self, sub: Subsystem, key: &str) -> Result<Param, SimplonError> {
        self.get(sub, "status", key)
    }

    fn get(&self, sub: Subsystem, section: &str, key: &str) -> Result<Param, SimplonError> {
        let (path, request) = resource("GET", sub, section, key);
        let body = self.exchange("GET", &path, None, self.timeout, &request)?;
        Ok(Param::from_json(parse_json(&body, &request)?))
    }

    /// `PUT /{sub}/api/1.8.0/config/{key}` with the body `{"value": value}`.
    ///
    /// Returns the names of the parameters the server says it changed (or may have changed) as
    /// a consequence, e.g. `["threshold_energy", "flatfield", "wavelength"]` after
    /// `photon_energy`; re-read those. Firmware that answers with an empty body, `{}` or `""`
    /// gives an empty list.
    pub fn put_config(
        &self,
        sub: Subsystem,
        key: &str,
        value: Value,
    ) -> Result<Vec<String>, SimplonError> {
        let (path, request) = resource("PUT", sub, "config", key);
        let payload = serde_json::json!({ "value": value }).to_string();
        let body = self.exchange("PUT", &path, Some(&payload), self.timeout, &request)?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Vec::new());
        }
        match parse_json(&body, &request)? {
            Value::Array(items) => Ok(items
                .into_iter()
                .filter_map(|item| match item {
                    Value::String(s) => Some(s),
                    _ => None,
                })
                .collect()),
            _ => Ok(Vec::new()),
        }
    }

    /// `PUT /{sub}/api/1.8.0/command/{cmd}` within the default timeout; see
    /// [`Simplon::command_with_timeout`].
    pub fn command(
        &self,
        sub: Subsystem,
        cmd: &str,
        body: Option<Value>,
    ) -> Result<Option<i64>, SimplonError> {
        self.command_with_timeout(sub, cmd, body, self.timeout)
    }

    /// `PUT /{sub}/api/1.8.0/command/{cmd}`, allowing `timeout` for the whole call.
    ///
    /// `body` is sent as it is (`None`: an empty body, which is what SIMPLON wants for commands
    /// without an argument). The `inte` trigger takes the exposure as
    /// `Some(json!({"value": 0.5}))`, `hv_reset` the seconds the same way.
    ///
    /// Returns the sequence id that `arm`, `disarm`, `cancel` and `abort` answer with
    /// (`{"sequence id": N}`; `"series id"` and `"sequence_id"` are accepted too), and `None`
    /// for commands that answer with nothing.
    ///
    /// Some commands hold the response back until they are done: `trigger` in `ints` mode until
    /// the whole triggered series has been taken, `initialize` and `restart` for up to minutes,
    /// `arm` for seconds. Give those a timeout that fits.
    pub fn command_with_timeout(
        &self,
        sub: Subsystem,
        cmd: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<Option<i64>, SimplonError> {
        let (path, request) = resource("PUT", sub, "command", cmd);
        let payload = body.map(|b| b.to_string());
        let reply = self.exchange("PUT", &path, payload.as_deref(), timeout, &request)?;
        if reply.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let doc = parse_json(&reply, &request)?;
        let id = ["sequence id", "series id", "sequence_id"]
            .iter()
            .find_map(|name| doc.get(name));
        match id {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) => Ok(Some(n)),
                None => Err(SimplonError::BadResponse {
                    request,
                    reason: format!("the sequence id is not an integer: {v}"),
                }),
            },
        }
    }

    /// One request/response exchange on a fresh connection. Returns the body of a 2xx
    /// response.
    fn exchange(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        timeout: Duration,
        request: &str,
    ) -> Result<Vec<u8>, SimplonError> {
        let deadline = Instant::now() + timeout;
        let mut stream = self.connect(deadline, timeout, request)?;

        let body = body.unwrap_or("");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Accept: application/json\r\nAccept-Encoding: identity\r\n",
            self.host_header
        );
        if !body.is_empty() {
            head.push_str("Content-Type: application/json; charset=utf-8\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());

        let timed_out = || SimplonError::Timeout {
            request: request.to_string(),
            timeout,
        };
        let remaining = remaining(deadline).ok_or_else(timed_out)?;
        let sent = stream
            .set_write_timeout(Some(remaining))
            .and_then(|()| stream.write_all(&bytes))
            .and_then(|()| stream.flush());
        if let Err(e) = sent {
            return Err(if is_timeout(&e) {
                timed_out()
            } else {
                SimplonError::BadResponse {
                    request: request.to_string(),
                    reason: format!("the connection failed while sending the request: {e}"),
                }
            });
        }

        let response = read_response(&mut stream, deadline).map_err(|e| match e {
            ReadError::Timeout => timed_out(),
            ReadError::Bad(reason) => SimplonError::BadResponse {
                request: request.to_string(),
                reason,
            },
        })?;
        if !(200..300).contains(&response.status) {
            return Err(SimplonError::Http {
                request: request.to_string(),
                status: response.status,
                body: excerpt(&response.body),
            });
        }
        Ok(response.body)
    }

    fn connect(
        &self,
        deadline: Instant,
        timeout: Duration,
        request: &str,
    ) -> Result<TcpStream, SimplonError> {
        let fail = |reason: String| SimplonError::Connect {
            request: request.to_string(),
            addr: self.host_header.clone(),
            reason,
        };
        let addrs: Vec<SocketAddr> = match (self.host.as_str(), self.port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => return Err(fail(format!("cannot resolve the name: {e}"))),
        };
        if addrs.is_empty() {
            return Err(fail("the name resolves to no address".to_string()));
        }
        let mut last = String::new();
        for a in addrs {
            let Some(left) = remaining(deadline) else {
                return Err(fail(format!("no connection within {timeout:?}")));
            };
            match TcpStream::connect_timeout(&a, left) {
                Ok(s) => {
                    // Requests are small and each is answered before the next: no batching.
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) if is_timeout(&e) => last = format!("{a}: no connection within {timeout:?}"),
                Err(e) => last = format!("{a}: {e}"),
            }
        }
        Err(fail(last))
    }
}

/// The path and the request name for error messages of `/{sub}/api/1.8.0/{section}/{key}`.
fn resource(method: &str, sub: Subsystem, section: &str, key: &str) -> (String, String) {
    let path = format!(
        "/{}/api/{API_VERSION}/{section}/{}",
        sub.as_str(),
        encode_path(key)
    );
    let request = format!("{method} {}/{section}/{key}", sub.as_str());
    (path, request)
}

/// Percent-encodes everything in `key` but unreserved characters and `/` (keys such as
/// `threshold/1/energy` are paths), so that no key can break the request line.
fn encode_path(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn parse_json(body: &[u8], request: &str) -> Result<Value, SimplonError> {
    serde_json::from_slice(body).map_err(|e| SimplonError::BadResponse {
        request: request.to_string(),
        reason: format!("the body is not JSON ({e}): {}", excerpt(body)),
    })
}

/// The start of `body` as text, for error messages.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let mut out: String = text.chars().take(BODY_EXCERPT_CHARS).collect();
    if text.chars().nth(BODY_EXCERPT_CHARS).is_some() {
        out.push_str("...");
    }
    out
}

/// Time left until `deadline`, or `None` when it has passed (a zero read timeout means "block
/// forever" to the socket, so it is never handed out).
fn remaining(deadline: Instant) -> Option<Duration> {
    let left = deadline.checked_duration_since(Instant::now())?;
    (left >= Duration::from_millis(1)).then_some(left)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

// ---------------------------------------------------------------------------------------------
// Response reading: a byte source with a deadline, an HTTP/1.x header parser and body framing.

/// A byte source whose reads can be bounded in time.
trait Source: Read {
    fn set_read_limit(&mut self, limit: Duration) -> io::Result<()>;
}

impl Source for TcpStream {
    fn set_read_limit(&mut self, limit: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(limit))
    }
}

#[derive(Debug, PartialEq, Eq)]
enum ReadError {
    Timeout,
    Bad(String),
}

#[derive(Debug)]
struct Response {
    status: u16,
    body: Vec<u8>,
}

enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// Reads bytes from a [`Source`] into one growing buffer, never past the deadline.
struct Reader<'a, S: Source> {
    src: &'a mut S,
    deadline: Instant,
    buf: Vec<u8>,
    eof: bool,
}

impl<S: Source> Reader<'_, S> {
    /// Reads once more; returns how many bytes arrived (0 at the end of the stream).
    fn fill(&mut self) -> Result<usize, ReadError> {
        if self.eof {
            return Ok(0);
        }
        let mut chunk = [0u8; 16 << 10];
        loop {
            let left = remaining(self.deadline).ok_or(ReadError::Timeout)?;
            self.src
                .set_read_limit(left)
                .map_err(|e| ReadError::Bad(format!("cannot set the read timeout: {e}")))?;
            match self.src.read(&mut chunk) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_timeout(&e) => return Err(ReadError::Timeout),
                Err(e) => return Err(ReadError::Bad(format!("reading the response failed: {e}"))),
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads one complete HTTP/1.x response (skipping any 1xx interim responses).
fn read_response<S: Source>(src: &mut S, deadline: Instant) -> Result<Response, ReadError> {
    let mut r = Reader {
        src,
        deadline,
        buf: Vec::new(),
        eof: false,
    };
    let mut start = 0;
    for _ in 0..8 {
        // Header block.
        let end = loop {
            if let Some(i) = find(&r.buf[start..], b"\r\n\r\n") {
                break start + i + 4;
            }
            if r.buf.len() - start > MAX_HEADER_BYTES {
                return Err(ReadError::Bad(format!(
                    "the response header is longer than {MAX_HEADER_BYTES} bytes"
                )));
            }
            if r.fill()? == 0 {
                return Err(ReadError::Bad(if r.buf.len() == start {
                    "the server closed the connection without answering".to_string()
                } else {
                    format!(
                        "the connection ended inside the response header: {}",
                        excerpt(&r.buf[start..])
                    )
                }));
            }
        };
        if end - start > MAX_HEADER_BYTES + 4 {
            return Err(ReadError::Bad(format!(
                "the response header is longer than {MAX_HEADER_BYTES} bytes"
            )));
        }
        let (status, framing) = parse_head(&r.buf[start..end - 4])?;
        if (100..200).contains(&status) {
            start = end;
            continue;
        }
        let no_body = status == 204 || status == 304;
        let body = if no_body {
            Vec::new()
        } else {
            read_body(&mut r, end, framing)?
        };
        return Ok(Response { status, body });
    }
    Err(ReadError::Bad(
        "too many interim (1xx) responses".to_string(),
    ))
}

/// Parses the status line and the headers that frame the body.
fn parse_head(head: &[u8]) -> Result<(u16, Framing), ReadError> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(ReadError::Bad(format!(
            "not an HTTP/1.x response: {}",
            excerpt(status_line.as_bytes())
        )));
    }
    let status = parts
        .next()
        .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|c| (100..600).contains(c))
        .ok_or_else(|| {
            ReadError::Bad(format!(
                "no valid status code in {}",
                excerpt(status_line.as_bytes())
            ))
        })?;

    let mut length: Option<usize> = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Bad(format!(
                "malformed header line: {}",
                excerpt(line.as_bytes())
            )));
        };
        let name = name.trim();
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse::<u64>()
                .map_err(|_| ReadError::Bad(format!("invalid Content-Length {value:?}")))?;
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_RESPONSE_BYTES)
                .ok_or_else(|| {
                    ReadError::Bad(format!(
                        "Content-Length {n} exceeds the limit of {MAX_RESPONSE_BYTES} bytes"
                    ))
                })?;
            if length.is_some_and(|old| old != n) {
                return Err(ReadError::Bad(
                    "conflicting Content-Length headers".to_string(),
                ));
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let last = value.rsplit(',').next().unwrap_or("").trim();
            if last.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if !last.eq_ignore_ascii_case("identity") {
                return Err(ReadError::Bad(format!(
                    "unsupported Transfer-Encoding {value:?}"
                )));
            }
        }
    }
    // Chunked coding wins over Content-Length (RFC 9112 §6.3).
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(n)) => Framing::Length(n),
        (false, None) => Framing::UntilClose,
    };
    Ok((status, framing))
}

fn too_large() -> ReadError {
    ReadError::Bad(format!(
        "the response body exceeds the limit of {MAX_RESPONSE_BYTES} bytes"
    ))
}

/// Reads the body that starts at `start` in the reader's buffer.
fn read_body<S: Source>(
    r: &mut Reader<'_, S>,
    start: usize,
    framing: Framing,
) -> Result<Vec<u8>, ReadError> {
    match framing {
        Framing::Length(n) => {
            while r.buf.len() - start < n {
                if r.fill()? == 0 {
                    return Err(ReadError::Bad(format!(
                        "the connection ended after {} of {n} body bytes",
                        r.buf.len() - start
                    )));
                }
            }
            Ok(r.buf[start..start + n].to_vec())
        }
        Framing::UntilClose => {
            while r.fill()? > 0 {
                if r.buf.len() - start > MAX_RESPONSE_BYTES {
                    return Err(too_large());
                }
            }
            Ok(r.buf[start..].to_vec())
        }
        Framing::Chunked => {
            let mut body = Vec::new();
            let mut pos = start;
            loop {
                match next_chunk(&r.buf[pos..])? {
                    Chunk::Data { data, used } => {
                        if body.len() + data.len() > MAX_RESPONSE_BYTES {
                            return Err(too_large());
                        }
                        body.extend_from_slice(data);
                        pos += used;
                    }
                    Chunk::Last => return Ok(body),
                    Chunk::Incomplete => {
                        if r.fill()? == 0 {
                            return Err(ReadError::Bad(
                                "the connection ended inside a chunked body".to_string(),
                            ));
                        }
                    }
                }
            }
        }
    }
}

enum Chunk<'a> {
    /// One complete data chunk and the number of buffer bytes it took (size line and CRLFs).
    Data { data: &'a [u8], used: usize },
    /// The last chunk and its trailer section are complete.
    Last,
    /// More bytes are needed.
    Incomplete,
}

/// Decodes one chunk of the chunked transfer coding from the start of `buf`.
fn next_chunk(buf: &[u8]) -> Result<Chunk<'_>, ReadError> {
    const MAX_LINE: usize = 4096;
    let Some(eol) = find(buf, b"\r\n") else {
        return if buf.len() > MAX_LINE {
            Err(ReadError::Bad("chunk size line too long".to_string()))
        } else {
            Ok(Chunk::Incomplete)
        };
    };
    if eol > MAX_LINE {
        return Err(ReadError::Bad("chunk size line too long".to_string()));
    }
    let line = String::from_utf8_lossy(&buf[..eol]);
    let digits = line.split(';').next().unwrap_or("").trim();
    if digits.is_empty() || digits.len() > 15 {
        return Err(ReadError::Bad(format!("invalid chunk size {line:?}")));
    }
    let size = usize::from_str_radix(digits, 16)
        .map_err(|_| ReadError::Bad(format!("invalid chunk size {line:?}")))?;
    let data_start = eol + 2;
    if size == 0 {
        // Trailer fields, then an empty line.
        let mut pos = data_start;
        loop {
            let Some(e) = find(&buf[pos..], b"\r\n") else {
                return if buf.len() - pos > MAX_HEADER_BYTES {
                    Err(ReadError::Bad("chunked trailer too long".to_string()))
                } else {
                    Ok(Chunk::Incomplete)
                };
            };
            if e == 0 {
                return Ok(Chunk::Last);
            }
            pos += e + 2;
            if pos - data_start > MAX_HEADER_BYTES {
                return Err(ReadError::Bad("chunked trailer too long".to_string()));
            }
        }
    }
    if size > MAX_RESPONSE_BYTES {
        return Err(too_large());
    }
    let data_end = data_start + size;
    if buf.len() < data_end + 2 {
        return Ok(Chunk::Incomplete);
    }
    if &buf[data_end..data_end + 2] != b"\r\n" {
        return Err(ReadError::Bad(
            "chunk data not followed by CRLF".to_string(),
        ));
    }
    Ok(Chunk::Data {
        data: &buf[data_start..data_end],
        used: data_end + 2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::net::{Shutdown, TcpListener};
    use std::sync::mpsc;
    use std::thread;

    use serde_json::json;

    const T: Duration = Duration::from_secs(5);

    impl Source for Cursor<Vec<u8>> {
        fn set_read_limit(&mut self, _limit: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    /// Reads one request (header and Content-Length body) from a client.
    fn read_request(s: &mut TcpStream) -> Vec<u8> {
        s.set_read_timeout(Some(T)).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = find(&buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map(|v| v.trim().parse::<usize>().unwrap())
                    .unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    return buf;
                }
            }
            let n = s.read(&mut chunk).unwrap();
            if n == 0 {
                return buf;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// A one-connection fake server: reads the request, writes each piece of `reply` (with a
    /// short pause between pieces), closes. Returns the address and the request it got.
    fn serve(reply: Vec<Vec<u8>>) -> (String, thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let handle = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let req = read_request(&mut s);
            for (i, piece) in reply.iter().enumerate() {
                if i > 0 {
                    thread::sleep(Duration::from_millis(20));
                }
                s.write_all(piece).unwrap();
                s.flush().unwrap();
            }
            let _ = s.shutdown(Shutdown::Both);
            req
        });
        (addr, handle)
    }

    fn ok_json(body: &str) -> Vec<Vec<u8>> {
        vec![format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()]
    }

    fn split_request(req: &[u8]) -> (String, Vec<String>, Vec<u8>) {
        let end = find(req, b"\r\n\r\n").unwrap();
        let head = String::from_utf8(req[..end].to_vec()).unwrap();
        let mut lines = head.split("\r\n").map(str::to_string);
        let first = lines.next().unwrap();
        (first, lines.collect(), req[end + 4..].to_vec())
    }

    #[test]
    fn simplon_get_config_round_trip() {
        let (addr, server) = serve(ok_json(
            r#"{"value": 0.5, "value_type": "float", "min": 3e-06, "max": 1800, "unit": "s", "access_mode": "rw"}"#,
        ));
        let client = Simplon::new(&addr, T).unwrap();
        let p = client
            .get_config(Subsystem::Detector, "count_time")
            .unwrap();
        assert_eq!(p.value, json!(0.5));
        assert_eq!(p.value_type.as_deref(), Some("float"));
        assert_eq!(p.min, Some(json!(3e-06)));
        assert_eq!(p.max, Some(json!(1800)));
        assert_eq!(p.unit.as_deref(), Some("s"));
        assert_eq!(p.access_mode.as_deref(), Some("rw"));
        assert_eq!(p.allowed_values, None);

        let (first, headers, body) = split_request(&server.join().unwrap());
        assert_eq!(first, "GET /detector/api/1.8.0/config/count_time HTTP/1.1");
        assert!(headers.iter().any(|h| h == &format!("Host: {addr}")));
        assert!(headers.iter().any(|h| h == "Connection: close"));
        assert!(body.is_empty());
    }

    #[test]
    fn simplon_get_enum_and_nested_keys() {
        let (addr, server) = serve(ok_json(
            r#"{"value": "ints", "value_type": "string", "allowed_values": ["ints", "inte", "exts", "exte"]}"#,
        ));
        let client = Simplon::new(&addr, T).unwrap();
        let p = client
            .get_config(Subsystem::Detector, "threshold/1/mode")
            .unwrap();
        assert_eq!(p.value, json!("ints"));
        assert_eq!(
            p.allowed_values.unwrap(),
            vec!["ints", "inte", "exts", "exte"]
        );
        let (first, _, _) = split_request(&server.join().unwrap());
        assert_eq!(
            first,
            "GET /detector/api/1.8.0/config/threshold/1/mode HTTP/1.1"
        );
    }

    #[test]
    fn simplon_status_plain_values() {
        for (body, want) in [
            ("[24.5, 25.0]", json!([24.5, 25.0])),
            ("31.25", json!(31.25)),
            (r#""ready""#, json!("ready")),
            (r#"{"state": "normal"}"#, json!({"state": "normal"})),
        ] {
            let (addr, server) = serve(ok_json(body));
            let client = Simplon::new(&addr, T).unwrap();
            let p = client
                .get_status(Subsystem::Detector, "board_000/th0_temp")
                .unwrap();
            assert_eq!(p.value, want);
            assert_eq!(p.value_type, None);
            let (first, _, _) = split_request(&server.join().unwrap());
            assert_eq!(
                first,
                "GET /detector/api/1.8.0/status/board_000/th0_temp HTTP/1.1"
            );
        }
    }

    #[test]
    fn simplon_put_config_round_trip() {
        let (addr, server) = serve(ok_json(
            r#"["photon_energy", "threshold_energy", "flatfield"]"#,
        ));
        let client = Simplon::new(&addr, T).unwrap();
        let changed = client
            .put_config(Subsystem::Detector, "photon_energy", json!(8040.0))
            .unwrap();
        assert_eq!(
            changed,
            vec!["photon_energy", "threshold_energy", "flatfield"]
        );
        let (first, headers, body) = split_request(&server.join().unwrap());
        assert_eq!(
            first,
            "PUT /detector/api/1.8.0/config/photon_energy HTTP/1.1"
        );
        assert!(headers
            .iter()
            .any(|h| h.starts_with("Content-Type: application/json")));
        let sent: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(sent, json!({"value": 8040.0}));
    }

    #[test]
    fn simplon_put_config_empty_answers() {
        for reply in [
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string(),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_string(),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n\"\"".to_string(),
            "HTTP/1.1 204 No Content\r\n\r\n".to_string(),
            // No framing at all: the body runs to the end of the connection.
            "HTTP/1.1 200 OK\r\n\r\n[]".to_string(),
        ] {
            let (addr, server) = serve(vec![reply.into_bytes()]);
            let client = Simplon::new(&addr, T).unwrap();
            let changed = client
                .put_config(Subsystem::FileWriter, "mode", json!("enabled"))
                .unwrap();
            assert!(changed.is_empty());
            let (first, _, body) = split_request(&server.join().unwrap());
            assert_eq!(first, "PUT /filewriter/api/1.8.0/config/mode HTTP/1.1");
            assert_eq!(body, br#"{"value":"enabled"}"#);
        }
    }

    #[test]
    fn simplon_chunked_body() {
        let reply = vec![
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
                .to_vec(),
            b"7\r\n{\"value\r\n".to_vec(),
            b"5;ext=1\r\n\": 12\r\n".to_vec(),
            b"1".to_vec(),
            b"\r\n}\r\n0\r\nX-Trailer: 1\r\n\r\n".to_vec(),
        ];
        let (addr, server) = serve(reply);
        let client = Simplon::new(&addr, T).unwrap();
        let p = client.get_status(Subsystem::Stream, "dropped").unwrap();
        assert_eq!(p.value, json!(12));
        server.join().unwrap();
    }

    #[test]
    fn simplon_http_400_surfaces_status_and_body() {
        let body = "Value 9999 is out of range for count_time";
        let reply = format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let (addr, server) = serve(vec![reply.into_bytes()]);
        let client = Simplon::new(&addr, T).unwrap();
        let err = client
            .put_config(Subsystem::Detector, "count_time", json!(9999.0))
            .unwrap_err();
        match &err {
            SimplonError::Http {
                request,
                status,
                body: got,
            } => {
                assert_eq!(request, "PUT detector/config/count_time");
                assert_eq!(*status, 400);
                assert_eq!(got, body);
            }
            other => panic!("expected Http, got {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!("PUT detector/config/count_time: HTTP 400: {body}")
        );
        server.join().unwrap();
    }

    #[test]
    fn simplon_commands_return_sequence_id() {
        let (addr, server) = serve(ok_json(r#"{"sequence id": 7}"#));
        let client = Simplon::new(&addr, T).unwrap();
        assert_eq!(
            client.command(Subsystem::Detector, "arm", None).unwrap(),
            Some(7)
        );
        let (first, headers, body) = split_request(&server.join().unwrap());
        assert_eq!(first, "PUT /detector/api/1.8.0/command/arm HTTP/1.1");
        assert!(headers.iter().any(|h| h == "Content-Length: 0"));
        assert!(body.is_empty());

        // inte trigger: the exposure goes in the body; the answer is empty.
        let (addr, server) = serve(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec()
        ]);
        let client = Simplon::new(&addr, T).unwrap();
        let got = client
            .command_with_timeout(
                Subsystem::Detector,
                "trigger",
                Some(json!({"value": 0.25})),
                Duration::from_secs(2),
            )
            .unwrap();
        assert_eq!(got, None);
        let (first, _, body) = split_request(&server.join().unwrap());
        assert_eq!(first, "PUT /detector/api/1.8.0/command/trigger HTTP/1.1");
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"value": 0.25})
        );

        let (addr, server) = serve(ok_json(r#"{"series id": 3}"#));
        let client = Simplon::new(&addr, T).unwrap();
        assert_eq!(
            client.command(Subsystem::Detector, "disarm", None).unwrap(),
            Some(3)
        );
        server.join().unwrap();

        let (addr, server) = serve(ok_json(r#"{"sequence id": "x"}"#));
        let client = Simplon::new(&addr, T).unwrap();
        assert!(matches!(
            client.command(Subsystem::Detector, "abort", None),
            Err(SimplonError::BadResponse { .. })
        ));
        server.join().unwrap();
    }

    #[test]
    fn simplon_api_version() {
        let (addr, server) = serve(ok_json(r#"{"value": "1.8.0", "value_type": "string"}"#));
        let client = Simplon::new(&addr, T).unwrap();
        assert_eq!(client.api_version().unwrap(), "1.8.0");
        let (first, _, _) = split_request(&server.join().unwrap());
        assert_eq!(first, "GET /detector/api/version HTTP/1.1");
    }

    #[test]
    fn simplon_connection_refused_is_connect() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addr = format!("127.0.0.1:{port}");
        let client = Simplon::new(&addr, T).unwrap();
        let start = Instant::now();
        let err = client.get_status(Subsystem::Detector, "state").unwrap_err();
        assert!(start.elapsed() < T);
        match &err {
            SimplonError::Connect {
                request, addr: got, ..
            } => {
                assert_eq!(request, "GET detector/status/state");
                assert_eq!(got, &addr);
            }
            other => panic!("expected Connect, got {other:?}"),
        }
        assert!(err
            .to_string()
            .starts_with("GET detector/status/state: cannot connect to 127.0.0.1:"));
    }

    #[test]
    fn simplon_silent_server_is_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let _ = read_request(&mut s);
            // Say nothing until the client has given up.
            let _ = done_rx.recv_timeout(T);
        });
        let timeout = Duration::from_millis(300);
        let client = Simplon::new(&addr, timeout).unwrap();
        let start = Instant::now();
        let err = client
            .command(Subsystem::Detector, "trigger", None)
            .unwrap_err();
        let took = start.elapsed();
        done_tx.send(()).unwrap();
        server.join().unwrap();
        assert!(
            matches!(&err, SimplonError::Timeout { request, timeout: t }
                if request == "PUT detector/command/trigger" && *t == timeout),
            "{err:?}"
        );
        assert!(took >= timeout, "{took:?}");
        assert!(took < timeout + Duration::from_secs(2), "{took:?}");

        // A per-call timeout overrides the client's.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let _ = read_request(&mut s);
            let _ = done_rx.recv_timeout(T);
        });
        let client = Simplon::new(&addr, T).unwrap();
        let start = Instant::now();
        let err = client
            .command_with_timeout(
                Subsystem::Detector,
                "trigger",
                None,
                Duration::from_millis(200),
            )
            .unwrap_err();
        let took = start.elapsed();
        done_tx.send(()).unwrap();
        server.join().unwrap();
        assert!(matches!(err, SimplonError::Timeout { .. }), "{err:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }

    #[test]
    fn simplon_garbage_is_bad_response() {
        let cases: Vec<Vec<u8>> = vec![
            b"\x00\x01garbage\xff\r\n\r\n".to_vec(),
            b"SSH-2.0-OpenSSH_9.6\r\n".to_vec(),
            b"HTTP/1.1 abc OK\r\n\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"va".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnot".to_vec(),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec(),
            Vec::new(),
        ];
        for reply in cases {
            let (addr, server) = serve(vec![reply.clone()]);
            let client = Simplon::new(&addr, T).unwrap();
            let err = client.get_config(Subsystem::Monitor, "mode").unwrap_err();
            assert!(
                matches!(&err, SimplonError::BadResponse { request, .. } if request == "GET monitor/config/mode"),
                "{:?} -> {err:?}",
                String::from_utf8_lossy(&reply)
            );
            server.join().unwrap();
        }
    }

    #[test]
    fn simplon_response_size_is_capped() {
        let mut r = Cursor::new(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                MAX_RESPONSE_BYTES + 1
            )
            .into_bytes(),
        );
        assert!(matches!(
            read_response(&mut r, Instant::now() + T),
            Err(ReadError::Bad(_))
        ));
        let mut body = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        body.resize(body.len() + MAX_RESPONSE_BYTES + 1, b' ');
        let mut r = Cursor::new(body);
        assert!(matches!(
            read_response(&mut r, Instant::now() + T),
            Err(ReadError::Bad(_))
        ));
    }

    #[test]
    fn simplon_interim_response_is_skipped() {
        let mut r = Cursor::new(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]".to_vec(),
        );
        let resp = read_response(&mut r, Instant::now() + T).unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, b"[]");
    }

    #[test]
    fn simplon_random_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5151);
        let seeds: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"value\":1}",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n[1]\r\n0\r\n\r\n",
            b"HTTP/1.1 400 Bad\r\n\r\nno",
        ];
        for i in 0..20_000 {
            let mut bytes = seeds[i % seeds.len()].to_vec();
            match i % 4 {
                0 => {
                    let n = rng.random_range(0..64);
                    bytes = (0..n).map(|_| rng.random()).collect();
                }
                1 => {
                    let cut = rng.random_range(0..=bytes.len());
                    bytes.truncate(cut);
                }
                _ => {
                    for _ in 0..rng.random_range(1..6) {
                        let at = rng.random_range(0..bytes.len());
                        bytes[at] = rng.random();
                    }
                }
            }
            let mut r = Cursor::new(bytes);
            if let Ok(resp) = read_response(&mut r, Instant::now() + T) {
                let _ = parse_json(&resp.body, "GET x");
            }
        }
    }

    #[test]
    fn simplon_addresses() {
        let ok = |a: &str| Simplon::new(a, T).unwrap();
        let c = ok("10.0.0.5");
        assert_eq!(
            (c.host.as_str(), c.port, c.addr()),
            ("10.0.0.5", 80, "10.0.0.5")
        );
        let c = ok("dcu-eiger:8080");
        assert_eq!(
            (c.host.as_str(), c.port, c.addr()),
            ("dcu-eiger", 8080, "dcu-eiger:8080")
        );
        let c = ok("http://10.0.0.5/");
        assert_eq!((c.host.as_str(), c.port), ("10.0.0.5", 80));
        let c = ok("[::1]:8081");
        assert_eq!(
            (c.host.as_str(), c.port, c.addr()),
            ("::1", 8081, "[::1]:8081")
        );
        assert_eq!(c.timeout(), T);
        for bad in [
            "",
            " ",
            "host:",
            "host:0",
            "host:65536",
            "host:http",
            ":80",
            "::1",
            "[::1",
            "[x]:80",
            "a b",
            "host/path",
            "user@host",
        ] {
            assert!(
                matches!(Simplon::new(bad, T), Err(SimplonError::Address { .. })),
                "{bad:?} accepted"
            );
        }
        assert!(Simplon::new("host", Duration::ZERO).is_err());
        // Simplon is shared between threads.
        fn shareable<X: Send + Sync + Clone>() {}
        shareable::<Simplon>();
    }

    #[test]
    fn simplon_paths_are_encoded() {
        let (path, request) = resource("GET", Subsystem::System, "config", "a b?c");
        assert_eq!(path, "/system/api/1.8.0/config/a%20b%3Fc");
        assert_eq!(request, "GET system/config/a b?c");
        assert_eq!(Subsystem::FileWriter.to_string(), "filewriter");
    }
}
