//! NDFileNexus template files, parsed and checked before any file opens.
//!
//! The format is areaDetector's (NDFileNexus.cpp): the root element is `<NXroot>`; an element
//! whose tag is a NeXus class (`NX...`), or any element with `type="UserGroup"`, is a group
//! named by its `name` attribute (else by its tag) with `NX_class` = the tag; `<Attr>` is an
//! HDF5 attribute of its parent; any other element is a dataset named by its tag:
//!
//! * `type="pArray"`: the frames (exactly one in a template);
//! * `type="ND_ATTR" source="NAME"`: the value of NDAttribute NAME in the first frame;
//! * `type="CONST"`: the element's text, as `outtype` says (`NX_CHAR` default, `NX_INT8` ..
//!   `NX_UINT64`, `NX_FLOAT32`, `NX_FLOAT64`);
//! * no `type`: the text (`LEFT BLANK` when empty, as areaDetector).
//!
//! `<Attr name="N" type="ND_ATTR" source="NAME"/>` and `<Attr name="N" type="CONST"
//! outtype="...">text</Attr>` are the attribute forms. Anything else (an unknown `type` or
//! `outtype`, a missing `name`/`source`, a number that does not parse, elements inside a
//! dataset, two objects of one name in a group) is an error naming the line and element;
//! areaDetector logs most of these and writes what it can.

use roxmltree::{Document, Node as XmlNode};

/// NeXus `outtype` of a CONST value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutType {
    Char,
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float32,
    Float64,
}

impl OutType {
    pub fn parse(s: &str) -> Option<OutType> {
        Some(match s {
            "NX_CHAR" => OutType::Char,
            "NX_INT8" => OutType::Int8,
            "NX_UINT8" => OutType::UInt8,
            "NX_INT16" => OutType::Int16,
            "NX_UINT16" => OutType::UInt16,
            "NX_INT32" => OutType::Int32,
            "NX_UINT32" => OutType::UInt32,
            "NX_INT64" => OutType::Int64,
            "NX_UINT64" => OutType::UInt64,
            "NX_FLOAT32" => OutType::Float32,
            "NX_FLOAT64" => OutType::Float64,
            _ => return None,
        })
    }
}

/// A CONST value, already converted to its `outtype`.
#[derive(Debug, Clone, PartialEq)]
pub enum Constant {
    Text(String),
    Int(OutType, i128),
    Float(OutType, f64),
}

/// Where a dataset's or attribute's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Constant(Constant),
    NdAttribute(String),
}

/// An `<Attr>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    pub name: String,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DatasetKind {
    /// `type="pArray"`.
    Frames,
    Value(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub name: String,
    pub kind: DatasetKind,
    pub attrs: Vec<Attr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: String,
    /// `NX_class`: the element's tag.
    pub class: String,
    pub attrs: Vec<Attr>,
    pub items: Vec<Item>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Group(Group),
    Dataset(Dataset),
}

/// A checked template: the file root (`<NXroot>`) and the path of the frames' dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub root: Group,
    pub frames_path: String,
}

impl Template {
    /// TemplateFilePath + TemplateFileName: XML text when the name starts with '<' (after
    /// blanks), else a file (the path gets a '/' when it lacks one).
    pub fn load(path: &str, name: &str) -> Result<Template, String> {
        if name.trim().is_empty() {
            return Err("no NeXus template: TemplateFileName is empty".into());
        }
        if name.trim_start().starts_with('<') {
            return Template::parse(name);
        }
        let mut full = path.to_string();
        if !full.is_empty() && !full.ends_with('/') {
            full.push('/');
        }
        full.push_str(name);
        let text = std::fs::read_to_string(&full)
            .map_err(|e| format!("cannot read NeXus template {full}: {e}"))?;
        Template::parse(&text).map_err(|e| format!("{full}: {e}"))
    }

    pub fn parse(text: &str) -> Result<Template, String> {
        let doc = Document::parse(text).map_err(|e| format!("XML syntax error: {e}"))?;
        let p = Parser { doc: &doc };
        let top = doc.root_element();
        if top.tag_name().name() != "NXroot" {
            return Err(p.at(top, "the root element must be <NXroot>"));
        }
        let root = p.group_body(top, String::new(), "NXroot".into())?;
        let mut frames = Vec::new();
        find_frames(&root, "", &mut frames);
        match frames.len() {
            1 => Ok(Template {
                root,
                frames_path: frames.remove(0),
            }),
            0 => Err("the template has no element with type=\"pArray\" (the frames)".into()),
            _ => Err(format!(
                "the template has {} elements with type=\"pArray\" ({}); one holds the frames",
                frames.len(),
                frames.join(", ")
            )),
        }
    }
}

fn find_frames(g: &Group, path: &str, out: &mut Vec<String>) {
    for item in &g.items {
        match item {
            Item::Group(c) => find_frames(c, &format!("{path}/{}", c.name), out),
            Item::Dataset(d) if d.kind == DatasetKind::Frames => {
                out.push(format!("{path}/{}", d.name))
            }
            Item::Dataset(_) => {}
        }
    }
}

struct Parser<'a, 'i> {
    doc: &'a Document<'i>,
}

impl Parser<'_, '_> {
    fn at(&self, node: XmlNode, msg: &str) -> String {
        let pos = self.doc.text_pos_at(node.range().start);
        format!("line {}: <{}>: {msg}", pos.row, node.tag_name().name())
    }

    fn is_group(node: XmlNode) -> bool {
        let tag = node.tag_name().name();
        (tag.starts_with("NX") && tag != "NXroot") || node.attribute("type") == Some("UserGroup")
    }

    fn group_body(&self, node: XmlNode, name: String, class: String) -> Result<Group, String> {
        let mut g = Group {
            name,
            class,
            attrs: Vec::new(),
            items: Vec::new(),
        };
        let mut names: Vec<String> = Vec::new();
        for child in node.children().filter(XmlNode::is_element) {
            let tag = child.tag_name().name();
            if tag == "Attr" {
                g.attrs.push(self.attr(child)?);
                continue;
            }
            if tag == "NXroot" {
                return Err(self.at(child, "<NXroot> is only the root element"));
            }
            let item = if Self::is_group(child) {
                let name = child.attribute("name").unwrap_or(tag).to_string();
                Item::Group(self.group_body(child, name, tag.to_string())?)
            } else {
                Item::Dataset(self.dataset(child)?)
            };
            let name = match &item {
                Item::Group(c) => &c.name,
                Item::Dataset(d) => &d.name,
            };
            if name.is_empty() || name.contains('/') || name == "." {
                return Err(self.at(child, &format!("\"{name}\" is not a usable HDF5 name")));
            }
            if names.contains(name) {
                return Err(self.at(
                    child,
                    &format!("a second object named \"{name}\" in this group"),
                ));
            }
            names.push(name.clone());
            g.items.push(item);
        }
        Ok(g)
    }

    fn text(node: XmlNode) -> String {
        node.children()
            .filter(XmlNode::is_text)
            .filter_map(|t| t.text())
            .collect::<String>()
            .trim()
            .to_string()
    }

    fn constant(&self, node: XmlNode) -> Result<Constant, String> {
        let text = Self::text(node);
        let out = match node.attribute("outtype") {
            None => OutType::Char,
            Some(s) => OutType::parse(s).ok_or_else(|| {
                self.at(
                    node,
                    &format!(
                        "unknown outtype=\"{s}\" (NX_CHAR, NX_INT8..NX_UINT64, NX_FLOAT32, NX_FLOAT64)"
                    ),
                )
            })?,
        };
        let bad = |what: &str| self.at(node, &format!("\"{text}\" is not {what} for {out:?}"));
        Ok(match out {
            OutType::Char => Constant::Text(text.clone()),
            OutType::Float32 | OutType::Float64 => {
                Constant::Float(out, text.parse().map_err(|_| bad("a number"))?)
            }
            _ => {
                let v: i128 = text.parse().map_err(|_| bad("an integer"))?;
                let (lo, hi): (i128, i128) = match out {
                    OutType::Int8 => (i8::MIN.into(), i8::MAX.into()),
                    OutType::UInt8 => (0, u8::MAX.into()),
                    OutType::Int16 => (i16::MIN.into(), i16::MAX.into()),
                    OutType::UInt16 => (0, u16::MAX.into()),
                    OutType::Int32 => (i32::MIN.into(), i32::MAX.into()),
                    OutType::UInt32 => (0, u32::MAX.into()),
                    OutType::Int64 => (i64::MIN.into(), i64::MAX.into()),
                    _ => (0, u64::MAX.into()),
                };
                if v < lo || v > hi {
                    return Err(bad("in range"));
                }
                Constant::Int(out, v)
            }
        })
    }

    fn nd_attribute(&self, node: XmlNode) -> Result<Value, String> {
        match node.attribute("source") {
            Some(s) if !s.is_empty() => Ok(Value::NdAttribute(s.to_string())),
            _ => Err(self.at(node, "type=\"ND_ATTR\" needs source=\"NDAttribute name\"")),
        }
    }

    fn attr(&self, node: XmlNode) -> Result<Attr, String> {
        let name = match node.attribute("name") {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => return Err(self.at(node, "<Attr> needs name=\"...\"")),
        };
        if let Some(c) = node.children().find(XmlNode::is_element) {
            return Err(self.at(c, "an <Attr> holds no elements"));
        }
        let value = match node.attribute("type") {
            Some("ND_ATTR") => self.nd_attribute(node)?,
            Some("CONST") => Value::Constant(self.constant(node)?),
            Some(t) => {
                return Err(self.at(
                    node,
                    &format!("unknown type=\"{t}\" for <Attr> (ND_ATTR or CONST)"),
                ))
            }
            None => return Err(self.at(node, "<Attr> needs type=\"ND_ATTR\" or type=\"CONST\"")),
        };
        Ok(Attr { name, value })
    }

    fn dataset(&self, node: XmlNode) -> Result<Dataset, String> {
        let kind = match node.attribute("type") {
            Some("pArray") => DatasetKind::Frames,
            Some("ND_ATTR") => DatasetKind::Value(self.nd_attribute(node)?),
            Some("CONST") => DatasetKind::Value(Value::Constant(self.constant(node)?)),
            None => {
                let text = Self::text(node);
                let text = if text.is_empty() {
                    "LEFT BLANK".to_string()
                } else {
                    text
                };
                DatasetKind::Value(Value::Constant(Constant::Text(text)))
            }
            Some(t) => {
                return Err(self.at(
                    node,
                    &format!(
                        "unknown type=\"{t}\" (pArray, ND_ATTR, CONST, UserGroup, or an NX class element)"
                    ),
                ))
            }
        };
        let mut attrs = Vec::new();
        for child in node.children().filter(XmlNode::is_element) {
            if child.tag_name().name() != "Attr" {
                return Err(self.at(
                    child,
                    &format!(
                        "inside dataset <{}> only <Attr> is allowed",
                        node.tag_name().name()
                    ),
                ));
            }
            attrs.push(self.attr(child)?);
        }
        Ok(Dataset {
            name: node.tag_name().name().to_string(),
            kind,
            attrs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"<NXroot>
  <Attr name="facility" type="CONST">lab</Attr>
  <NXentry name="entry">
    <title>scan 7</title>
    <run type="CONST" outtype="NX_INT32">7</run>
    <NXinstrument name="instrument">
      <NXdetector name="detector">
        <data type="pArray"><Attr name="signal" type="CONST" outtype="NX_INT32">1</Attr></data>
        <gain type="ND_ATTR" source="Gain"><Attr name="units" type="CONST">e/ADU</Attr></gain>
      </NXdetector>
    </NXinstrument>
    <notes type="UserGroup"><empty/></notes>
  </NXentry>
</NXroot>"#;

    #[test]
    fn parses_groups_datasets_and_attributes() {
        let t = Template::parse(GOOD).unwrap();
        assert_eq!(t.frames_path, "/entry/instrument/detector/data");
        assert_eq!(t.root.attrs[0].name, "facility");
        let Item::Group(entry) = &t.root.items[0] else {
            panic!()
        };
        assert_eq!(
            (entry.name.as_str(), entry.class.as_str()),
            ("entry", "NXentry")
        );
        assert_eq!(
            entry.items[1],
            Item::Dataset(Dataset {
                name: "run".into(),
                kind: DatasetKind::Value(Value::Constant(Constant::Int(OutType::Int32, 7))),
                attrs: vec![],
            })
        );
        let Item::Group(notes) = &entry.items[3] else {
            panic!()
        };
        assert_eq!(notes.class, "notes");
        let Item::Dataset(empty) = &notes.items[0] else {
            panic!()
        };
        assert_eq!(
            empty.kind,
            DatasetKind::Value(Value::Constant(Constant::Text("LEFT BLANK".into())))
        );
    }

    #[test]
    fn errors_name_the_line_and_element() {
        let bad = GOOD.replace("type=\"ND_ATTR\" source=\"Gain\"", "type=\"PV\"");
        let e = Template::parse(&bad).unwrap_err();
        assert_eq!(
            e,
            "line 9: <gain>: unknown type=\"PV\" (pArray, ND_ATTR, CONST, UserGroup, or an NX class element)"
        );
        let e = Template::parse(&GOOD.replace("NX_INT32\">7", "NX_INT32\">seven")).unwrap_err();
        assert!(
            e.starts_with("line 5: <run>: \"seven\" is not an integer"),
            "{e}"
        );
        let e = Template::parse(&GOOD.replace("NX_INT32\">7", "NX_INT8\">300")).unwrap_err();
        assert!(e.contains("not in range"), "{e}");
        let e = Template::parse(&GOOD.replace("outtype=\"NX_INT32\">7", "outtype=\"NX_BOOL\">7"))
            .unwrap_err();
        assert!(
            e.starts_with("line 5: <run>: unknown outtype=\"NX_BOOL\""),
            "{e}"
        );
        let e = Template::parse(&GOOD.replace(
            "<Attr name=\"units\" type=\"CONST\">",
            "<Attr type=\"CONST\">",
        ))
        .unwrap_err();
        assert!(e.starts_with("line 9: <Attr>: <Attr> needs name"), "{e}");
        let e = Template::parse(&GOOD.replace("source=\"Gain\"", "")).unwrap_err();
        assert!(
            e.starts_with("line 9: <gain>: type=\"ND_ATTR\" needs source"),
            "{e}"
        );
        let e = Template::parse(&GOOD.replace("<data type=\"pArray\">", "<data type=\"CONST\">"))
            .unwrap_err();
        assert_eq!(
            e,
            "the template has no element with type=\"pArray\" (the frames)"
        );
        let e = Template::parse(&GOOD.replace("<title>", "<title type=\"pArray\">")).unwrap_err();
        assert!(e.contains("2 elements with type=\"pArray\""), "{e}");
        let e = Template::parse(
            &GOOD
                .replace("<run ", "<title ")
                .replace("</run>", "</title>"),
        )
        .unwrap_err();
        assert!(
            e.starts_with("line 5: <title>: a second object named \"title\""),
            "{e}"
        );
        let e = Template::parse("<root/>").unwrap_err();
        assert_eq!(e, "line 1: <root>: the root element must be <NXroot>");
        let e = Template::parse("<NXroot><a></NXroot>").unwrap_err();
        assert!(e.starts_with("XML syntax error"), "{e}");
        let e = Template::parse(&GOOD.replace("<title>scan 7</title>", "<title><x/></title>"))
            .unwrap_err();
        assert!(
            e.starts_with("line 4: <x>: inside dataset <title> only <Attr>"),
            "{e}"
        );
    }

    #[test]
    fn the_example_template_parses() {
        let t = Template::parse(include_str!("../../../../examples/nexus/detector.xml")).unwrap();
        assert_eq!(t.frames_path, "/entry/instrument/detector/data");
    }

    #[test]
    fn load_reads_path_plus_name_or_inline_xml() {
        let dir = std::env::temp_dir().join(format!("ndflow-nxt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("t.xml"), GOOD).unwrap();
        let from_file = Template::load(&dir.to_string_lossy(), "t.xml").unwrap();
        assert_eq!(from_file, Template::parse(GOOD).unwrap());
        assert_eq!(Template::load("", GOOD).unwrap(), from_file);
        let e = Template::load(&dir.to_string_lossy(), "missing.xml").unwrap_err();
        assert!(e.starts_with("cannot read NeXus template"), "{e}");
        assert!(Template::load("/x", " ")
            .unwrap_err()
            .contains("TemplateFileName is empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
