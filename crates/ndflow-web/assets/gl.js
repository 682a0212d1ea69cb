// WebGL2 image rendering at full bit depth: the frame is uploaded as it came (R8UI, R16UI or
// R32F; RGB frames as RGB8UI, RGB16UI or RGB32F) and window/level, lin/log/sqrt and the colour
// map (Mono only: an RGB frame is shown in its own colours, each channel through the same
// window) are applied in the fragment shader, so changing them never touches the pixels or
// the server.
"use strict";

// Colour maps as stops (position, RGB) interpolated to 256 entries. grey and hot are exact
// formulas; viridis and inferno are matplotlib's maps sampled every 0.1.
const STOPS = {
  viridis: ["440154", "482475", "414487", "355f8d", "2a788e", "21918c", "22a884", "44bf70", "7ad151", "bddf26", "fde725"],
  inferno: ["000004", "160b39", "420a68", "6a176e", "932667", "bc3754", "dd513a", "f37819", "fca50a", "f6d746", "fcffa4"],
};

// The 256 RGB entries of colour map `name`, as one Uint8Array of 256*4 (RGBA).
function colormapLut(name) {
  const lut = new Uint8Array(256 * 4);
  const clamp = (v) => Math.max(0, Math.min(255, Math.round(v * 255)));
  for (let i = 0; i < 256; i++) {
    const t = i / 255;
    let rgb;
    if (name === "hot") {
      rgb = [3 * t, 3 * t - 1, 3 * t - 2].map(clamp);
    } else if (STOPS[name]) {
      const s = STOPS[name], x = t * (s.length - 1), k = Math.min(Math.floor(x), s.length - 2), f = x - k;
      const c = (h, j) => parseInt(h.slice(2 * j, 2 * j + 2), 16);
      rgb = [0, 1, 2].map((j) => Math.round(c(s[k], j) * (1 - f) + c(s[k + 1], j) * f));
    } else {
      rgb = [i, i, i];
    }
    lut.set([rgb[0], rgb[1], rgb[2], 255], 4 * i);
  }
  return lut;
}

const VERTEX = `#version 300 es
in vec2 a_pos;
void main() { gl_Position = vec4(a_pos, 0.0, 1.0); }`;

// One fragment shader per sampler kind: unsigned integer (u8, u16) or float.
function fragment(sampler) {
  return `#version 300 es
precision highp float;
precision highp int;
precision highp ${sampler};
uniform ${sampler} u_img;
uniform sampler2D u_lut;
uniform vec2 u_off;      // canvas position of image pixel (0,0), top-left origin
uniform float u_zoom;    // canvas pixels per full-frame pixel
uniform float u_bin;     // full-frame pixels per texel
uniform float u_height;  // canvas height
uniform vec2 u_win;      // window: low, high
uniform int u_scale;     // 0 lin, 1 log, 2 sqrt
uniform int u_rgb;       // 1: the texture holds R, G, B values
out vec4 o;
float level(float v) {
  float t = (u_win.y > u_win.x) ? clamp((v - u_win.x) / (u_win.y - u_win.x), 0.0, 1.0) : step(u_win.x, v);
  if (u_scale == 1) t = log(1.0 + 1000.0 * t) / log(1001.0);
  else if (u_scale == 2) t = sqrt(t);
  return clamp(floor(t * 255.0 + 0.5), 0.0, 255.0);
}
void main() {
  vec2 c = vec2(gl_FragCoord.x, u_height - gl_FragCoord.y);
  vec2 p = floor((c - u_off) / u_zoom / u_bin);
  ivec2 size = textureSize(u_img, 0);
  if (p.x < 0.0 || p.y < 0.0 || p.x >= float(size.x) || p.y >= float(size.y)) {
    o = vec4(0.08, 0.08, 0.09, 1.0);
    return;
  }
  if (u_rgb == 1) {
    vec3 c = vec3(texelFetch(u_img, ivec2(p), 0).rgb);
    o = vec4(level(c.r) / 255.0, level(c.g) / 255.0, level(c.b) / 255.0, 1.0);
    return;
  }
  float v = float(texelFetch(u_img, ivec2(p), 0).r);
  int i = int(level(v));
  o = vec4(texelFetch(u_lut, ivec2(i, 0), 0).rgb, 1.0);
}`;
}

class Renderer {
  constructor(canvas) {
    // preserveDrawingBuffer: snapshots and tests read the canvas after it was drawn.
    const gl = canvas.getContext("webgl2", { preserveDrawingBuffer: true, antialias: false });
    if (!gl) throw new Error("WebGL2 is not available in this browser");
    this.gl = gl;
    this.canvas = canvas;
    this.programs = { uint: this.program(fragment("usampler2D")), float: this.program(fragment("sampler2D")) };
    const buf = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, buf);
    gl.bufferData(gl.ARRAY_BUFFER, new Float32Array([-1, -1, 1, -1, -1, 1, 1, 1]), gl.STATIC_DRAW);
    this.image = gl.createTexture();
    this.lut = gl.createTexture();
    this.kind = "uint";
    this.setColormap("grey");
  }

  program(fsrc) {
    const gl = this.gl;
    const compile = (type, src) => {
      const s = gl.createShader(type);
      gl.shaderSource(s, src);
      gl.compileShader(s);
      if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
      return s;
    };
    const p = gl.createProgram();
    gl.attachShader(p, compile(gl.VERTEX_SHADER, VERTEX));
    gl.attachShader(p, compile(gl.FRAGMENT_SHADER, fsrc));
    gl.linkProgram(p);
    if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(p));
    return p;
  }

  setColormap(name) {
    const gl = this.gl;
    this.lutData = colormapLut(name);
    gl.bindTexture(gl.TEXTURE_2D, this.lut);
    gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA8, 256, 1, 0, gl.RGBA, gl.UNSIGNED_BYTE, this.lutData);
    this.nearest();
  }

  nearest() {
    const gl = this.gl;
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
  }

  // Uploads a frame's pixels (typed array of width*height*colors; colors 1 or 3, RGB
  // interleaved) as its own texture format.
  upload(pixels, width, height, colors = 1) {
    const gl = this.gl;
    const rgb = colors === 3;
    gl.pixelStorei(gl.UNPACK_ALIGNMENT, 1);
    gl.bindTexture(gl.TEXTURE_2D, this.image);
    if (pixels instanceof Uint8Array) {
      gl.texImage2D(gl.TEXTURE_2D, 0, rgb ? gl.RGB8UI : gl.R8UI, width, height, 0, rgb ? gl.RGB_INTEGER : gl.RED_INTEGER, gl.UNSIGNED_BYTE, pixels);
      this.kind = "uint";
    } else if (pixels instanceof Uint16Array) {
      gl.texImage2D(gl.TEXTURE_2D, 0, rgb ? gl.RGB16UI : gl.R16UI, width, height, 0, rgb ? gl.RGB_INTEGER : gl.RED_INTEGER, gl.UNSIGNED_SHORT, pixels);
      this.kind = "uint";
    } else {
      gl.texImage2D(gl.TEXTURE_2D, 0, rgb ? gl.RGB32F : gl.R32F, width, height, 0, rgb ? gl.RGB : gl.RED, gl.FLOAT, pixels);
      this.kind = "float";
    }
    this.rgb = rgb;
    this.nearest();
  }

  // view: {offX, offY, zoom, bin}; win: [lo, hi]; scale: 0 lin, 1 log, 2 sqrt.
  draw(view, win, scale) {
    const gl = this.gl;
    const p = this.programs[this.kind];
    gl.viewport(0, 0, this.canvas.width, this.canvas.height);
    gl.useProgram(p);
    const loc = gl.getAttribLocation(p, "a_pos");
    gl.enableVertexAttribArray(loc);
    gl.vertexAttribPointer(loc, 2, gl.FLOAT, false, 0, 0);
    gl.activeTexture(gl.TEXTURE0);
    gl.bindTexture(gl.TEXTURE_2D, this.image);
    gl.uniform1i(gl.getUniformLocation(p, "u_img"), 0);
    gl.activeTexture(gl.TEXTURE1);
    gl.bindTexture(gl.TEXTURE_2D, this.lut);
    gl.uniform1i(gl.getUniformLocation(p, "u_lut"), 1);
    gl.uniform2f(gl.getUniformLocation(p, "u_off"), view.offX, view.offY);
    gl.uniform1f(gl.getUniformLocation(p, "u_zoom"), view.zoom);
    gl.uniform1f(gl.getUniformLocation(p, "u_bin"), view.bin);
    gl.uniform1f(gl.getUniformLocation(p, "u_height"), this.canvas.height);
    gl.uniform2f(gl.getUniformLocation(p, "u_win"), win[0], win[1]);
    gl.uniform1i(gl.getUniformLocation(p, "u_scale"), scale);
    gl.uniform1i(gl.getUniformLocation(p, "u_rgb"), this.rgb ? 1 : 0);
    gl.drawArrays(gl.TRIANGLE_STRIP, 0, 4);
  }
}

// The frame header (see the server's header.rs): returns null when it is not a frame.
function parseFrame(buf) {
  if (buf.byteLength < 48) return null;
  const d = new DataView(buf);
  if (String.fromCharCode(d.getUint8(0), d.getUint8(1), d.getUint8(2), d.getUint8(3)) !== "NDFW") return null;
  const version = d.getUint16(4, true);
  if (version !== 1 && version !== 2) return null;
  const at = d.getUint16(6, true);
  const h = {
    uid: d.getInt32(8, true), ndims: d.getUint8(12), dtype: d.getUint8(13), codec: d.getUint8(14),
    ts: d.getFloat64(16, true), width: d.getUint32(24, true), height: d.getUint32(28, true),
    fullWidth: d.getUint32(32, true), fullHeight: d.getUint32(36, true),
    binX: d.getUint16(40, true), binY: d.getUint16(42, true), skipped: d.getUint32(44, true),
    // Version 2: byte 15 is the colour mode (0 Mono, 2 RGB1: three values a pixel).
    colorMode: version >= 2 ? d.getUint8(15) : 0,
  };
  if (h.colorMode !== 0 && h.colorMode !== 2) return null;
  h.colors = h.colorMode === 2 ? 3 : 1;
  const n = h.width * h.height * h.colors;
  if (buf.byteLength < at + n * (h.dtype === 1 ? 1 : h.dtype === 3 ? 2 : 4)) return null;
  // NDDataType: 1 UInt8, 3 UInt16, 8 Float32 are what the server sends.
  if (h.dtype === 1) h.pixels = new Uint8Array(buf, at, n);
  else if (h.dtype === 3) h.pixels = new Uint16Array(buf, at, n);
  else if (h.dtype === 8) h.pixels = new Float32Array(buf, at, n);
  else return null;
  return h;
}

// Percentile window over the pixels, leaving out the type's saturated/no-data value (2^N-1
// for u8/u16: a detector's bad and gap pixels) and non-finite floats. At most ~256k samples.
function percentileWindow(pixels, lowPct, highPct) {
  const stride = Math.max(1, Math.floor(pixels.length / 262144));
  const bad = pixels instanceof Uint8Array ? 255 : pixels instanceof Uint16Array ? 65535 : null;
  const sample = [];
  for (let i = 0; i < pixels.length; i += stride) {
    const v = pixels[i];
    if (v === bad || !Number.isFinite(v)) continue;
    sample.push(v);
  }
  if (!sample.length) return [0, 1];
  const s = Float64Array.from(sample).sort();
  const at = (p) => s[Math.min(s.length - 1, Math.max(0, Math.round((p / 100) * (s.length - 1))))];
  let lo = at(lowPct), hi = at(highPct);
  if (hi <= lo) hi = lo + 1;
  return [lo, hi];
}
