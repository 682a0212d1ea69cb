#!/usr/bin/env python3
"""The channels of areaDetector's MEDM operator screens, as facts: for each screen, every widget
that talks to a PV (its MEDM kind, the PyDM class adl2pydm turns it into, the channel with its
macros unexpanded, e.g. `$(P)$(R)MinX`, and how the widget uses it), the composite files it
embeds (their widgets are part of the screen), the related displays it opens and the macros it
needs.

    python/tools/adl_channels.py ADCORE/ADApp/op/adl [--source TEXT] [--out FILE]

writes python/tests/data/ad_screen_channels.json, which python/tests/test_adcore_screens.py
reads: the test needs no copy of ADCore, only these names. No text of the screens themselves
(geometry, colours, labels) is kept, only channel names and widget kinds — and, for message
buttons, the value they write and their label, so the test can find and press Start.

An .adl file is nested blocks, `name {` … `}`, of `key=value` lines (MEDM's display list). A
widget's PV is `chan` (or `rdbk`/`ctrl`) of its `control` or `monitor` block; a `dynamic
attribute` block's `chan`…`chanD` drive visibility (adl2pydm: a PyDM visibility rule); plots
read `xdata`/`ydata` (cartesian plot traces) and `chan` (strip chart pens).
"""

import argparse
import json
import pathlib
import re
import sys

# The operator screens of an areaDetector IOC that ndflow serves (a driver, the common plugin
# base and the plugins ndflow has), and the per-overlay screen NDOverlay opens. The composite
# files they embed are followed on their own (ADSetup, ADCollect, NDFileBase, ...).
DEFAULT_SCREENS = [
    "ADBase", "NDPluginBase", "NDPluginBaseFull", "NDStats", "NDROI", "NDFileHDF5",
    "NDProcess", "NDOverlay", "NDOverlayN", "NDFileTIFF", "NDFile",
]

# adl2pydm's widget mapping (adl2pydm.symbols.adl_widgets): MEDM kind -> PyDM class.
PYDM_CLASS = {
    "arc": "PyDMDrawingPie",
    "bar": "PyDMScaleIndicator",
    "byte": "PyDMByteIndicator",
    "cartesian plot": "PyDMWaveformPlot",
    "choice button": "PyDMEnumButton",
    "composite": "PyDMFrame",
    "embedded display": "PyDMEmbeddedDisplay",
    "image": "PyDMDrawingImage",
    "indicator": "PyDMScaleIndicator",
    "menu": "PyDMEnumComboBox",
    "message button": "PyDMPushButton",
    "meter": "PyDMScaleIndicator",
    "oval": "PyDMDrawingEllipse",
    "polygon": "PyDMDrawingIrregularPolygon",
    "polyline": "PyDMDrawingPolyline",
    "rectangle": "PyDMDrawingRectangle",
    "related display": "PyDMRelatedDisplayButton",
    "shell command": "PyDMShellCommand",
    "strip chart": "PyDMTimePlot",
    "text": "PyDMLabel",
    "text entry": "PyDMLineEdit",
    "text update": "PyDMLabel",
    "valuator": "PyDMSlider",
    "wheel switch": "PyDMSpinbox",
}

NOT_WIDGETS = {"file", "display", "color map"}

MACRO = re.compile(r"\$[({]([A-Za-z0-9_]+)[)}]")


class Block:
    def __init__(self, name, line):
        self.name = name
        self.line = line
        self.attrs = {}
        self.children = []

    def child(self, name):
        for c in self.children:
            if c.name == name:
                return c
        return None

    def children_named(self, prefix):
        return [c for c in self.children if c.name.startswith(prefix)]


def parse_adl(text):
    """The top-level blocks of an .adl file, as a tree of Block."""
    root = Block("", 0)
    stack = [root]
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.endswith("{"):
            name = line[:-1].strip().strip('"')
            b = Block(name, n)
            stack[-1].children.append(b)
            stack.append(b)
        elif line == "}":
            if len(stack) > 1:
                stack.pop()
        elif "=" in line:
            k, v = line.split("=", 1)
            k = k.strip().strip('"')
            v = v.strip()
            if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
                v = v[1:-1]
            stack[-1].attrs[k] = v
    return root.children


def _chan(block, keys=("chan", "rdbk", "ctrl")):
    """The PV of a control/monitor block, as adl2pydm's get_channel picks it (the last of
    chan, rdbk, ctrl present)."""
    pv = None
    for k in keys:
        if block is not None and block.attrs.get(k):
            pv = block.attrs[k]
    return pv


def widget_channels(w):
    """[(role, channel)] of one widget block (not descending into a composite's children)."""
    out = []
    kind = w.name
    for role in ("control", "monitor"):
        pv = _chan(w.child(role))
        if pv:
            out.append((role, pv))
    dyn = w.child("dynamic attribute")
    if dyn is not None:
        for k in ("chan", "chanB", "chanC", "chanD"):
            if dyn.attrs.get(k):
                out.append(("visibility", dyn.attrs[k]))
    if kind == "cartesian plot":
        for t in w.children_named("trace["):
            for k in ("xdata", "ydata"):
                if t.attrs.get(k):
                    out.append(("plot " + k, t.attrs[k]))
        for k in ("trigger", "erase", "countPvName"):
            if w.attrs.get(k):
                out.append(("plot " + k, w.attrs[k]))
    if kind == "strip chart":
        for p in w.children_named("pen["):
            if p.attrs.get("chan"):
                out.append(("pen", p.attrs["chan"]))
    return out


def screen_facts(adl_dir, name, stack=()):
    """Widgets (with channels), composite files and related displays of screen `name`, its
    composite files' widgets included (each widget names the file it is in)."""
    path = pathlib.Path(adl_dir) / f"{name}.adl"
    blocks = parse_adl(path.read_text(encoding="latin-1"))
    widgets, includes, related = [], [], []

    def walk(blocks):
        for w in blocks:
            if w.name in NOT_WIDGETS:
                continue
            if w.name == "composite":
                cfile = w.attrs.get("composite file")
                if cfile:
                    fname, _, args = cfile.partition(";")
                    sub = pathlib.Path(fname).stem
                    if args:
                        raise SystemExit(f"{name}: composite file with macros not handled: {cfile}")
                    if sub in stack or sub == name:
                        raise SystemExit(f"{name}: composite file loop through {sub}")
                    includes.append(sub)
                    inner = screen_facts(adl_dir, sub, stack + (name,))
                    includes.extend(i for i in inner["includes"] if i not in includes)
                    widgets.extend(inner["widgets"])
                    related.extend(inner["related"])
                # a composite's own dynamic attribute (a PyDMFrame's rule)
                for role, pv in widget_channels(w):
                    widgets.append(dict(kind="composite", pydm=PYDM_CLASS["composite"],
                                        role=role, channel=pv, file=name))
                ch = w.child("children")
                if ch is not None:
                    walk(ch.children)
                continue
            if w.name == "related display":
                for d in w.children_named("display["):
                    if d.attrs.get("name"):
                        related.append(dict(file=pathlib.Path(d.attrs["name"]).stem,
                                            args=d.attrs.get("args", ""), **{"from": name}))
            pydm = PYDM_CLASS.get(w.name)
            if pydm is None:
                raise SystemExit(f"{name}.adl line {w.line}: unknown widget kind {w.name!r}")
            for role, pv in widget_channels(w):
                entry = dict(kind=w.name, pydm=pydm, role=role, channel=pv, file=name)
                if w.name == "message button":
                    entry["press"] = w.attrs.get("press_msg", "")
                    if w.attrs.get("release_msg"):
                        entry["release"] = w.attrs["release_msg"]
                    entry["label"] = w.attrs.get("label", "")
                widgets.append(entry)

    walk(blocks)
    return dict(widgets=widgets, includes=includes, related=related)


def macros_of(widgets):
    out = set()
    for w in widgets:
        out.update(MACRO.findall(w["channel"]))
    return sorted(out)


def dumps(doc):
    """JSON with one widget (or related display) a line: readable diffs, a small file."""
    def enc(v, ind):
        pad = " " * ind
        if isinstance(v, dict) and v and any(isinstance(x, (dict, list)) for x in v.values()):
            items = [f'{pad} {json.dumps(k)}: {enc(x, ind + 1)}' for k, x in v.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(v, list) and v and isinstance(v[0], dict):
            return "[\n" + ",\n".join(f"{pad} {json.dumps(x)}" for x in v) + "\n" + pad + "]"
        return json.dumps(v)
    return enc(doc, 0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("adl_dir", help="ADCore's ADApp/op/adl directory")
    ap.add_argument("--screens", nargs="*", default=DEFAULT_SCREENS)
    ap.add_argument("--source", default="areaDetector/ADCore ADApp/op/adl",
                    help="where the screens came from (a version, a commit), kept in the JSON")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1]
                                         / "tests" / "data" / "ad_screen_channels.json"))
    a = ap.parse_args(argv)

    screens = {}
    for name in a.screens:
        f = screen_facts(a.adl_dir, name)
        f["macros"] = macros_of(f["widgets"])
        screens[name] = f
    doc = {
        "about": ("Channels of areaDetector's MEDM screens (ADCore ADApp/op/adl), facts only: "
                  "per screen the widgets that use a PV, with the MEDM widget kind, the PyDM "
                  "class adl2pydm makes of it and the channel with its macros unexpanded; "
                  "composite files are followed (their widgets carry `file`). Written by "
                  "python/tools/adl_channels.py."),
        "source": a.source,
        "pydm_class": PYDM_CLASS,
        "screens": screens,
    }
    out = pathlib.Path(a.out)
    out.write_text(dumps(doc) + "\n")
    for name, f in screens.items():
        chans = {w["channel"] for w in f["widgets"]}
        print(f"{name}: {len(f['widgets'])} widget channels ({len(chans)} distinct), "
              f"includes {f['includes']}, macros {f['macros']}, {len(f['related'])} related displays",
              file=sys.stderr)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
