"""PyDM displays against an IOC, in a process of their own (test_adcore_screens.py runs it under
Xvfb): opens every screen of a spec, runs the Qt event loop until each widget's channels are
connected, presses the Start button, waits for the array counter to rise and the sliders' ranges
to follow the input, saves screenshots and writes what it saw as JSON.

    python pydm_screens.py SPEC.json RESULT.json

SPEC: {"screens": {NAME: SCREEN}, "wait_for_missing": [ADDRESS...], "timeout": S,
       "start": {"screen": NAME, "acquire": SUFFIX, "counter": SUFFIX}, "shots": DIR}
`slider_max`: {ADDRESS: N}, the sliders whose high limit follows the input, waited for
until it reaches N after Start.
A SCREEN is either {"ui": PATH, "macros": {...}} (a .ui file, loaded as PyDM loads it) or
{"widgets": [{"cls": PyDM class, "channel": "ca://...", "role": ..., "press": ..., "label": ...}]}
(a display built here, one widget per channel). Channels whose address is in
`wait_for_missing` are not waited for (a named gap of the IOC); the loop ends when every other
channel is connected and no new one connected for a moment, or at the timeout.

It is a separate process so that libca (pyepics, PyDM's CA plugin) starts with this IOC's
ports, whatever other tests did in the pytest process. Everything goes to 127.0.0.1: the
caller passes the loopback EPICS variables in the environment.
"""

import json
import pathlib
import sys
import time


def main(spec_path, result_path):
    spec = json.loads(pathlib.Path(spec_path).read_text())
    from qtpy.QtWidgets import QApplication, QGridLayout, QLabel, QWidget

    app = QApplication.instance() or QApplication(sys.argv[:1])
    import pydm.widgets as pw
    from pydm.data_plugins import plugin_for_address
    from pydm.data_plugins.plugin import PyDMPlugin
    from pydm.display import load_file
    from pydm.widgets.channel import PyDMChannel

    t0 = time.monotonic()
    screens = {}
    for name, scr in spec["screens"].items():
        if "ui" in scr:
            w = load_file(scr["ui"], macros=scr.get("macros") or {}, target=None)
        else:
            w = QWidget()
            w.setWindowTitle(name)
            grid = QGridLayout(w)
            cols = 6
            for i, item in enumerate(scr["widgets"]):
                cls = getattr(pw, item["cls"])
                if item["role"] == "visibility":
                    # a MEDM dynamic attribute: a PyDM visibility rule on the channel
                    widget = cls()
                    widget.rules = json.dumps([{
                        "name": "visibility", "property": "Visible",
                        "channels": [{"channel": item["channel"], "trigger": True}],
                        "expression": "ch[0] != 0"}])
                    if hasattr(widget, "setText"):
                        widget.setText(item["channel"].rsplit(":", 1)[-1])
                else:
                    widget = cls(init_channel=item["channel"])
                    if item["cls"] == "PyDMPushButton":
                        widget.pressValue = item.get("press", "")
                        widget.setText(item.get("label") or "press")
                widget.setToolTip(item["channel"])
                widget.setMinimumSize(90, 22)
                cell = QWidget()
                lay = QGridLayout(cell)
                lay.setContentsMargins(1, 1, 1, 1)
                tag = QLabel(item["channel"].split(":", 2)[-1][:24])
                tag.setStyleSheet("font-size: 7pt; color: #555")
                lay.addWidget(tag, 0, 0)
                lay.addWidget(widget, 1, 0)
                grid.addWidget(cell, i // cols, i % cols)
        w.show()
        screens[name] = w
    app.processEvents()
    t_built = time.monotonic() - t0

    def channels_of(widget):
        """The channel addresses a widget uses: its own, its rules', its curves'."""
        out = []
        ch = getattr(widget, "channel", None)
        if isinstance(ch, str) and ch:
            out.append(ch)
        rules = getattr(widget, "rules", None)
        if isinstance(rules, str) and rules:
            for r in json.loads(rules):
                out += [c["channel"] for c in r.get("channels", []) if c.get("channel")]
        for c in getattr(widget, "curves", None) or []:
            try:
                c = json.loads(c) if isinstance(c, str) else {}
            except ValueError:
                c = {}
            out += [c[k] for k in ("channel", "x_channel", "y_channel") if c.get(k)]
        return out

    def all_widgets():
        """(screen, widget, [address]) of every widget that uses a channel (embedded displays'
        widgets under their embedding screen)."""
        out = []
        for name, top in screens.items():
            for child in top.findChildren(QWidget):
                addrs = channels_of(child)
                if addrs:
                    out.append((name, child, addrs))
        return out

    def connection(addr):
        plugin = plugin_for_address(addr)
        return plugin.connections.get(PyDMPlugin.get_connection_id(PyDMChannel(address=addr)))

    def connected(addr):
        """PyDM's connection state of the channel (what its widgets show)."""
        conn = connection(addr)
        return bool(conn is not None and conn.connected)

    def ca_connected(addr):
        """The state of the CA channel under it (pyepics' PV)."""
        pv = getattr(connection(addr), "pv", None)
        return bool(pv is not None and pv.connected)

    missing_ok = set(spec.get("wait_for_missing", []))
    deadline = time.monotonic() + spec.get("timeout", 20)
    last_change, last_count = time.monotonic(), -1
    while True:
        app.processEvents()
        widgets = all_widgets()
        addrs = {a for _, _, aa in widgets for a in aa}
        up = {a for a in addrs if connected(a) or ca_connected(a)}
        if len(up) != last_count:
            last_count, last_change = len(up), time.monotonic()
        waiting = addrs - up - missing_ok
        if not waiting and time.monotonic() - last_change > 1.0:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    t_connected = time.monotonic() - t0

    # PyDM 1.29's pyepics plugin has a race: Connection.add_listener (on a thread pool) reads
    # "not connected yet" and then reports False after the CA connection callback has already
    # reported True, so now and then a connected channel stays "disconnected" in PyDM until it
    # reconnects. Such channels get the report a reconnection would give (counted in the
    # report: `pydm_resynced`), so the widgets show what the IOC serves.
    resynced = sorted(a for a in addrs if ca_connected(a) and not connected(a))
    for a in resynced:
        connection(a).send_connection_state(conn=True)
    for _ in range(5):
        app.processEvents()

    report = {"screens": {}, "pydm_resynced": resynced,
              "timing": {"build_s": round(t_built, 2),
                                        "connect_s": round(t_connected, 2)}}
    for name in screens:
        rows = [(type(w).__name__, a) for s, w, aa in widgets if s == name for a in aa]
        report["screens"][name] = {
            "widgets": len([1 for s, _, _ in widgets if s == name]),
            "channels": [{"cls": c, "address": a, "connected": connected(a),
                          "ca_connected": ca_connected(a)} for c, a in rows],
        }
    shots = pathlib.Path(spec["shots"])
    shots.mkdir(parents=True, exist_ok=True)
    for name, w in screens.items():
        w.grab().save(str(shots / f"{name}.png"))

    # Start the detector with the screen's own Start button, watch the counter on the screen.
    start = spec.get("start")
    if start:
        scr = screens[start["screen"]]

        def find(cls, suffix, press=None):
            for child in scr.findChildren(cls):
                ch = getattr(child, "channel", None) or ""
                if ch.endswith(suffix) and (press is None or str(child.pressValue) == press):
                    return child
            raise SystemExit(f"no {cls.__name__} for {suffix} (press {press}) on {start['screen']}")

        counter = find(pw.PyDMLabel, start["counter"])
        before = counter.value
        find(pw.PyDMPushButton, start["acquire"], "1").click()
        t_start = time.monotonic()
        seen = before
        while time.monotonic() < t_start + 15:
            app.processEvents()
            seen = counter.value
            if isinstance(seen, (int, float)) and isinstance(before, (int, float)) and seen >= before + 3:
                break
            time.sleep(0.02)
        report["start"] = {"counter_before": before, "counter_after": seen,
                           "s": round(time.monotonic() - t_start, 2)}

        # Sliders whose range follows the input size: wait until they show a non-empty range.
        sliders = [(s, w) for s, w, _ in widgets if isinstance(w, pw.PyDMSlider)]
        follow = spec.get("slider_max", {})  # address -> the high limit to wait for
        t_sl = time.monotonic()
        while time.monotonic() < t_sl + 10:
            app.processEvents()
            if all((w.maximum or 0) >= follow[w.channel] for _, w in sliders if w.channel in follow):
                break
            time.sleep(0.02)
        report["sliders"] = [{"screen": s, "address": w.channel, "minimum": w.minimum,
                              "maximum": w.maximum, "value": w.value} for s, w in sliders]
        for name, w in screens.items():
            w.grab().save(str(shots / f"{name}-acquiring.png"))
        find(pw.PyDMPushButton, start["acquire"], "0").click()
        t_stop = time.monotonic()
        while time.monotonic() < t_stop + 0.3:  # let the put go out before the process exits
            app.processEvents()
            time.sleep(0.02)
    report["timing"]["total_s"] = round(time.monotonic() - t0, 2)
    pathlib.Path(result_path).write_text(json.dumps(report, indent=1))
    for w in screens.values():
        w.close()
    app.processEvents()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
