//! Phoebus Display Builder files (`.bob`): a small XML element tree, its escaping, and the
//! widgets the screens use. Only the properties written here are set; Phoebus gives every
//! other property its default.

use std::fmt::Write as _;

/// The display file format these screens are written in.
pub const DISPLAY_VERSION: &str = "2.0.0";

/// One XML element: attributes, then either text or child elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Element {
    name: String,
    attrs: Vec<(&'static str, String)>,
    text: Option<String>,
    children: Vec<Element>,
}

impl Element {
    pub fn new(name: &str) -> Element {
        Element {
            name: name.to_string(),
            attrs: Vec::new(),
            text: None,
            children: Vec::new(),
        }
    }

    /// `<name>text</name>`.
    pub fn leaf(name: &str, text: impl ToString) -> Element {
        let mut e = Element::new(name);
        e.text = Some(text.to_string());
        e
    }

    pub fn attr(mut self, name: &'static str, value: impl ToString) -> Element {
        self.attrs.push((name, value.to_string()));
        self
    }

    pub fn child(mut self, child: Element) -> Element {
        self.children.push(child);
        self
    }

    pub fn push(&mut self, child: Element) {
        self.children.push(child);
    }

    /// A property element `<name>value</name>`.
    pub fn prop(self, name: &str, value: impl ToString) -> Element {
        self.child(Element::leaf(name, value))
    }

    fn write(&self, out: &mut String, depth: usize) {
        let indent = "  ".repeat(depth);
        let _ = write!(out, "{indent}<{}", self.name);
        for (k, v) in &self.attrs {
            let _ = write!(out, " {k}=\"{}\"", escape(v));
        }
        match (&self.text, self.children.is_empty()) {
            (Some(t), true) => {
                let _ = writeln!(out, ">{}</{}>", escape(t), self.name);
            }
            (None, true) => out.push_str("/>\n"),
            _ => {
                out.push_str(">\n");
                for c in &self.children {
                    c.write(out, depth + 1);
                }
                let _ = writeln!(out, "{indent}</{}>", self.name);
            }
        }
    }

    /// The element as a complete XML document.
    pub fn to_document(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        self.write(&mut out, 0);
        out
    }
}

/// Text or an attribute value as XML: the five markup characters as entities, and the
/// control characters XML 1.0 cannot hold at all (not even as references) as U+FFFD.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Newlines and tabs in attribute values would be normalised to spaces by a reader.
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The widget version Phoebus writes for `kind`: an older one would make it convert the
/// widget as if it came from an older file.
fn version(kind: &str) -> &'static str {
    match kind {
        "textentry" | "action_button" | "group" => "3.0.0",
        _ => "2.0.0",
    }
}

/// A widget of `kind` with its name and bounds.
pub fn widget(kind: &str, name: &str, x: i32, y: i32, width: i32, height: i32) -> Element {
    Element::new("widget")
        .attr("type", kind)
        .attr("version", version(kind))
        .prop("name", name)
        .prop("x", x)
        .prop("y", y)
        .prop("width", width)
        .prop("height", height)
}

/// The display: its name, size and macros (each a default that the opener's value replaces:
/// see [`macro_default`]).
pub fn display(name: &str, width: i32, height: i32, macros: &[(&str, &str)]) -> Element {
    let mut m = Element::new("macros");
    for (k, v) in macros {
        m.push(Element::leaf(k, macro_default(k, v)));
    }
    Element::new("display")
        .attr("version", DISPLAY_VERSION)
        .prop("name", name)
        .child(m)
        .prop("width", width)
        .prop("height", height)
}

/// `$(NAME=default)`: a display's own macros override those its opener passes, so a default
/// is written as a reference to the opener's value that falls back to `default` when the
/// file is opened alone.
pub fn macro_default(name: &str, default: &str) -> String {
    format!("$({name}={default})")
}

pub fn label(name: &str, text: &str, x: i32, y: i32, width: i32, height: i32) -> Element {
    widget("label", name, x, y, width, height).prop("text", text)
}

/// Shows `pv`; `text_format`: as text (a long string served as a char waveform).
pub fn text_update(pv: &str, text_format: bool, x: i32, y: i32, width: i32) -> Element {
    let w = widget("textupdate", pv, x, y, width, ROW_HEIGHT).prop("pv_name", pv);
    if text_format {
        w.prop("format", FORMAT_STRING)
    } else {
        w
    }
}

pub fn text_entry(pv: &str, text_format: bool, x: i32, y: i32, width: i32) -> Element {
    let w = widget("textentry", pv, x, y, width, ROW_HEIGHT).prop("pv_name", pv);
    if text_format {
        w.prop("format", FORMAT_STRING)
    } else {
        w
    }
}

/// A menu of the PV's own choices.
pub fn combo(pv: &str, x: i32, y: i32, width: i32) -> Element {
    widget("combo", pv, x, y, width, ROW_HEIGHT).prop("pv_name", pv)
}

/// A button that writes `value` to `pv`.
pub fn write_button(pv: &str, value: i64, text: &str, x: i32, y: i32, width: i32) -> Element {
    let action = Element::new("action")
        .attr("type", "write_pv")
        .prop("description", text)
        .prop("pv_name", pv)
        .prop("value", value);
    widget(
        "action_button",
        &format!("{pv} {text}"),
        x,
        y,
        width,
        ROW_HEIGHT,
    )
    .prop("pv_name", pv)
    .prop("text", text)
    .child(Element::new("actions").child(action))
}

/// A button that opens `file` (next to this one) in a new tab with `macros`.
pub fn open_button(
    file: &str,
    macros: &[(&str, &str)],
    text: &str,
    bounds: (i32, i32, i32, i32),
) -> Element {
    let mut m = Element::new("macros");
    for (k, v) in macros {
        m.push(Element::leaf(k, v));
    }
    let action = Element::new("action")
        .attr("type", "open_display")
        .prop("description", text)
        .prop("file", file)
        .child(m)
        .prop("target", "tab");
    let (x, y, w, h) = bounds;
    widget("action_button", &format!("open {file}"), x, y, w, h)
        .prop("text", text)
        .child(Element::new("actions").child(action))
}

/// A titled box; its children's positions are relative to its inside.
pub fn group(title: &str, x: i32, y: i32, width: i32, height: i32) -> Element {
    widget("group", title, x, y, width, height)
}

/// An image of an NTNDArray PV.
pub fn image(pv: &str, x: i32, y: i32, width: i32, height: i32) -> Element {
    widget("image", pv, x, y, width, height).prop("pv_name", pv)
}

/// A line with an arrow at its end, from `(x0, y0)` to `(x1, y1)` (display coordinates).
pub fn arrow(name: &str, (x0, y0): (i32, i32), (x1, y1): (i32, i32)) -> Element {
    let (x, y) = (x0.min(x1), y0.min(y1));
    let point = |px: i32, py: i32| {
        Element::new("point")
            .attr("x", f64::from(px - x))
            .attr("y", f64::from(py - y))
    };
    widget(
        "polyline",
        name,
        x,
        y,
        (x1 - x0).abs().max(1),
        (y1 - y0).abs().max(1),
    )
    .prop("line_width", 2)
    .prop("arrows", ARROWS_TO)
    .prop("arrow_length", 8)
    .child(
        Element::new("points")
            .child(point(x0, y0))
            .child(point(x1, y1)),
    )
}

/// Height of one row's widgets.
pub const ROW_HEIGHT: i32 = 20;
/// Phoebus' format option "String" (its position in the format menu).
const FORMAT_STRING: i32 = 6;
/// Phoebus' polyline arrows option "To".
const ARROWS_TO: i32 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(
            escape(r#"a<b>&"c"'d'"#),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;"
        );
        assert_eq!(escape("x\u{1}y\nz"), "x\u{FFFD}y&#10;z");
        assert_eq!(escape("13SIM1:cam1:"), "13SIM1:cam1:");
    }

    #[test]
    fn writes_nested_elements_with_escaped_text_and_attributes() {
        let doc = Element::new("display")
            .attr("version", "2.0.0")
            .prop("name", "A&B <ports>")
            .child(Element::new("point").attr("x", "1\"2"))
            .to_document();
        assert_eq!(
            doc,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <display version=\"2.0.0\">\n  \
             <name>A&amp;B &lt;ports&gt;</name>\n  \
             <point x=\"1&quot;2\"/>\n\
             </display>\n"
        );
    }

    #[test]
    fn display_macros_fall_back_to_their_defaults() {
        let d = display("x", 10, 10, &[("P", "13SIM1:"), ("R", "cam1:")]).to_document();
        assert!(d.contains("<P>$(P=13SIM1:)</P>") && d.contains("<R>$(R=cam1:)</R>"));
    }
}
