#!/usr/bin/env python3
"""Frames a browser displays from an ndflow IOC's live web viewer: part (c) of `ndflow bench web`.

Opens the viewer page at --url in headless Chromium (Debian's /usr/bin/chromium driven by
Playwright; WebGL2 through SwiftShader, as python/tests/test_web_viewer.py runs it), waits
--warmup seconds after the first frames are drawn, then counts for --seconds, in a
requestAnimationFrame loop on the page:

- raf: animation frames (the most frames the page could display: the reference);
- displayed: animation frames in which a new image had been drawn since the previous one
  (what a user sees change);
- drawn: images drawn (the page draws each frame as it arrives; two between animation
  frames count twice here and once in displayed).

Prints one JSON line: {"raf_per_s", "displayed_per_s", "drawn_per_s", "seconds", "width",
"height", "bin", "dtype", "full_width", "full_height"} or {"error": why}. Never installs browsers: it needs
Playwright in this Python and /usr/bin/chromium. The page and the IOC are on 127.0.0.1; the
browser's own background networking is off.
"""

import argparse
import json
import os
import sys
import time

# SwiftShader's software WebGL (no GPU needed); no network traffic of the browser's own.
# python/tests/test_web_viewer.py launches the browser with the same flags.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

COUNTER = """(seconds) => new Promise((resolve) => {
  const s = window.ndviewer.state;
  let raf = 0, displayed = 0, last = s.drawn;
  const drawn0 = s.drawn, t0 = performance.now();
  function tick(now) {
    raf++;
    if (s.drawn !== last) { displayed++; last = s.drawn; }
    if (now - t0 < seconds * 1000) { requestAnimationFrame(tick); return; }
    const secs = (now - t0) / 1000, f = s.frame;
    resolve({ raf_per_s: raf / secs, displayed_per_s: displayed / secs,
              drawn_per_s: (s.drawn - drawn0) / secs, seconds: secs,
              width: f.width, height: f.height, bin: f.binX, dtype: f.dtype,
              full_width: f.fullWidth, full_height: f.fullHeight });
  }
  requestAnimationFrame(tick);
})"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    a = ap.parse_args()
    if not os.path.exists(a.chromium):
        print(json.dumps({"error": f"{a.chromium} not found (Debian: apt install chromium)"}))
        return 1
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        print(json.dumps({"error": f"Playwright is not importable in {sys.executable}: {e}"}))
        return 1
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=a.chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(a.url)
            deadline = time.time() + 30
            while not page.evaluate("window.ndviewer && window.ndviewer.state.drawn > 2"):
                if time.time() > deadline:
                    print(json.dumps({"error": f"no frames drawn within 30 s; page errors: {errors}"}))
                    return 1
                time.sleep(0.1)
            time.sleep(a.warmup)
            r = page.evaluate(COUNTER, a.seconds)
            if errors:
                r["page_errors"] = errors
            print(json.dumps(r), flush=True)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
