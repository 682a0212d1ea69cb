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
  rois: [],           // {kind: "roi"|"roistat", name, prefix, x, y, w, h} in full-frame pixels
  roistats: [],       // roistat ports: {name, prefix, present: [N…] (probed), used: Set}
  overlayPorts: [],   // overlay ports: {name, prefix, used: Set of N}
  overlays: [],       // enabled overlays: {port, n, shape, x, y, w, h, wx, wy, rgb, text, font}
  profile: { x: 0, y: 0, follow: true, row: [], col: [], at: null },  // row/col: [channel][i]
  hist: null,         // {lo, hi, binWidth, counts, total, nonFinite}
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
    scheduleDraw();
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
  // The profiles' axes follow the image as drawn (zoom, pan).
  if (state.profile.row.length) drawProfiles();
}

function show(f) {
  state.frame = f;
  const key = `${f.fullWidth}x${f.fullHeight}`;
  if (state.fitted !== key) {
    fit(f);
    state.fitted = key;
  }
  renderer.upload(f.pixels, f.width, f.height, f.colors);
  // One pass over the pixels gives the histogram and, for UInt8/UInt16, exact percentiles.
  const counts = updateHistogram(f);
  if ($("auto").checked) {
    const [plo, phi] = [+$("plo").value, +$("phi").value];
    state.win = counts ? countsWindow(counts, f.pixels instanceof Uint8Array ? 255 : 65535, plo, phi)
      : percentileWindow(f.pixels, plo, phi);
    $("lo").value = state.win[0];
    $("hi").value = state.win[1];
  }
  render();
  drawHistogram();
  updateProfile();
  state.drawn++;
  $("uid").textContent = f.uid;
  $("dims").textContent = `${f.fullWidth}×${f.fullHeight}` + (f.binX > 1 ? ` (bin ${f.binX})` : "") + ` ${["Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Float32", "Float64"][f.dtype]}` + (f.colors === 3 ? " RGB" : "");
}

// Frames are drawn at the display's pace: the newest one received, once per animation
// frame (a hidden tab draws none, returns no credit, and the server stops sending).
let drawScheduled = false;
function scheduleDraw() {
  if (drawScheduled) return;
  drawScheduled = true;
  requestAnimationFrame(() => {
    drawScheduled = false;
    drawPending();
  });
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

// The value shown at full-frame pixel (x, y) ([r, g, b] for an RGB frame), or undefined
// outside the frame.
function valueAt(x, y) {
  const f = state.frame;
  if (!f) return undefined;
  const bx = Math.floor(x / f.binX), by = Math.floor(y / f.binY);
  if (bx < 0 || by < 0 || bx >= f.width || by >= f.height) return undefined;
  const i = (by * f.width + bx) * f.colors;
  return f.colors === 3 ? [f.pixels[i], f.pixels[i + 1], f.pixels[i + 2]] : f.pixels[i];
}

// ---- line profiles and histogram ------------------------------------------------------------

// The row and the column of the frame shown through full-frame point (x, y): the values as
// sent (binned frames: the binned values), one array per colour.
function updateProfile() {
  const f = state.frame, p = state.profile;
  if (!f) return;
  const bx = Math.floor(p.x / f.binX), by = Math.floor(p.y / f.binY);
  p.row = []; p.col = [];
  p.at = null;
  if (bx >= 0 && by >= 0 && bx < f.width && by < f.height) {
    p.at = [bx, by];
    for (let c = 0; c < f.colors; c++) {
      const row = new Array(f.width), col = new Array(f.height);
      for (let i = 0; i < f.width; i++) row[i] = f.pixels[(by * f.width + i) * f.colors + c];
      for (let j = 0; j < f.height; j++) col[j] = f.pixels[(j * f.width + bx) * f.colors + c];
      p.row.push(row);
      p.col.push(col);
    }
  }
  drawProfiles();
}

const CHANNEL_COLOURS = [["#6cf"], ["#f55", "#5d5", "#59f"]];

// Horizontal profile under the image (x axis aligned with the image as drawn), vertical one
// beside it (y aligned).
function drawProfiles() {
  const f = state.frame, p = state.profile;
  const colours = CHANNEL_COLOURS[f && f.colors === 3 ? 1 : 0];
  for (const [id, lines, horizontal] of [["hprofile", p.row, true], ["vprofile", p.col, false]]) {
    const cv = $(id), c = cv.getContext("2d", CANVAS_2D), w = cv.width, h = cv.height;
    c.fillStyle = "#111";
    c.fillRect(0, 0, w, h);
    if (!f || !lines.length) continue;
    let lo = Infinity, hi = -Infinity;
    for (const l of lines) for (const v of l) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (!(hi > lo)) { hi = lo + 1; }
    const bin = horizontal ? f.binX : f.binY;
    lines.forEach((l, k) => {
      c.strokeStyle = colours[k];
      c.beginPath();
      l.forEach((v, i) => {
        // Image position of sample i's centre, on the canvas as the image is drawn.
        const along = horizontal ? toCanvas((i + 0.5) * bin, 0)[0] : toCanvas(0, (i + 0.5) * bin)[1];
        const across = 4 + ((Number.isFinite(v) ? v : lo) - lo) / (hi - lo) * ((horizontal ? h : w) - 20);
        const [x, y] = horizontal ? [along, h - across] : [across, along];
        i ? c.lineTo(x, y) : c.moveTo(x, y);
      });
      c.stroke();
    });
    c.fillStyle = "rgba(17,17,17,0.8)";
    c.fillRect(0, 0, horizontal ? w : 80, horizontal ? 16 : 40);
    c.fillStyle = "#aaa";
    c.font = "11px monospace";
    if (horizontal) {
      c.fillText(`row y ${p.at[1] * f.binY}  ${lo.toPrecision(5)} – ${hi.toPrecision(5)}`, 4, 12);
    } else {
      c.fillText(`col x ${p.at[0] * f.binX}`, 4, 12);
      c.fillText(`${lo.toPrecision(5)} –`, 4, 24);
      c.fillText(`${hi.toPrecision(5)}`, 4, 36);
    }
  }
}

// Histogram of every value of the frame shown (all three colours of an RGB frame), at most
// 256 bins from its minimum to its maximum (integers: bins one value wide when the range is
// narrower). Non-finite floats are counted apart. Returns, for UInt8/UInt16, the count of
// every value (reused between frames), from which the Auto window's percentiles are exact.
let valueCounts = null;
function updateHistogram(f) {
  const px = f.pixels;
  const integer = px instanceof Uint8Array || px instanceof Uint16Array;
  let lo = Infinity, hi = -Infinity, nonFinite = 0, counts = null, binWidth, nb;
  if (integer) {
    const size = px instanceof Uint8Array ? 256 : 65536;
    if (!valueCounts || valueCounts.length !== size) valueCounts = new Uint32Array(size);
    counts = valueCounts;
    counts.fill(0);
    for (let i = 0; i < px.length; i++) counts[px[i]]++;
    lo = counts.findIndex((n) => n > 0);
    for (hi = size - 1; hi > 0 && counts[hi] === 0; hi--);
    if (lo < 0) { lo = 0; hi = 0; }
    nb = Math.min(256, hi - lo + 1);
    binWidth = (hi - lo + 1) / nb;
    const bins = new Uint32Array(nb);
    for (let v = lo; v <= hi; v++) bins[Math.min(nb - 1, Math.floor((v - lo) / binWidth))] += counts[v];
    state.hist = { lo, hi, binWidth, counts: bins, total: px.length, nonFinite };
    return counts;
  }
  for (let i = 0; i < px.length; i++) {
    const v = px[i];
    if (!Number.isFinite(v)) { nonFinite++; continue; }
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!(hi >= lo)) { lo = 0; hi = 0; }
  nb = 256;
  binWidth = hi > lo ? (hi - lo) / nb : 1;
  const bins = new Uint32Array(nb);
  for (let i = 0; i < px.length; i++) {
    const v = px[i];
    if (!Number.isFinite(v)) continue;
    const k = Math.floor((v - lo) / binWidth);
    bins[k < nb ? k : nb - 1]++;
  }
  state.hist = { lo, hi, binWidth, counts: bins, total: px.length - nonFinite, nonFinite };
  return null;
}

// The percentile window from the count of every integer value, leaving out `bad` (the type's
// saturated/no-data value), as percentileWindow does from a sample.
function countsWindow(counts, bad, lowPct, highPct) {
  const n = counts.reduce((a, b) => a + b, 0) - (counts[bad] || 0);
  if (n <= 0) return [0, 1];
  const at = (p) => {
    const rank = Math.min(n - 1, Math.max(0, Math.round((p / 100) * (n - 1))));
    let seen = 0;
    for (let v = 0; v < counts.length; v++) {
      if (v === bad) continue;
      seen += counts[v];
      if (seen > rank) return v;
    }
    return counts.length - 1;
  };
  let lo = at(lowPct), hi = at(highPct);
  if (hi <= lo) hi = lo + 1;
  return [lo, hi];
}

function drawHistogram() {
  const cv = $("hist"), c = cv.getContext("2d", CANVAS_2D), w = cv.width, h = cv.height, hs = state.hist;
  c.fillStyle = "#111";
  c.fillRect(0, 0, w, h);
  if (!hs) return;
  // x: value from lo to hi + one bin; y: log(1 + count).
  const span = hs.lo + hs.binWidth * hs.counts.length - hs.lo;
  const xOf = (v) => 4 + ((v - hs.lo) / span) * (w - 8);
  let top = 0;
  for (const n of hs.counts) top = Math.max(top, Math.log1p(n));
  c.fillStyle = "#6cf";
  const bw = Math.max(1, (w - 8) / hs.counts.length);
  hs.counts.forEach((n, k) => {
    const bh = top > 0 ? (Math.log1p(n) / top) * (h - 22) : 0;
    c.fillRect(xOf(hs.lo + k * hs.binWidth), h - 4 - bh, bw, bh);
  });
  // The window: min and max as vertical lines.
  c.strokeStyle = "#fd3";
  c.lineWidth = 1.5;
  for (const v of state.win) {
    const x = Math.max(1, Math.min(w - 1, xOf(v)));
    c.beginPath(); c.moveTo(x, 16); c.lineTo(x, h); c.stroke();
  }
  c.fillStyle = "#aaa";
  c.font = "11px monospace";
  c.fillText(`histogram ${hs.lo} – ${hs.hi}  (${hs.total} values, log)  window ${state.win.map((v) => +(+v).toPrecision(6)).join(" – ")}`, 4, 12);
}

// An overlay's colour on the page: its Red/Green/Blue values (data values, Mono: Green) scaled
// so the largest is full brightness, which keeps the hue whatever the data type.
function overlayColour(r, g, b) {
  const m = Math.max(r, g, b);
  if (!(m > 0)) return "rgb(255,255,255)";
  return `rgb(${[r, g, b].map((v) => Math.round(255 * Math.max(0, v) / m)).join(",")})`;
}

function drawShapes(c) {
  const z = state.view.zoom;
  for (const o of state.overlays) {
    c.strokeStyle = c.fillStyle = overlayColour(...o.rgb);
    const [x, y] = toCanvas(o.x, o.y);
    const w = o.w * z, h = o.h * z;
    c.lineWidth = Math.max(1.5, Math.min(o.wx, o.wy) * z);
    if (o.shape === "Rectangle") {
      c.strokeRect(x, y, w, h);
    } else if (o.shape === "Ellipse") {
      c.beginPath();
      c.ellipse(x + w / 2, y + h / 2, Math.max(0.5, w / 2), Math.max(0.5, h / 2), 0, 0, 2 * Math.PI);
      c.stroke();
    } else if (o.shape === "Cross") {
      c.beginPath();
      c.moveTo(x, y + h / 2); c.lineTo(x + w, y + h / 2);
      c.moveTo(x + w / 2, y); c.lineTo(x + w / 2, y + h);
      c.stroke();
    } else if (o.shape === "Text") {
      const px = (o.font.startsWith("9x15") ? 15 : 13) * z;
      c.font = `${o.font.includes("Bold") ? "bold " : ""}${px}px monospace`;
      c.textBaseline = "top";
      c.fillText(o.text, x, y);
      c.textBaseline = "alphabetic";
    }
  }
  c.lineWidth = 1.5;
  c.font = "12px sans-serif";
  // The profile point: a dashed cross over the whole image.
  const f = state.frame, p = state.profile;
  if (f && p.at) {
    const [cx, cy] = toCanvas(p.x, p.y);
    c.strokeStyle = p.follow ? "rgba(255,255,255,0.35)" : "rgba(255,210,60,0.8)";
    c.setLineDash([4, 4]);
    c.beginPath();
    c.moveTo(toCanvas(0, 0)[0], cy); c.lineTo(toCanvas(f.fullWidth, 0)[0], cy);
    c.moveTo(cx, toCanvas(0, 0)[1]); c.lineTo(cx, toCanvas(0, f.fullHeight)[1]);
    c.stroke();
    c.setLineDash([]);
  }
}

function drawOverlay() {
  const c = overlay.getContext("2d", CANVAS_2D);
  c.clearRect(0, 0, overlay.width, overlay.height);
  drawShapes(c);
  c.lineWidth = 1.5;
  c.font = "12px sans-serif";
  for (const r of shownRois()) {
    const [x, y] = toCanvas(r.x, r.y);
    c.strokeStyle = r.dragging ? "#ff0" : r.kind === "roistat" ? "#0ff" : "#0f0";
    c.strokeRect(x, y, r.w * state.view.zoom, r.h * state.view.zoom);
    c.fillStyle = c.strokeStyle;
    c.fillText(r.name, x + 3, y + 13);
    c.fillRect(x + r.w * state.view.zoom - 4, y + r.h * state.view.zoom - 4, 8, 8);
  }
}

let drag = null;

function shownRois() {
  return state.rois.filter((r) => r.kind !== "roistat" || (r.used && r.known));
}

function roiAt(cx, cy) {
  const [ix, iy] = toImage(cx, cy);
  const grip = 8 / state.view.zoom;
  for (const r of shownRois()) {
    if (Math.abs(ix - (r.x + r.w)) < grip && Math.abs(iy - (r.y + r.h)) < grip) return [r, "size"];
  }
  for (const r of shownRois()) {
    if (ix >= r.x && iy >= r.y && ix < r.x + r.w && iy < r.y + r.h) return [r, "move"];
  }
  return [null, null];
}

overlay.addEventListener("mousedown", (e) => {
  const [r, mode] = roiAt(e.offsetX, e.offsetY);
  drag = { x: e.offsetX, y: e.offsetY, roi: r, mode, start: r ? { ...r } : { ...state.view } };
  if (r) r.dragging = true;
});

// Moves the profile point to full-frame (x, y); `pin` stops it following the cursor.
function setProfilePoint(x, y, pin) {
  const p = state.profile;
  if (pin !== undefined) {
    p.follow = !pin;
    $("follow").checked = p.follow;
  }
  p.x = x; p.y = y;
  updateProfile();
  drawOverlay();
}

overlay.addEventListener("mousemove", (e) => {
  const [ix, iy] = toImage(e.offsetX, e.offsetY);
  const v = valueAt(ix, iy);
  $("readout").textContent = `x ${Math.floor(ix)} y ${Math.floor(iy)} value ${v === undefined ? "–" : v}`;
  if (drag) drag.moved = drag.moved || Math.abs(e.offsetX - drag.x) + Math.abs(e.offsetY - drag.y) > 3;
  if (!drag && state.profile.follow && v !== undefined) setProfilePoint(ix, iy);
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

window.addEventListener("mouseup", async (e) => {
  const d = drag;
  drag = null;
  if (d && !d.moved && !d.roi && e.target === overlay) {
    // A click on the image (not a drag): the profiles stay at that point.
    const [ix, iy] = toImage(e.offsetX, e.offsetY);
    if (valueAt(ix, iy) !== undefined) setProfilePoint(ix, iy, true);
    return;
  }
  if (!d || !d.roi) return;
  if (!d.moved) { d.roi.dragging = false; drawOverlay(); return; }
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
$("fit").onclick = () => { if (state.frame) { fit(state.frame); render(); drawProfiles(); } };
$("follow").onchange = () => { state.profile.follow = $("follow").checked; drawOverlay(); };
$("cmap").onchange = () => { renderer.setColormap($("cmap").value); render(); };
$("scale").onchange = render;
for (const id of ["lo", "hi"]) {
  $(id).onchange = () => {
    $("auto").checked = false;
    state.win = [+$("lo").value, +$("hi").value];
    render();
    drawHistogram();
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
  const shape = f.colors === 3 ? `${f.height}, ${f.width}, 3` : `${f.height}, ${f.width}`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape}), }`;
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
  state.rois = ports.filter((p) => p.type === "roi").map((p) => ({ kind: "roi", name: p.name, prefix: p.prefix, x: 0, y: 0, w: 0, h: 0 }));
  // ROIStat ROIs: which of 1…32 a port has (MaxROIs) is found by asking for all once.
  state.roistats = ports.filter((p) => p.type === "roistat").map((p) => ({ name: p.name, prefix: p.prefix, present: null }));
  state.overlayPorts = ports.filter((p) => p.type === "overlay").map((p) => ({ name: p.name, prefix: p.prefix, used: new Set() }));
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
  for (const rs of state.roistats) {
    for (const n of rs.present || Array.from({ length: 32 }, (_, i) => i + 1)) names.push(`${rs.prefix}${n}:Use_RBV`, `${rs.prefix}${n}:Name_RBV`);
  }
  for (const op of state.overlayPorts) {
    for (let n = 1; n <= 8; n++) {
      names.push(`${op.prefix}${n}:Use_RBV`);
      if (op.used.has(n)) for (const k of OVERLAY_FIELDS) names.push(`${op.prefix}${n}:${k}_RBV`);
    }
  }
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
  pollShapes(v);
  const now = performance.now();
  for (const r of state.rois) {
    if (r.dragging || (r.heldUntil && now < r.heldUntil)) continue;
    const g = ["MinX", "MinY", "SizeX", "SizeY"].map((n) => v[`${r.prefix}${n}_RBV`]);
    if (g.some((x) => x === undefined)) continue;  // not asked yet (a ROIStat ROI just found)
    [r.x, r.y, r.w, r.h] = g.map((x) => x ?? 0);
    r.known = true;
  }
  drawOverlay();
}

const OVERLAY_FIELDS = ["Shape", "PositionX", "PositionY", "SizeX", "SizeY", "WidthX", "WidthY", "Red", "Green", "Blue", "DisplayText", "Font"];

// ROIStat ROIs and overlays in use, from one poll's values.
function pollShapes(v) {
  for (const rs of state.roistats) {
    if (!rs.present) {
      rs.present = [];
      for (let n = 1; n <= 32; n++) {
        if (v[`${rs.prefix}${n}:Use_RBV`] === null || v[`${rs.prefix}${n}:Use_RBV`] === undefined) continue;
        rs.present.push(n);
        state.rois.push({ kind: "roistat", name: `${rs.name}:${n}`, prefix: `${rs.prefix}${n}:`, x: 0, y: 0, w: 0, h: 0, used: false });
      }
    }
    for (const n of rs.present) {
      const r = state.rois.find((r) => r.prefix === `${rs.prefix}${n}:`);
      r.used = v[`${rs.prefix}${n}:Use_RBV`] === "Yes";
      const label = v[`${rs.prefix}${n}:Name_RBV`];
      r.name = label ? `${rs.name}:${n} ${label}` : `${rs.name}:${n}`;
    }
  }
  const overlays = [];
  for (const op of state.overlayPorts) {
    const was = new Set(op.used);
    op.used.clear();
    for (let n = 1; n <= 8; n++) {
      if (v[`${op.prefix}${n}:Use_RBV`] !== "Yes") continue;
      op.used.add(n);
      if (!was.has(n)) continue;
      const g = (k) => v[`${op.prefix}${n}:${k}_RBV`];
      overlays.push({
        port: op.name, n, shape: g("Shape"), x: g("PositionX"), y: g("PositionY"), w: g("SizeX"), h: g("SizeY"),
        wx: g("WidthX"), wy: g("WidthY"), rgb: [g("Red"), g("Green"), g("Blue")], text: g("DisplayText") || "", font: g("Font") || "6x13",
      });
    }
  }
  state.overlays = overlays;
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
  state, valueAt, toCanvas, toImage, npyBytes, tab, colormapLut, setProfilePoint, overlayColour, countsWindow,
  setWindow(lo, hi) { $("auto").checked = false; state.win = [lo, hi]; $("lo").value = lo; $("hi").value = hi; render(); drawHistogram(); },
  setColormap(name) { $("cmap").value = name; renderer.setColormap(name); render(); },
};

setup().catch((e) => message(e.message));
