// The viewer page: frames from /ws/frames/{port}, parameters from /api/*.
"use strict";

const $ = (id) => document.getElementById(id);
const FILE_TYPES = ["hdf5", "tiff", "netcdf", "nexus", "jpeg", "magick", "null"];
const STATS = ["MeanValue", "Sigma", "MaxValue", "Total", "CentroidX", "CentroidY"];

const state = {
  frame: null,        // the frame drawn now (parsed header + pixels)
  pending: null,      // newest frame received, not drawn yet
  paused: false,
  drawn: 0,           // frames drawn since the page loaded
  fps: 0,
  view: { offX: 0, offY: 0, zoom: 1, bin: 1 },
  win: [0, 1],
  fitted: "",
  ws: null,
  ports: [],
  rois: [],           // {name, prefix, x, y, w, h} in full-frame pixels
  plots: {},
  putErrors: 0,
};

const renderer = new Renderer($("gl"));
const overlay = $("overlay");

function message(text) {
  $("message").textContent = text || "";
}

async function getJson(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status}`);
  return r.json();
}

async function put(pv, value) {
  const r = await fetch("/api/put", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ pv, value }),
  });
  const body = await r.json().catch(() => ({ ok: false, error: `HTTP ${r.status}` }));
  if (!body.ok) {
    state.putErrors++;
    message(`${pv}: ${body.error}`);
  } else {
    message("");
  }
  return body.ok;
}

// ---- frames -------------------------------------------------------------------------------

function connect(port) {
  if (state.ws) state.ws.close();
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/frames/${encodeURIComponent(port)}?max=1024`;
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  ws.onmessage = (ev) => {
    if (typeof ev.data === "string") return;
    const f = parseFrame(ev.data);
    if (!f) return;
    state.pending = f;
    drawPending();
  };
  ws.onclose = () => {
    if (state.ws === ws) setTimeout(() => connect(port), 1000);
  };
  state.ws = ws;
}

function fit(f) {
  const cw = overlay.width, ch = overlay.height;
  const zoom = Math.min(cw / f.fullWidth, ch / f.fullHeight);
  state.view.zoom = zoom;
  state.view.offX = (cw - f.fullWidth * zoom) / 2;
  state.view.offY = (ch - f.fullHeight * zoom) / 2;
}

function render() {
  const f = state.frame;
  if (!f) return;
  state.view.bin = f.binX;
  const scale = { lin: 0, log: 1, sqrt: 2 }[$("scale").value];
  renderer.draw(state.view, state.win, scale);
  drawOverlay();
}

function show(f) {
  state.frame = f;
  const key = `${f.fullWidth}x${f.fullHeight}`;
  if (state.fitted !== key) {
    fit(f);
    state.fitted = key;
  }
  renderer.upload(f.pixels, f.width, f.height);
  if ($("auto").checked) {
    state.win = percentileWindow(f.pixels, +$("plo").value, +$("phi").value);
    $("lo").value = state.win[0];
    $("hi").value = state.win[1];
  }
  render();
  state.drawn++;
  $("uid").textContent = f.uid;
  $("dims").textContent = `${f.fullWidth}×${f.fullHeight}` + (f.binX > 1 ? ` (bin ${f.binX})` : "") + ` ${["Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Float32", "Float64"][f.dtype]}`;
}

// Draws the newest frame received and returns the credit for it; while paused the frame
// waits and no credit goes back, so the server stops sending.
function drawPending() {
  if (state.paused || !state.pending) return;
  const f = state.pending;
  state.pending = null;
  show(f);
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send("ack");
}

let lastCount = 0;
setInterval(() => {
  state.fps = state.drawn - lastCount;
  lastCount = state.drawn;
  $("fps").textContent = state.fps;
}, 1000);

// ---- view: zoom, pan, readout, ROIs -------------------------------------------------------

function toImage(cx, cy) {
  return [(cx - state.view.offX) / state.view.zoom, (cy - state.view.offY) / state.view.zoom];
}

function toCanvas(ix, iy) {
  return [state.view.offX + ix * state.view.zoom, state.view.offY + iy * state.view.zoom];
}

// The value shown at full-frame pixel (x, y), or undefined outside the frame.
function valueAt(x, y) {
  const f = state.frame;
  if (!f) return undefined;
  const bx = Math.floor(x / f.binX), by = Math.floor(y / f.binY);
  if (bx < 0 || by < 0 || bx >= f.width || by >= f.height) return undefined;
  return f.pixels[by * f.width + bx];
}

function drawOverlay() {
  const c = overlay.getContext("2d");
  c.clearRect(0, 0, overlay.width, overlay.height);
  c.lineWidth = 1.5;
  c.font = "12px sans-serif";
  for (const r of state.rois) {
    const [x, y] = toCanvas(r.x, r.y);
    c.strokeStyle = r.dragging ? "#ff0" : "#0f0";
    c.strokeRect(x, y, r.w * state.view.zoom, r.h * state.view.zoom);
    c.fillStyle = c.strokeStyle;
    c.fillText(r.name, x + 3, y + 13);
    c.fillRect(x + r.w * state.view.zoom - 4, y + r.h * state.view.zoom - 4, 8, 8);
  }
}

let drag = null;

function roiAt(cx, cy) {
  const [ix, iy] = toImage(cx, cy);
  const grip = 8 / state.view.zoom;
  for (const r of state.rois) {
    if (Math.abs(ix - (r.x + r.w)) < grip && Math.abs(iy - (r.y + r.h)) < grip) return [r, "size"];
  }
  for (const r of state.rois) {
    if (ix >= r.x && iy >= r.y && ix < r.x + r.w && iy < r.y + r.h) return [r, "move"];
  }
  return [null, null];
}

overlay.addEventListener("mousedown", (e) => {
  const [r, mode] = roiAt(e.offsetX, e.offsetY);
  drag = { x: e.offsetX, y: e.offsetY, roi: r, mode, start: r ? { ...r } : { ...state.view } };
  if (r) r.dragging = true;
});

overlay.addEventListener("mousemove", (e) => {
  const [ix, iy] = toImage(e.offsetX, e.offsetY);
  const v = valueAt(ix, iy);
  $("readout").textContent = `x ${Math.floor(ix)} y ${Math.floor(iy)} value ${v === undefined ? "–" : v}`;
  if (!drag) return;
  const dx = (e.offsetX - drag.x) / state.view.zoom, dy = (e.offsetY - drag.y) / state.view.zoom;
  if (drag.roi && drag.mode === "move") {
    drag.roi.x = Math.max(0, Math.round(drag.start.x + dx));
    drag.roi.y = Math.max(0, Math.round(drag.start.y + dy));
  } else if (drag.roi) {
    drag.roi.w = Math.max(1, Math.round(drag.start.w + dx));
    drag.roi.h = Math.max(1, Math.round(drag.start.h + dy));
  } else {
    state.view.offX = drag.start.offX + (e.offsetX - drag.x);
    state.view.offY = drag.start.offY + (e.offsetY - drag.y);
  }
  render();
});

window.addEventListener("mouseup", async () => {
  const d = drag;
  drag = null;
  if (!d || !d.roi) return;
  const r = d.roi;
  // The dropped rectangle, taken before the puts: a poll while they run must not overwrite
  // it with the old readbacks (held until the readbacks have caught up).
  const { x, y, w, h } = r;
  r.heldUntil = performance.now() + 1500;
  r.dragging = false;
  if (d.mode === "move") {
    await put(`${r.prefix}MinX`, x);
    await put(`${r.prefix}MinY`, y);
  } else {
    await put(`${r.prefix}SizeX`, w);
    await put(`${r.prefix}SizeY`, h);
  }
  r.heldUntil = performance.now() + 1500;
  drawOverlay();
});

overlay.addEventListener("wheel", (e) => {
  e.preventDefault();
  const k = e.deltaY < 0 ? 1.25 : 0.8;
  const [ix, iy] = toImage(e.offsetX, e.offsetY);
  state.view.zoom *= k;
  state.view.offX = e.offsetX - ix * state.view.zoom;
  state.view.offY = e.offsetY - iy * state.view.zoom;
  render();
}, { passive: false });

// ---- toolbar ------------------------------------------------------------------------------

$("pause").onclick = () => {
  state.paused = !state.paused;
  $("pause").textContent = state.paused ? "Resume" : "Pause";
  drawPending();
};
$("fit").onclick = () => { if (state.frame) { fit(state.frame); render(); } };
$("cmap").onchange = () => { renderer.setColormap($("cmap").value); render(); };
$("scale").onchange = render;
for (const id of ["lo", "hi"]) {
  $(id).onchange = () => {
    $("auto").checked = false;
    state.win = [+$("lo").value, +$("hi").value];
    render();
  };
}

function download(blob, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

$("snap-png").onclick = () => {
  if (state.frame) $("gl").toBlob((b) => download(b, `frame-${state.frame.uid}.png`), "image/png");
};

// The frame as shown (binned, in its sent type) as a NumPy .npy file, version 1.0.
function npyBytes(f) {
  const descr = f.pixels instanceof Uint8Array ? "|u1" : f.pixels instanceof Uint16Array ? "<u2" : "<f4";
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${f.height}, ${f.width}), }`;
  header += " ".repeat(63 - ((10 + header.length) % 64)) + "\n";
  const out = new Uint8Array(10 + header.length + f.pixels.byteLength);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, header.length & 255, header.length >> 8]);
  out.set(new TextEncoder().encode(header), 10);
  out.set(new Uint8Array(f.pixels.buffer, f.pixels.byteOffset, f.pixels.byteLength), 10 + header.length);
  return out;
}

$("snap-npy").onclick = () => {
  if (state.frame) download(new Blob([npyBytes(state.frame)]), `frame-${state.frame.uid}.npy`);
};

// ---- ports, controls, plots, pipeline -----------------------------------------------------

const ctl = { driver: null, file: null, stats: null };

async function setup() {
  const { ports, streams } = await getJson("/api/ports");
  state.ports = ports;
  const sel = $("stream");
  sel.innerHTML = "";
  for (const s of streams) sel.add(new Option(s, s));
  sel.onchange = () => connect(sel.value);
  if (streams.length) connect(streams[0]);
  else message("no web port in this IOC's config: add a [[port]] of type \"web\"");
  ctl.driver = ports.find((p) => p.driver) || null;
  ctl.file = ports.find((p) => FILE_TYPES.includes(p.type)) || null;
  ctl.stats = ports.find((p) => p.type === "stats") || null;
  state.rois = ports.filter((p) => p.type === "roi").map((p) => ({ name: p.name, prefix: p.prefix, x: 0, y: 0, w: 0, h: 0 }));
  if (ctl.driver) {
    $("det-name").textContent = ctl.driver.name;
    const pv = (n) => `${ctl.driver.prefix}${n}`;
    $("acquire").onclick = () => put(pv("Acquire"), 1);
    $("stop").onclick = () => put(pv("Acquire"), 0);
    for (const id of ["AcquireTime", "AcquirePeriod", "NumImages", "ImageMode"]) {
      $(id).onchange = () => put(pv(id), $(id).tagName === "SELECT" ? $(id).value : +$(id).value);
    }
  }
  if (ctl.file) {
    $("file-ctl").hidden = false;
    $("file-name").textContent = ctl.file.name;
    $("capture").onclick = async () => {
      const on = $("capture-state").textContent === "Capturing";
      await put(`${ctl.file.prefix}Capture`, on ? 0 : 1);
    };
  }
  if (ctl.stats) {
    $("stats-name").textContent = ctl.stats.name;
    for (const s of STATS) state.plots[s] = new TimePlot($("plots"), s);
  }
  await poll(true);
  setInterval(poll, 250);
  setInterval(pollPipeline, 1000);
}

let lastStatsCount = null;

async function poll(first) {
  const names = [];
  const d = ctl.driver, f = ctl.file, s = ctl.stats;
  if (d) for (const n of ["DetectorState_RBV", "AcquireTime_RBV", "AcquirePeriod_RBV", "ImageMode_RBV", "NumImages_RBV"]) names.push(d.prefix + n);
  if (f) names.push(f.prefix + "Capture_RBV");
  if (s) {
    names.push(s.prefix + "ArrayCounter_RBV");
    for (const n of STATS) names.push(`${s.prefix}${n}_RBV`);
  }
  for (const r of state.rois) for (const n of ["MinX", "MinY", "SizeX", "SizeY"]) names.push(`${r.prefix}${n}_RBV`);
  let v;
  try {
    v = await getJson(`/api/values?names=${encodeURIComponent(names.join(","))}`);
  } catch (e) {
    message(`IOC not reachable: ${e.message}`);
    return;
  }
  if (d) {
    $("det-state").textContent = v[d.prefix + "DetectorState_RBV"] ?? "";
    for (const id of ["AcquireTime", "AcquirePeriod", "ImageMode", "NumImages"]) {
      // Do not overwrite what the user is typing.
      if (document.activeElement !== $(id) || first === true) $(id).value = v[`${d.prefix}${id}_RBV`] ?? "";
    }
  }
  if (f) {
    const c = v[f.prefix + "Capture_RBV"];
    $("capture-state").textContent = c === "Capture" || c === 1 ? "Capturing" : "Done";
  }
  if (s) {
    const count = v[s.prefix + "ArrayCounter_RBV"];
    if (count !== lastStatsCount) {
      lastStatsCount = count;
      const t = performance.now() / 1000;
      for (const n of STATS) state.plots[n].add(t, v[`${s.prefix}${n}_RBV`]);
    }
  }
  const now = performance.now();
  for (const r of state.rois) {
    if (r.dragging || (r.heldUntil && now < r.heldUntil)) continue;
    [r.x, r.y, r.w, r.h] = ["MinX", "MinY", "SizeX", "SizeY"].map((n) => v[`${r.prefix}${n}_RBV`] ?? 0);
  }
  drawOverlay();
}

async function pollPipeline() {
  if ($("page-pipeline").hidden) return;
  try {
    renderPipeline(document.querySelector("#pipeline tbody"), await getJson("/api/pipeline"));
  } catch (e) {
    message(`IOC not reachable: ${e.message}`);
  }
}

function tab(name) {
  for (const t of ["image", "pipeline"]) {
    $(`page-${t}`).hidden = t !== name;
    $(`tab-${t}`).classList.toggle("on", t === name);
  }
  pollPipeline();
}
$("tab-image").onclick = () => tab("image");
$("tab-pipeline").onclick = () => tab("pipeline");

// For scripts and tests: the state, and image <-> canvas coordinates.
window.ndviewer = {
  state, valueAt, toCanvas, toImage, npyBytes, tab, colormapLut,
  setWindow(lo, hi) { $("auto").checked = false; state.win = [lo, hi]; render(); },
  setColormap(name) { $("cmap").value = name; renderer.setColormap(name); render(); },
};

setup().catch((e) => message(e.message));
