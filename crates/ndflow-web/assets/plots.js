// Small time-series plots on 2-D canvases (no library) and the pipeline table.
"use strict";

// The page's 2-D canvases (plots, profiles, histogram, the overlay) are drawn in software:
// small, redrawn every frame, and without a GPU (SwiftShader) an accelerated 2-D canvas
// costs more than it saves.
const CANVAS_2D = { willReadFrequently: true };

class TimePlot {
  constructor(parent, title, maxPoints = 300) {
    this.title = title;
    this.max = maxPoints;
    this.points = [];
    this.canvas = document.createElement("canvas");
    this.canvas.width = 400;
    this.canvas.height = 90;
    this.canvas.className = "plot";
    this.canvas.dataset.title = title;
    parent.appendChild(this.canvas);
  }

  add(t, v) {
    if (typeof v !== "number" || !Number.isFinite(v)) return;
    this.points.push([t, v]);
    if (this.points.length > this.max) this.points.shift();
    this.draw();
  }

  draw() {
    const c = this.canvas.getContext("2d", CANVAS_2D), w = this.canvas.width, h = this.canvas.height;
    c.fillStyle = "#111";
    c.fillRect(0, 0, w, h);
    const pts = this.points;
    c.fillStyle = "#aaa";
    c.font = "11px monospace";
    const last = pts.length ? pts[pts.length - 1][1] : NaN;
    c.fillText(`${this.title}  ${Number.isFinite(last) ? last.toPrecision(6) : "–"}  (${pts.length})`, 4, 12);
    if (pts.length < 2) return;
    let lo = Infinity, hi = -Infinity;
    for (const [, v] of pts) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (hi === lo) { hi += 1; lo -= 1; }
    const t0 = pts[0][0], t1 = pts[pts.length - 1][0] || t0 + 1;
    const x = (t) => 4 + ((t - t0) / Math.max(1e-9, t1 - t0)) * (w - 8);
    const y = (v) => h - 4 - ((v - lo) / (hi - lo)) * (h - 22);
    c.strokeStyle = "#6cf";
    c.beginPath();
    pts.forEach(([t, v], i) => (i ? c.lineTo(x(t), y(v)) : c.moveTo(x(t), y(v))));
    c.stroke();
    c.fillStyle = "#777";
    c.fillText(hi.toPrecision(4), w - 60, 24);
    c.fillText(lo.toPrecision(4), w - 60, h - 6);
  }
}

// One row per port: rate, queue, drops by reason, execution time.
function renderPipeline(tbody, ports) {
  const num = (v, d = 0) => (typeof v === "number" ? v.toFixed(d) : v ?? "");
  tbody.innerHTML = "";
  for (const p of ports) {
    const tr = document.createElement("tr");
    tr.dataset.port = p.name;
    const queue = typeof p.QueueSize === "number" ? `${p.QueueSize - (p.QueueFree ?? 0)}/${p.QueueSize}` : "";
    const processed = p.ArraysProcessed ?? p.ArrayCounter;
    const cells = [p.name, p.type, p.NDArrayPort ?? p.DetectorState ?? "", num(p.ArrayRate, 1), num(processed), queue,
      num(p.DroppedQueueFull), num(p.DroppedMinTime), num(p.DroppedUnsupported), num(p.DroppedDisabled),
      num(p.DroppedErrors), num(p.ExecutionTime, 3)];
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = c;
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }
}
