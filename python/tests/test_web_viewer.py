"""The live web viewer (`ndflow run --web PORT`) in a real browser: Debian's chromium, headless,
driven by Playwright, WebGL2 through SwiftShader.

One IOC and one page serve every test (module fixtures), to keep the file fast. The simulated
detector draws a UInt16 ramp, value(x, y) = x + 256·y + n on frame n, so every pixel's value
is known; the tests read values and colours back from the page and check them against the
ramp and the colour map's definition, watch uniqueId advance and stop on pause, drag an ROI
and read ROI1:MinX over pvAccess (p4p), and watch the plots and the pipeline table fill.

Loopback only: the IOC's EPICS servers and its web server use free ports on 127.0.0.1
(pva_util.NdflowIoc, netenv.py); the browser runs with its background networking off.
"""

import io
import json
import time
import urllib.request

import numpy as np
import pytest
from netenv import free_tcp_port
from pva_util import NdflowIoc

playwright_sync = pytest.importorskip("playwright.sync_api")

CHROMIUM = "/usr/bin/chromium"
# SwiftShader's software WebGL (no GPU here); no network traffic of the browser's own.
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

W, H = 256, 128
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
        ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
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
