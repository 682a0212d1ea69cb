"""`ndflow screens`: the Phoebus screens of three example pipelines are well-formed Display
Builder files whose widgets and properties Phoebus knows, the pipeline screen's buttons open
files that exist and pass P and R, and every PV any screen names (macros substituted as the
opener would) is served by the IOC running that config, checked over pvAccess with p4p.

Loopback only: the IOC and the client get netenv.py's loopback variables with free ports
(pva_util.NdflowIoc).
"""

import re
import subprocess
import xml.etree.ElementTree as ET

import pytest
from pva_util import ROOT, NdflowIoc

# The properties of each widget type these screens use, as Phoebus' display model declares
# them (org.csstudio.display.builder.model: Widget, VisibleWidget, MacroWidget, PVWidget and
# the widget classes). Anything else in a file is an error here.
WIDGET = {"name", "class", "x", "y", "width", "height", "actions", "rules", "scripts"}
VISIBLE = WIDGET | {"visible", "tooltip"}
PV = VISIBLE | {"pv_name", "border_alarm_sensitive"}
LOOK = {"font", "foreground_color", "background_color"}
ALIGN = {"horizontal_alignment", "vertical_alignment"}
PROPERTIES = {
    "label": VISIBLE
    | LOOK
    | ALIGN
    | {"text", "transparent", "rotation_step", "auto_size", "wrap_words"},
    "textupdate": PV
    | LOOK
    | ALIGN
    | {"transparent", "format", "precision", "show_units", "wrap_words"}
    | {"rotation_step", "interactive"},
    "textentry": PV
    | LOOK
    | ALIGN
    | {"format", "precision", "show_units", "enabled", "wrap_words", "multi_line"},
    "combo": PV
    | LOOK
    | {"items", "items_from_pv", "editable", "enabled", "confirm_dialog"}
    | {"confirm_message", "password"},
    "action_button": PV
    | LOOK
    | ALIGN
    | {"text", "transparent", "rotation_step", "enabled", "confirm_dialog"}
    | {"confirm_message", "password"},
    "group": VISIBLE
    | {"macros", "style", "font", "foreground_color", "line_color"}
    | {"background_color", "transparent"},
    "image": PV
    | {"background_color", "foreground_color", "show_toolbar", "data_colormap"}
    | {"color_bar", "x_axis", "y_axis", "limits_from_pv", "data_width", "data_height"}
    | {"data_autoscale", "data_minimum", "data_maximum"},
    "polyline": VISIBLE
    | {"points", "line_width", "line_color", "line_style", "arrows", "arrow_length"},
}
# What each widget type's `version` attribute must be (Phoebus converts older ones).
VERSIONS = {"textentry": "3.0.0", "action_button": "3.0.0", "group": "3.0.0"}
DISPLAY_PROPERTIES = {"name", "macros", "width", "height", "background_color"}
ACTION_CHILDREN = {
    "write_pv": {"description", "pv_name", "value"},
    "open_display": {"description", "file", "macros", "target", "name"},
}
MACRO_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-\[\]]*$")
MACRO = re.compile(r"\$\(([A-Za-z][A-Za-z0-9_.\-\[\]]*)(?:=([^)]*))?\)")

# Per config: what to override so the IOC stays idle and writes nothing outside tmp.
CASES = {
    "rivers2013": ["--set", "SIM1.Acquire=0"],
    "pva_ioc": ["--set", "HDF1.FilePath={tmp}/data"],
    "scatter_gather": ["--set", "SIM1.Acquire=0"],
}


def expand(text, values):
    """Phoebus' macro substitution: $(NAME) from `values`, else $(NAME=default)'s default."""

    def one(m):
        name, default = m.group(1), m.group(2)
        if name in values:
            return values[name]
        assert default is not None, f"unresolved macro {m.group(0)} in {text!r}"
        return default

    return MACRO.sub(one, text)


def display_values(root, opener):
    """The macro values inside a display opened with `opener`'s: those first, then the file's
    own specs expanded in order (Phoebus' Macros.expandValues)."""
    values = dict(opener)
    for m in root.find("macros"):
        values[m.tag] = expand(m.text or "", values)
    return values


def pv_names(root, values):
    """Every PV the display names (widgets and write actions), expanded, scheme removed."""
    out = set()
    for e in root.iter("pv_name"):
        name = expand(e.text or "", values)
        out.add(re.sub(r"^(pva|ca)://", "", name))
    return out


def check_structure(path):
    """Well-formed, version 2.0.0, and only the widgets and properties Phoebus knows."""
    root = ET.parse(path).getroot()
    assert root.tag == "display" and root.get("version") == "2.0.0", path
    for child in root:
        assert child.tag in DISPLAY_PROPERTIES | {"widget"}, f"{path}: <{child.tag}>"
    for m in root.find("macros"):
        assert MACRO_NAME.match(m.tag), f"{path}: macro {m.tag}"
    for w in root.iter("widget"):
        kind = w.get("type")
        assert kind in PROPERTIES, f"{path}: widget type {kind}"
        assert w.get("version") == VERSIONS.get(kind, "2.0.0"), f"{path}: {kind} version"
        for prop in w:
            if prop.tag == "widget":
                assert kind == "group", f"{path}: a widget inside a {kind}"
                continue
            assert prop.tag in PROPERTIES[kind], f"{path}: {kind} has no property {prop.tag}"
        for action in w.findall("actions/action"):
            allowed = ACTION_CHILDREN[action.get("type")]
            assert {c.tag for c in action} <= allowed, f"{path}: {ET.tostring(action)}"
        for point in w.findall("points/point"):
            assert float(point.get("x")) >= 0 and float(point.get("y")) >= 0, path
    return root


@pytest.mark.parametrize("stem", sorted(CASES))
def test_screens_name_only_served_pvs(ndflow_bin, tmp_path, stem):
    config = ROOT / "examples" / f"{stem}.toml"
    out = tmp_path / "screens"
    run = subprocess.run(
        [str(ndflow_bin), "screens", str(config), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    files = sorted(p.name for p in out.iterdir())
    assert len(lines) == len(files), (lines, files)
    assert all(line.startswith(f"wrote {out}/") for line in lines), lines
    top_path = out / f"{stem}.bob"
    assert top_path.exists(), files

    roots = {name: check_structure(out / name) for name in files}
    top = roots[f"{stem}.bob"]
    top_values = display_values(top, {})
    prefix = top_values["P"]
    wanted = pv_names(top, top_values)

    # Each button of the pipeline screen opens a port's file with P and R.
    opened = {}
    for action in top.iter("action"):
        assert action.get("type") == "open_display"
        target = action.findtext("file")
        assert target in roots and target != f"{stem}.bob", target
        macros = {m.tag: expand(m.text, top_values) for m in action.find("macros")}
        assert macros["P"] == prefix and macros["R"], macros
        opened[target] = macros
    assert set(opened) == set(files) - {f"{stem}.bob"}, "one button per port screen"

    for name, macros in opened.items():
        root = roots[name]
        names = pv_names(root, display_values(root, macros))
        assert all(n.startswith(prefix + macros["R"]) for n in names), name
        # Alone, the file falls back to the same P and R.
        assert pv_names(root, display_values(root, {})) == names, name
        # The opener's macros win over the file's defaults (a site's own IOC).
        other = pv_names(root, display_values(root, {"P": "SITE:", "R": "cam9:"}))
        assert all(n.startswith("SITE:cam9:") for n in other), name
        wanted |= names

    # areaDetector's groups.
    groups = {
        n: {w.findtext("name") for w in r.iter("widget") if w.get("type") == "group"}
        for n, r in roots.items()
    }
    assert {"Setup", "Collect", "Readout", "Attributes"} <= groups["SIM1.bob"]
    plugin = next(n for n in opened if n != "SIM1.bob")
    assert "Plugin base" in groups[plugin]
    if stem == "pva_ioc":
        assert "File" in groups["HDF1.bob"] and "NDPluginPva" in groups["PVA1.bob"]
        images = [
            w.findtext("pv_name") for w in roots["PVA1.bob"].iter("widget") if w.get("type") == "image"
        ]
        assert images == ["pva://$(P)$(R)Image"]
        assert any(w.get("type") == "image" for w in top.iter("widget"))

    args = [a.replace("{tmp}", str(tmp_path)) for a in CASES[stem]]
    ioc = NdflowIoc(ndflow_bin, tmp_path, config.read_text(), args=args)
    try:
        ioc.wait_for(f"{prefix}cam1:ArrayRate_RBV", lambda v: True)
        names = sorted(wanted)
        values = ioc.ctx.get(names, timeout=10.0, throw=False)
        missing = [n for n, v in zip(names, values) if isinstance(v, Exception)]
        assert not missing, f"{len(missing)} of {len(names)} PVs not served: {missing[:40]}"
    finally:
        ioc.close()
