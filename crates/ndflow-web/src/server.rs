//! The HTTP server: the page (compiled into the binary), the frame WebSockets and the JSON
//! API over the IOC's parameters, on its own Tokio runtime.
//!
//! | route | what |
//! |---|---|
//! | `GET /` , `/app.js`, `/gl.js`, `/plots.js`, `/style.css` | the page |
//! | `GET /ws/frames/{port}?max=N` | binary frames of a `web` port ([`crate::ws`]) |
//! | `GET /api/ports` | the ports (name, class, PV prefix) and which stream frames |
//! | `GET /api/values?names=A,B` | current values of PVs by full name |
//! | `GET /api/pipeline` | every port's rate, queue, drops by reason, execution time |
//! | `POST /api/put` | `{"pv": NAME, "value": V}`: a put, under the IOC's access rules |

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::hub::FrameHub;

/// What the server reads from and writes to the IOC (implemented over its PV directory).
pub trait Backend: Send + Sync + 'static {
    /// `[{"name", "class", "prefix", "driver"}]`, one per port.
    fn ports(&self) -> Value;
    /// `{name: value}` of the PVs named (null for an unknown name); enums as their string.
    fn values(&self, names: &[&str]) -> Value;
    /// `[{"name", …counters}]`, one per port.
    fn pipeline(&self) -> Value;
    /// A put from a client at `host`: `Err` says why it was refused.
    fn put(&self, pv: &str, value: &Value, host: &str) -> Result<(), String>;
}

#[derive(Clone)]
struct App {
    hub: Arc<FrameHub>,
    backend: Arc<dyn Backend>,
}

/// The running server; dropping it stops it.
pub struct WebServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl WebServer {
    /// Binds `addr` (port 0: any free port) and serves.
    pub fn start(
        addr: SocketAddr,
        hub: Arc<FrameHub>,
        backend: Arc<dyn Backend>,
    ) -> Result<WebServer, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ndflow-web")
            .on_thread_start(yield_to_acquisition)
            .enable_all()
            .build()
            .map_err(|e| format!("web server: cannot start its runtime: {e}"))?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(addr))
            .map_err(|e| format!("web server: cannot listen on {addr}: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("web server: {e}"))?;
        let app = router(App { hub, backend });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn(async move {
            let service = app.into_make_service_with_connect_info::<SocketAddr>();
            let served = axum::serve(listener, service)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!("web server stopped: {e}");
            }
        });
        Ok(WebServer {
            addr,
            stop: Some(stop),
            runtime: Some(runtime),
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

/// How much less CPU the viewers' threads (the runtime's workers and its blocking threads,
/// which encode and bin frames) get than the pipeline when the IOC's cores are busy: a viewer
/// takes what acquisition leaves and never slows it (Linux nice value, per thread).
pub const VIEWER_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`VIEWER_NICE`] (a no-op where that fails, e.g.
/// under a seccomp policy that forbids it: the viewer then competes as an equal).
fn yield_to_acquisition() {
    if let Err(e) = set_this_thread_nice(VIEWER_NICE) {
        tracing::debug!("web server: cannot lower this thread's priority: {e}");
    }
}

/// Sets the calling thread's nice value (Linux: per thread), for threads that should take
/// only the CPU others leave; other threads of the process keep theirs.
pub fn set_this_thread_nice(nice: i32) -> std::io::Result<()> {
    // SAFETY: gettid and setpriority take plain integers, touch no memory of ours, and on
    // Linux PRIO_PROCESS with a thread id changes that thread's nice value only.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(r) = self.runtime.take() {
            // Open WebSockets do not hold the IOC's exit.
            r.shutdown_timeout(std::time::Duration::from_millis(500));
        }
    }
}

fn router(app: App) -> Router {
    Router::new()
        .route(
            "/",
            get(|| asset("text/html; charset=utf-8", crate::assets::INDEX)),
        )
        .route("/app.js", get(|| asset(JS, crate::assets::APP_JS)))
        .route("/gl.js", get(|| asset(JS, crate::assets::GL_JS)))
        .route("/plots.js", get(|| asset(JS, crate::assets::PLOTS_JS)))
        .route(
            "/style.css",
            get(|| asset("text/css", crate::assets::STYLE)),
        )
        .route("/ws/frames/{port}", get(frames))
        .route("/api/ports", get(ports))
        .route("/api/values", get(values))
        .route("/api/pipeline", get(pipeline))
        .route("/api/put", post(put))
        .with_state(app)
}

const JS: &str = "text/javascript; charset=utf-8";

async fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

#[derive(Deserialize)]
struct FramesQuery {
    max: Option<usize>,
}

async fn frames(
    State(app): State<App>,
    Path(port): Path<String>,
    Query(q): Query<FramesQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    match app.hub.get(&port) {
        Some(src) => ws.on_upgrade(move |s| crate::ws::stream_frames(s, src, q.max.unwrap_or(0))),
        None => (
            StatusCode::NOT_FOUND,
            format!(
                "no web port '{port}'; ports: {}",
                app.hub.names().join(", ")
            ),
        )
            .into_response(),
    }
}

async fn ports(State(app): State<App>) -> Json<Value> {
    Json(json!({ "ports": app.backend.ports(), "streams": app.hub.names() }))
}

#[derive(Deserialize)]
struct ValuesQuery {
    names: String,
}

async fn values(State(app): State<App>, Query(q): Query<ValuesQuery>) -> Json<Value> {
    let names: Vec<&str> = q.names.split(',').filter(|n| !n.is_empty()).collect();
    Json(app.backend.values(&names))
}

async fn pipeline(State(app): State<App>) -> Json<Value> {
    Json(app.backend.pipeline())
}

#[derive(Deserialize)]
struct PutBody {
    pv: String,
    value: Value,
}

async fn put(
    State(app): State<App>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(body): Json<PutBody>,
) -> Response {
    let backend = Arc::clone(&app.backend);
    let host = peer.ip().to_string();
    // A put may wait on the graph's locks: off the runtime's workers.
    let r = tokio::task::spawn_blocking(move || backend.put(&body.pv, &body.value, &host)).await;
    match r {
        Ok(Ok(())) => Json(json!({ "ok": true })).into_response(),
        Ok(Err(e)) => (
            StatusCode::FORBIDDEN,
            Json(json!({ "ok": false, "error": e })),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "ok": false, "error": e.to_string() })),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoBackend;
    impl Backend for NoBackend {
        fn ports(&self) -> Value {
            json!([])
        }
        fn values(&self, _: &[&str]) -> Value {
            json!({})
        }
        fn pipeline(&self) -> Value {
            json!([])
        }
        fn put(&self, pv: &str, _: &Value, _: &str) -> Result<(), String> {
            Err(format!("no PV {pv}"))
        }
    }

    /// The nice values (field 19 of /proc/self/task/TID/stat) of this process's threads
    /// named `name`.
    fn nice_of_threads(name: &str) -> Vec<i32> {
        let mut out = Vec::new();
        for t in std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
        {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // After the ")" that closes the name: state is field 3, nice field 19.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            if comm.trim() == name {
                if let Some(n) = rest.split_whitespace().nth(16) {
                    out.push(n.parse().unwrap_or(i32::MIN));
                }
            }
        }
        out
    }

    #[test]
    fn viewer_threads_yield_to_acquisition() {
        let hub = Arc::new(FrameHub::default());
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let srv = WebServer::start(addr, hub, Arc::new(NoBackend)).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let nice = loop {
            let n = nice_of_threads("ndflow-web");
            if n.len() >= 2 || std::time::Instant::now() > deadline {
                break n;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert!(nice.len() >= 2, "worker threads: {nice:?}");
        assert!(nice.iter().all(|&n| n == VIEWER_NICE), "{nice:?}");
        // This (test) thread keeps its own priority.
        let me = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let mine = me.rsplit_once(')').unwrap().1.split_whitespace().nth(16);
        assert_eq!(mine, Some("0"));
        drop(srv);
    }
}
