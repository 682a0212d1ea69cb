"""The live web viewer (`ndflow run --web PORT`) in a real browser: Debian's chromium, headless,
driven by Playwright, WebGL2 through SwiftShader.

One IOC and one page serve every test (module fixtures), to keep the file fast. The simulated
detector draws a UInt16 ramp, value(x, y) = x + 256·y + n on frame n, so every pixel's value
is known; the tests read values and colours back from the page and check them against the
ramp and the colour map's definition, watch uniqueId advance and stop on pause, drag an ROI
and read ROI1:MinX over pvAccess (p4p), and watch the plots and the pipeline table fill. The
line profiles are compared with the ramp's row and column, the histogram's counts with the
ramp's (uniform) distribution, an overlay's and a ROIStat ROI's outlines are read back from the
overlay canvas at their configured positions (and the ROIStat ROI dragged), and an RGB1 stream
from a second simulated detector is read back in colour.

Loopback only: the IOC's EPICS servers and its web server use free ports on 127.0.0.1
(pva_util.NdflowIoc, netenv.py); the browser runs with its background networking off.
"""

import io
import json
import pathlib
import sys
import time
import urllib.request

import numpy as np
import pytest
from netenv import free_tcp_port
from pva_util import NdflowIoc

playwright_sync = pytest.importorskip("playwright.sync_api")

CHROMIUM = "/usr/bin/chromium"
# The browser's flags are the viewer benchmark's (SwiftShader's software WebGL, no network
# traffic of the browser's own): one list for both.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
from bench_web import CHROMIUM_ARGS  # noqa: E402

W, H = 256, 128
RW, RH = 64, 32
CONFIG = f"""
prefix = "WEBT:"

[[access]]
pvs = "WEBT:cam1:NumImages"
rights = "read"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = {W}
MaxSizeY = {H}
DataType = "UInt16"
SimMode = "LinearRamp"
Gain = 1.0
GainX = 1.0
GainY = 256.0
ImageMode = "Continuous"
AcquireTime = 0.01
AcquirePeriod = 0.05
Acquire = 1

[[port]]
name = "ROI1"
type = "roi"
prefix = "ROI1:"
NDArrayPort = "SIM1"
MinX = 32
MinY = 16
SizeX = 64
SizeY = 32

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "ROI1"
ComputeStatistics = "Yes"
ComputeCentroid = "Yes"

[[port]]
name = "WEB1"
type = "web"
prefix = "web1:"
NDArrayPort = "SIM1"

[[port]]
name = "CODEC1"
type = "codec"
prefix = "Codec1:"
NDArrayPort = "SIM1"
Mode = "Compress"
Compressor = "LZ4"

[[port]]
name = "WEB2"
type = "web"
prefix = "web2:"
NDArrayPort = "CODEC1"
MaxSize = 64

[[port]]
name = "OVER1"
type = "overlay"
prefix = "Over1:"
NDArrayPort = "SIM1"
EnableCallbacks = 0
"1:Use" = 1
"1:Shape" = "Rectangle"
"1:PositionX" = 100
"1:PositionY" = 40
"1:SizeX" = 50
"1:SizeY" = 30
"1:Red" = 65535
"1:Green" = 0
"1:Blue" = 0
"2:Use" = 1
"2:Shape" = "Text"
"2:PositionX" = 180
"2:PositionY" = 100
"2:SizeX" = 60
"2:SizeY" = 15
"2:DisplayText" = "ndflow"

[[port]]
name = "RSTAT1"
type = "roistat"
prefix = "ROIStat1:"
NDArrayPort = "SIM1"
"1:Use" = 1
"1:MinX" = 150
"1:MinY" = 60
"1:SizeX" = 40
"1:SizeY" = 20

[[port]]
name = "SIM2"
type = "sim"
prefix = "cam2:"
MaxSizeX = {RW}
MaxSizeY = {RH}
DataType = "UInt16"
ColorMode = "RGB1"
SimMode = "LinearRamp"
Gain = 1.0
GainX = 1.0
GainY = {RW}.0
GainRed = 1.0
GainGreen = 0.0
GainBlue = 2.0
ImageMode = "Continuous"
AcquireTime = 0.01
AcquirePeriod = 0.1
Acquire = 1

[[port]]
name = "WEB3"
type = "web"
prefix = "web3:"
NDArrayPort = "SIM2"
"""


def wait_until(fn, timeout=10.0, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.05)
    pytest.fail(f"{what} not reached within {timeout} s (last {last!r})")


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("web")
    port = free_tcp_port()
    ioc = NdflowIoc(ndflow_bin, tmp, CONFIG, args=("--web", str(port), "--no-state"))
    ioc.url = f"http://127.0.0.1:{port}/"
    ioc.tmp = tmp

    def up():
        try:
            with urllib.request.urlopen(ioc.url + "api/ports", timeout=1) as r:
                return json.load(r)
        except OSError:
            return None

    ioc.wait_for("WEBT:cam1:ArrayCounter_RBV", lambda v: v > 2)
    wait_until(up, what="the web server answering")
    yield ioc
    ioc.close()


@pytest.fixture(scope="module")
def page(ioc):
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        pg = ctx.new_page()
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(ioc.url)
        pg.errors = errors
        wait_until(lambda: pg.evaluate("window.ndviewer && window.ndviewer.state.drawn > 2"),
                   what="frames drawn")
        yield pg
        pg.screenshot(path=str(ioc.tmp / "web-viewer-last.png"))
        browser.close()
    assert not errors, errors


def canvas_rgb(page, cx, cy):
    """The RGB the WebGL canvas shows at canvas pixel (cx, cy)."""
    return page.evaluate(
        """([x, y]) => {
            const c = document.getElementById('gl');
            const t = document.createElement('canvas');
            t.width = c.width; t.height = c.height;
            const g = t.getContext('2d');
            g.drawImage(c, 0, 0);
            return Array.from(g.getImageData(x, y, 1, 1).data.slice(0, 3));
        }""",
        [cx, cy],
    )


def hot(t):
    """The 'hot' map's definition: red, then green, then blue rise over thirds."""
    c = lambda v: max(0, min(255, round(v * 255)))  # noqa: E731
    return [c(3 * t), c(3 * t - 1), c(3 * t - 2)]


def set_paused(page, paused):
    if page.evaluate("window.ndviewer.state.paused") != paused:
        page.click("#pause")


def test_pixels_follow_the_ramp_and_the_colour_map(page, ioc):
    set_paused(page, True)
    f = page.evaluate("({uid: ndviewer.state.frame.uid, w: ndviewer.state.frame.fullWidth,"
                      " h: ndviewer.state.frame.fullHeight, bin: ndviewer.state.frame.binX})")
    assert (f["w"], f["h"], f["bin"]) == (W, H, 1)
    base = page.evaluate("ndviewer.valueAt(0, 0)")
    points = [(0, 0), (10, 0), (255, 0), (0, 1), (17, 33), (200, 100), (255, 127)]
    for x, y in points:
        assert page.evaluate(f"ndviewer.valueAt({x}, {y})") == (base + x + 256 * y) % 65536
    # A fixed window over the frame's values, then two maps: every pixel's colour is the map at
    # its normalised value (entry round(t·255)).
    lo, hi = base, base + 32767
    page.evaluate(f"ndviewer.setWindow({lo}, {hi})")
    for cmap, expect in [("grey", lambda t: [round(t * 255)] * 3), ("hot", hot)]:
        page.evaluate(f"ndviewer.setColormap('{cmap}')")
        for x, y in points:
            cx, cy = page.evaluate(f"ndviewer.toCanvas({x} + 0.5, {y} + 0.5).map(Math.floor)")
            t = ((base + x + 256 * y) - lo) / (hi - lo)
            want = expect(round(t * 255) / 255)
            got = canvas_rgb(page, cx, cy)
            # One map entry either way where float rounding meets a boundary (3 levels for hot).
            assert all(abs(a - b) <= 3 for a, b in zip(got, want)), (cmap, x, y, got, want)
    page.screenshot(path=str(ioc.tmp / "web-viewer-hot.png"))
    # The .npy snapshot is the frame shown, element for element.
    raw = bytes(page.evaluate("Array.from(ndviewer.npyBytes(ndviewer.state.frame))"))
    a = np.load(io.BytesIO(raw))
    assert a.shape == (H, W) and a.dtype == np.uint16
    assert int(a[33, 17]) == (base + 17 + 256 * 33) % 65536
    with page.expect_download() as dl:
        page.click("#snap-png")
    png = ioc.tmp / "snapshot.png"
    dl.value.save_as(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page.evaluate("ndviewer.setColormap('viridis')")
    page.check("#auto")
    set_paused(page, False)


def test_unique_id_advances_and_pause_stops_updates(page, ioc):
    set_paused(page, False)
    uid0 = page.evaluate("ndviewer.state.frame.uid")
    wait_until(lambda: page.evaluate("ndviewer.state.frame.uid") > uid0 + 3, what="uniqueId advancing")
    assert int(page.text_content("#uid")) >= uid0
    set_paused(page, True)
    time.sleep(0.2)
    uid_p, drawn_p = page.evaluate("[ndviewer.state.frame.uid, ndviewer.state.drawn]")
    counter = ioc.ctx.get("WEBT:cam1:ArrayCounter_RBV")
    time.sleep(1.0)
    assert page.evaluate("[ndviewer.state.frame.uid, ndviewer.state.drawn]") == [uid_p, drawn_p]
    assert ioc.ctx.get("WEBT:cam1:ArrayCounter_RBV") > counter + 5, "the detector went on"
    set_paused(page, False)
    wait_until(lambda: page.evaluate("ndviewer.state.frame.uid") > uid_p, what="resumed")


def test_dragging_an_roi_writes_its_position(page, ioc):
    wait_until(lambda: page.evaluate("ndviewer.state.rois[0] && ndviewer.state.rois[0].w") == 64,
               what="ROI1 drawn")
    x0, y0 = page.evaluate("ndviewer.toCanvas(32 + 32, 16 + 16)")
    zoom = page.evaluate("ndviewer.state.view.zoom")
    box = page.locator("#overlay").bounding_box()
    page.mouse.move(box["x"] + x0, box["y"] + y0)
    page.mouse.down()
    for k in range(1, 6):
        page.mouse.move(box["x"] + x0 + k * 4 * zoom, box["y"] + y0 + k * 2 * zoom)
    page.mouse.up()
    ioc.wait_for("WEBT:ROI1:MinX_RBV", lambda v: v == 52)
    ioc.wait_for("WEBT:ROI1:MinY_RBV", lambda v: v == 26)
    assert ioc.ctx.get("WEBT:ROI1:MinX") == 52
    page.screenshot(path=str(ioc.tmp / "web-viewer-roi.png"))


def test_controls_write_through_the_put_path_and_access_rules(page, ioc):
    page.fill("#AcquirePeriod", "0.04")
    page.dispatch_event("#AcquirePeriod", "change")
    ioc.wait_for("WEBT:cam1:AcquirePeriod_RBV", lambda v: abs(v - 0.04) < 1e-9)
    # NumImages is read-only for everyone by the config's [[access]] rule.
    before = ioc.ctx.get("WEBT:cam1:NumImages_RBV")
    page.fill("#NumImages", "7")
    page.dispatch_event("#NumImages", "change")
    wait_until(lambda: "no write access" in (page.text_content("#message") or ""),
               what="the refusal shown")
    assert ioc.ctx.get("WEBT:cam1:NumImages_RBV") == before


def test_plots_gain_points_and_the_pipeline_is_live(page, ioc):
    n0 = page.evaluate("ndviewer.state.plots.MeanValue.points.length")
    wait_until(lambda: page.evaluate("ndviewer.state.plots.MeanValue.points.length") >= n0 + 3,
               what="stats points")
    mean = page.evaluate("ndviewer.state.plots.MeanValue.points.at(-1)[1]")
    assert mean > 0
    page.click("#tab-pipeline")
    assert page.locator("#pipeline").is_visible() and not page.locator("#gl").is_visible()
    row = "#pipeline tr[data-port='WEB1'] td"
    wait_until(lambda: page.locator(row).count() > 0, what="the pipeline table")
    cells = page.locator("#pipeline tr[data-port='SIM1'] td").all_text_contents()
    assert cells[0] == "SIM1" and float(cells[3]) > 5, cells
    web = page.locator(row).all_text_contents()
    assert web[1] == "web" and int(web[4]) > 0, web
    page.screenshot(path=str(ioc.tmp / "web-viewer-pipeline.png"))
    page.click("#tab-image")
    assert page.locator("#gl").is_visible()


def test_a_compressed_stream_is_decoded_and_binned_on_the_server(page, ioc):
    page.select_option("#stream", "WEB2")
    wait_until(lambda: page.evaluate("ndviewer.state.frame.binX") == 4, what="a binned frame")
    set_paused(page, True)
    f = page.evaluate("({w: ndviewer.state.frame.width, h: ndviewer.state.frame.height})")
    assert f == {"w": W // 4, "h": H // 4}
    # Block means of the ramp: neighbouring blocks differ by 4 in x and 4·256 in y.
    v = lambda x, y: page.evaluate(f"ndviewer.valueAt({x}, {y})")  # noqa: E731
    assert v(4, 0) - v(0, 0) == 4
    assert v(0, 4) - v(0, 0) == 1024
    assert v(60, 20) - v(0, 0) == 60 + 20 * 256
    assert ioc.ctx.get("WEBT:web2:Clients_RBV") == 1
    set_paused(page, False)
    page.select_option("#stream", "WEB1")
    assert ioc.wait_for("WEBT:web1:FramesSent_RBV", lambda n: n > 0)


def overlay_rgba(page, cx, cy):
    """The RGBA the 2-D overlay canvas holds at canvas pixel (cx, cy)."""
    return page.evaluate(
        """([x, y]) => Array.from(document.getElementById('overlay').getContext('2d')
                                   .getImageData(x, y, 1, 1).data)""",
        [round(cx), round(cy)],
    )


def test_line_profiles_are_the_row_and_column_through_a_clicked_point(page, ioc):
    set_paused(page, True)
    base = page.evaluate("ndviewer.valueAt(0, 0)")
    cx, cy = page.evaluate("ndviewer.toCanvas(17.5, 33.5)")
    box = page.locator("#overlay").bounding_box()
    page.mouse.click(box["x"] + cx, box["y"] + cy)
    prof = page.evaluate("({x: ndviewer.state.profile.x, y: ndviewer.state.profile.y,"
                         " follow: ndviewer.state.profile.follow,"
                         " row: ndviewer.state.profile.row, col: ndviewer.state.profile.col})")
    assert (int(prof["x"]), int(prof["y"]), prof["follow"]) == (17, 33, False)
    assert prof["row"] == [[(base + x + 256 * 33) % 65536 for x in range(W)]]
    assert prof["col"] == [[(base + 17 + 256 * y) % 65536 for y in range(H)]]
    # Held: moving the cursor elsewhere does not move them.
    page.mouse.move(box["x"] + 10, box["y"] + 10)
    assert int(page.evaluate("ndviewer.state.profile.x")) == 17
    page.screenshot(path=str(ioc.tmp / "web-viewer-profiles.png"))
    page.check("#follow")
    set_paused(page, False)


def test_the_histogram_counts_every_pixel_and_marks_the_window(page, ioc):
    set_paused(page, True)
    base = page.evaluate("ndviewer.valueAt(0, 0)")
    h = page.evaluate("(() => { const h = ndviewer.state.hist;"
                      " return {lo: h.lo, hi: h.hi, w: h.binWidth, total: h.total,"
                      " counts: Array.from(h.counts)}; })()")
    assert h["total"] == W * H and sum(h["counts"]) == W * H
    if base + W - 1 + 256 * (H - 1) < 65536:  # the ramp has not wrapped: one of each value
        assert (h["lo"], h["hi"]) == (base, base + W - 1 + 256 * (H - 1))
        # 32768 distinct values in 256 bins of 128: every bin holds 128.
        assert h["w"] == 128 and h["counts"] == [128] * 256
    lo, hi = base + 8192, base + 24576
    page.evaluate(f"ndviewer.setWindow({lo}, {hi})")
    width = page.evaluate("document.getElementById('hist').width")
    for v in (lo, hi):
        x = round(4 + (v - h["lo"]) / (h["w"] * len(h["counts"])) * (width - 8))
        px = page.evaluate(
            """(x) => { const d = document.getElementById('hist').getContext('2d')
                          .getImageData(x - 1, 17, 3, 1).data;
                        return [0, 1, 2].map((i) => Array.from(d.slice(4 * i, 4 * i + 3))); }""",
            x)
        # The window's yellow (#fd3), antialiased across a pixel boundary.
        assert any(r > 150 and g > 120 and b < 100 for r, g, b in px), (v, x, px)
    page.check("#auto")
    set_paused(page, False)


def test_overlays_and_roistat_regions_are_drawn_where_configured(page, ioc):
    wait_until(lambda: page.evaluate("ndviewer.state.overlays.length") == 2, what="two overlays")
    ovs = page.evaluate("ndviewer.state.overlays")
    rect = next(o for o in ovs if o["shape"] == "Rectangle")
    assert (rect["x"], rect["y"], rect["w"], rect["h"], rect["rgb"]) == (100, 40, 50, 30, [65535, 0, 0])
    text = next(o for o in ovs if o["shape"] == "Text")
    assert (text["x"], text["y"], text["text"]) == (180, 100, "ndflow")
    # The rectangle's left edge is red on the overlay canvas; its inside is left clear.
    r, g, b, a = overlay_rgba(page, *page.evaluate("ndviewer.toCanvas(100, 55)"))
    assert a > 100 and r > 150 and g < 80 and b < 80, (r, g, b, a)
    assert overlay_rgba(page, *page.evaluate("ndviewer.toCanvas(125, 55)"))[3] == 0
    # The ROIStat ROI, cyan at its left edge, then dragged: MinX/MinY written.
    wait_until(lambda: page.evaluate(
        "ndviewer.state.rois.some((r) => r.kind === 'roistat' && r.used && r.known && r.w === 40)"),
        what="ROIStat ROI 1 drawn")
    r, g, b, a = overlay_rgba(page, *page.evaluate("ndviewer.toCanvas(150, 70)"))
    assert a > 100 and r < 80 and g > 150 and b > 150, (r, g, b, a)
    x0, y0 = page.evaluate("ndviewer.toCanvas(170, 70)")
    zoom = page.evaluate("ndviewer.state.view.zoom")
    box = page.locator("#overlay").bounding_box()
    page.mouse.move(box["x"] + x0, box["y"] + y0)
    page.mouse.down()
    for k in range(1, 6):
        page.mouse.move(box["x"] + x0 + k * 2 * zoom, box["y"] + y0 + k * zoom)
    page.mouse.up()
    ioc.wait_for("WEBT:ROIStat1:1:MinX_RBV", lambda v: v == 160)
    ioc.wait_for("WEBT:ROIStat1:1:MinY_RBV", lambda v: v == 65)
    page.screenshot(path=str(ioc.tmp / "web-viewer-overlays.png"))


def test_rgb_frames_are_shown_in_colour(page, ioc):
    set_paused(page, False)
    page.select_option("#stream", "WEB3")
    wait_until(lambda: page.evaluate("ndviewer.state.frame && ndviewer.state.frame.colors") == 3,
               what="an RGB frame")
    set_paused(page, True)
    f = page.evaluate("({w: ndviewer.state.frame.width, h: ndviewer.state.frame.height,"
                      " mode: ndviewer.state.frame.colorMode})")
    assert f == {"w": RW, "h": RH, "mode": 2}
    r0 = page.evaluate("ndviewer.valueAt(0, 0)")[0]
    # Red = ramp, green = 0, blue = 2 x ramp (GainRed 1, GainGreen 0, GainBlue 2).
    for x, y in [(0, 0), (10, 5), (63, 31)]:
        r, g, b = page.evaluate(f"ndviewer.valueAt({x}, {y})")
        assert (r, g, b) == (r0 + x + RW * y, 0, 2 * (r0 + x + RW * y)), (x, y)
    hi = 2 * (r0 + RW * RH)
    page.evaluate(f"ndviewer.setWindow(0, {hi})")
    for x, y in [(10, 5), (63, 31), (32, 16)]:
        r, g, b = page.evaluate(f"ndviewer.valueAt({x}, {y})")
        cx, cy = page.evaluate(f"ndviewer.toCanvas({x} + 0.5, {y} + 0.5).map(Math.floor)")
        want = [round(r / hi * 255), 0, round(b / hi * 255)]
        got = canvas_rgb(page, cx, cy)
        assert all(abs(a - w) <= 2 for a, w in zip(got, want)), (x, y, got, want)
    a = np.load(io.BytesIO(bytes(page.evaluate("Array.from(ndviewer.npyBytes(ndviewer.state.frame))"))))
    assert a.shape == (RH, RW, 3) and list(a[5, 10]) == page.evaluate("ndviewer.valueAt(10, 5)")
    page.screenshot(path=str(ioc.tmp / "web-viewer-rgb.png"))
    page.check("#auto")
    set_paused(page, False)
    page.select_option("#stream", "WEB1")
    wait_until(lambda: page.evaluate("ndviewer.state.frame.colors") == 1, what="back to Mono")
