//! Where the widgets go: a port's screen as titled groups of rows (label, setpoint,
//! readback) filling columns of a bounded height, and the pipeline screen as one box per
//! port in the column of its depth in the graph, with arrows from each source.

use ndflow_core::{Access, ParamDef, ParamKind, RecordHint};

use super::bob::{self, Element, ROW_HEIGHT};
use super::groups;
use super::Port;

const MARGIN: i32 = 10;
const TITLE_H: i32 = 30;
/// One row: its widgets and the space below them.
const ROW: i32 = ROW_HEIGHT + 4;
const PAD: i32 = 4;
const LABEL_W: i32 = 170;
const VALUE_W: i32 = 130;
/// What a group box (Phoebus' default group style) takes on each side for its border and
/// title: 2 + 1.2 × the 14-point font. Its children are placed inside that.
const INSET: i32 = 18;
/// A group's title and border, besides its rows.
const CHROME: i32 = 2 * INSET + 4;
const GROUP_W: i32 = PAD + LABEL_W + 4 + VALUE_W + 4 + VALUE_W + PAD + 2 * INSET;
const GAP: i32 = 10;
/// The tallest column of groups: a screen grows sideways rather than off a monitor.
const MAX_COLUMN_H: i32 = 900;
const IMAGE_SIZE: i32 = 400;

/// A screen: its widgets, its size and how many groups (or port boxes) it holds.
pub struct Screen {
    pub widgets: Vec<Element>,
    pub width: i32,
    pub height: i32,
    pub groups: usize,
}

/// The width inside a group box `width` wide.
const fn inner(width: i32) -> i32 {
    width - 2 * INSET
}

/// `$(P)$(R)suffix`.
fn pv(suffix: &str) -> String {
    format!("$(P)$(R){suffix}")
}

/// The widgets of one parameter's row at `y` inside a group.
fn row(def: &ParamDef, y: i32) -> Vec<Element> {
    let set_x = PAD + LABEL_W + 4;
    let rbv_x = set_x + VALUE_W + 4;
    let text = def.record == RecordHint::LongString;
    let mut label = bob::label(def.name, def.name, PAD, y, LABEL_W, ROW_HEIGHT);
    if !def.desc.is_empty() {
        label = label.prop("tooltip", def.desc);
    }
    let mut out = vec![label];
    let setpoint = matches!(def.access, Access::ReadWrite | Access::WritePlain);
    if setpoint {
        let name = pv(def.name);
        match def.kind {
            ParamKind::Enum([_, start, ..]) if def.record.completes_when_done() => {
                // Busy records (Acquire, Capture, WriteFile): start and stop buttons.
                let w = VALUE_W / 2 - 2;
                out.push(bob::write_button(&name, 1, start, set_x, y, w));
                out.push(bob::write_button(&name, 0, "Stop", set_x + w + 4, y, w));
            }
            // Commands with a blank menu (ProcessPlugin, ReadStatus): one button writing 1.
            ParamKind::Enum(c) if c.iter().all(|s| s.is_empty()) => {
                out.push(bob::write_button(&name, 1, "Trigger", set_x, y, VALUE_W));
            }
            ParamKind::Enum(_) => out.push(bob::combo(&name, set_x, y, VALUE_W)),
            _ => out.push(bob::text_entry(&name, text, set_x, y, VALUE_W)),
        }
    }
    let readback = match def.access {
        Access::ReadWrite | Access::ReadOnly | Access::ReadOnlyBoth => {
            Some(format!("{}_RBV", def.name))
        }
        Access::ReadOnlyPlain => Some(def.name.to_string()),
        Access::WritePlain => None,
    };
    if let Some(r) = readback {
        out.push(bob::text_update(&pv(&r), text, rbv_x, y, VALUE_W));
    }
    out
}

/// Places groups in columns of at most [`MAX_COLUMN_H`], top to bottom then left to right.
struct Columns {
    col: i32,
    y: i32,
    bottom: i32,
    widgets: Vec<Element>,
    groups: usize,
}

impl Columns {
    fn new() -> Columns {
        Columns {
            col: 0,
            y: 0,
            bottom: 0,
            widgets: Vec::new(),
            groups: 0,
        }
    }

    fn x(&self) -> i32 {
        MARGIN + self.col * (GROUP_W + GAP)
    }

    fn next_column(&mut self) {
        self.col += 1;
        self.y = 0;
    }

    /// A group of `rows` split over as many columns as it needs.
    fn rows(&mut self, title: &str, defs: &[&ParamDef]) {
        let mut rest = defs;
        let mut part = 0;
        while !rest.is_empty() {
            let room = ((MAX_COLUMN_H - self.y - CHROME) / ROW).max(0) as usize;
            let column = ((MAX_COLUMN_H - CHROME) / ROW) as usize;
            // A group starts in the next column when it would fit there whole, or when not
            // even a few of its rows fit here; only a group taller than a column is split.
            let move_on = rest.len() > room && (rest.len() <= column || room < 3);
            if move_on && self.y > 0 {
                self.next_column();
                continue;
            }
            let n = room.max(1).min(rest.len());
            let (here, later) = rest.split_at(n);
            let name = if part == 0 {
                title.to_string()
            } else {
                format!("{title} (continued)")
            };
            let height = n as i32 * ROW + CHROME;
            let mut g = bob::group(&name, self.x(), TITLE_H + self.y, GROUP_W, height);
            for (i, d) in here.iter().enumerate() {
                for w in row(d, i as i32 * ROW) {
                    g.push(w);
                }
            }
            self.place(g, height);
            rest = later;
            part += 1;
        }
    }

    /// A group of a fixed height holding `inner`.
    fn block(&mut self, title: &str, height: i32, inner: Vec<Element>) {
        if self.y > 0 && self.y + height > MAX_COLUMN_H {
            self.next_column();
        }
        let mut g = bob::group(title, self.x(), TITLE_H + self.y, GROUP_W, height);
        for w in inner {
            g.push(w);
        }
        self.place(g, height);
    }

    fn place(&mut self, group: Element, height: i32) {
        self.widgets.push(group);
        self.groups += 1;
        self.y += height + GAP;
        self.bottom = self.bottom.max(self.y);
    }

    fn finish(self, title: &str) -> Screen {
        let width = self.x() + GROUP_W + MARGIN;
        let mut widgets = vec![bob::label(
            "title",
            title,
            MARGIN,
            5,
            width - 2 * MARGIN,
            ROW_HEIGHT,
        )];
        widgets.extend(self.widgets);
        Screen {
            widgets,
            width,
            height: TITLE_H + self.bottom + MARGIN,
            groups: self.groups,
        }
    }
}

/// The screen of one port: its parameters in groups, and its image when it publishes one.
pub fn port_screen(port: &Port) -> Screen {
    let mut cols = Columns::new();
    if let Some(image) = &port.image {
        let pv = image.for_port_screen();
        cols.block(
            "Image",
            IMAGE_SIZE + CHROME,
            vec![bob::image(
                &pv,
                PAD,
                0,
                inner(GROUP_W) - 2 * PAD,
                IMAGE_SIZE,
            )],
        );
    }
    for (section, defs) in groups::grouped(&port.defs, port.driver) {
        let title = groups::title(section, port.driver, port.class);
        cols.rows(&title, &defs);
    }
    cols.finish(&format!(
        "{} ({}, {}): $(P)$(R)",
        port.name, port.type_name, port.class
    ))
}

const BOX_W: i32 = 230;
const BOX_GAP_X: i32 = 60;
const BOX_GAP_Y: i32 = 14;

/// Each port's column (its depth: 0 for sources, else one more than its deepest source) and
/// row in that column, ordered by the row of its first source so that arrows cross little.
pub(super) fn positions(ports: &[Port]) -> Vec<(usize, usize)> {
    let index = |name: &str| ports.iter().position(|p| p.name == name);
    let mut depth: Vec<Option<usize>> = vec![None; ports.len()];
    // Relaxation bounded by the port count: a cycle (refused by the graph) cannot hang it.
    for _ in 0..=ports.len() {
        let mut changed = false;
        for (i, p) in ports.iter().enumerate() {
            let from: Vec<usize> = p.sources.iter().filter_map(|s| index(s)).collect();
            let d = if from.is_empty() {
                Some(usize::from(!p.driver))
            } else {
                from.iter()
                    .map(|&s| depth[s].map(|d| d + 1))
                    .collect::<Option<Vec<_>>>()
                    .and_then(|v| v.into_iter().max())
            };
            if d.is_some() && d != depth[i] {
                depth[i] = d;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let depth: Vec<usize> = depth.into_iter().map(|d| d.unwrap_or(1)).collect();
    let mut row = vec![0usize; ports.len()];
    let max_depth = depth.iter().copied().max().unwrap_or(0);
    for d in 0..=max_depth {
        let mut here: Vec<usize> = (0..ports.len()).filter(|&i| depth[i] == d).collect();
        let key = |i: usize| {
            ports[i]
                .sources
                .iter()
                .filter_map(|s| index(s))
                .filter(|&s| depth[s] < d)
                .map(|s| row[s])
                .min()
                .unwrap_or(0)
        };
        here.sort_by_key(|&i| (key(i), i));
        for (r, i) in here.into_iter().enumerate() {
            row[i] = r;
        }
    }
    depth.into_iter().zip(row).collect()
}

/// The rows of a port's box on the pipeline screen: (label, PV suffix).
fn box_rows(port: &Port) -> Vec<(&'static str, &'static str)> {
    let has = |n: &str| port.defs.iter().any(|d| d.name == n);
    let mut rows = vec![("Rate (/s)", "ArrayRate_RBV")];
    if has("DroppedArrays") {
        rows.push(("Dropped", "DroppedArrays_RBV"));
    }
    if port.driver && has("DetectorState") {
        rows.push(("State", "DetectorState_RBV"));
    }
    rows
}

fn box_height(rows: usize) -> i32 {
    (rows as i32 + 1) * ROW + CHROME
}

/// The pipeline screen: every port as a box with its rate, drops and a button opening its
/// screen with P and R; arrows from sources; then the images the pipeline publishes.
pub fn top_screen(ports: &[Port], title: &str, screen_file: impl Fn(&Port) -> String) -> Screen {
    let pos = positions(ports);
    let tallest = ports
        .iter()
        .map(|p| box_height(box_rows(p).len()))
        .max()
        .unwrap_or(0);
    let at = |i: usize| {
        let (d, r) = pos[i];
        (
            MARGIN + d as i32 * (BOX_W + BOX_GAP_X),
            TITLE_H + r as i32 * (tallest + BOX_GAP_Y),
        )
    };
    let mut widgets = vec![bob::label(
        "title",
        &format!("{title}: $(P)"),
        MARGIN,
        5,
        2 * BOX_W,
        ROW_HEIGHT,
    )];
    // Arrows first: drawn under the boxes.
    for (i, p) in ports.iter().enumerate() {
        for s in &p.sources {
            if let Some(j) = ports.iter().position(|q| &q.name == s) {
                let ((x0, y0), (x1, y1)) = (at(j), at(i));
                widgets.push(bob::arrow(
                    &format!("{s} to {}", p.name),
                    (x0 + BOX_W, y0 + tallest / 2),
                    (x1, y1 + tallest / 2),
                ));
            }
        }
    }
    let (mut right, mut bottom) = (0, 0);
    for (i, p) in ports.iter().enumerate() {
        let (x, y) = at(i);
        let rows = box_rows(p);
        let mut g = bob::group(
            &format!("{} ({})", p.name, p.type_name),
            x,
            y,
            BOX_W,
            tallest,
        );
        let value_x = PAD + 84;
        let value_w = inner(BOX_W) - value_x - PAD;
        for (k, (label, suffix)) in rows.iter().enumerate() {
            let ry = k as i32 * ROW;
            g.push(bob::label(label, label, PAD, ry, 80, ROW_HEIGHT));
            let name = format!("$(P){}{suffix}", p.prefix);
            g.push(bob::text_update(&name, false, value_x, ry, value_w));
        }
        g.push(bob::open_button(
            &screen_file(p),
            &[("P", "$(P)"), ("R", &p.prefix)],
            &format!("{} screen", p.name),
            (
                PAD,
                rows.len() as i32 * ROW,
                inner(BOX_W) - 2 * PAD,
                ROW_HEIGHT,
            ),
        ));
        widgets.push(g);
        right = right.max(x + BOX_W);
        bottom = bottom.max(y + tallest);
    }
    // The published images, in a column right of the graph.
    let mut y = TITLE_H;
    let x = right + BOX_GAP_X;
    let mut images = false;
    for p in ports {
        if let Some(image) = &p.image {
            let pv = image.for_pipeline_screen(&p.prefix);
            let (w, h) = (IMAGE_SIZE + 2 * PAD + 2 * INSET, IMAGE_SIZE + CHROME);
            let mut g = bob::group(&format!("{} image", p.name), x, y, w, h);
            g.push(bob::image(&pv, PAD, 0, IMAGE_SIZE, IMAGE_SIZE));
            widgets.push(g);
            y += IMAGE_SIZE + CHROME + GAP;
            images = true;
        }
    }
    if images {
        right = x + IMAGE_SIZE + 2 * PAD + 2 * INSET;
        bottom = bottom.max(y);
    }
    Screen {
        groups: ports.len(),
        widgets,
        width: right + MARGIN,
        height: bottom + MARGIN,
    }
}
