//! NDFileHDF5's XML layout files (ADCore `hdf5_xml_layout_schema.xsd`): parsed and checked
//! into a [`Layout`] before any file is opened.
//!
//! ```xml
//! <hdf5_layout auto_ndattr_default="true">
//!   <global name="detector_data_destination" ndattribute="Dest"/>
//!   <group name="entry" ndattr_default="false">
//!     <attribute name="NX_class" source="constant" value="NXentry" type="string"/>
//!     <dataset name="data" source="detector" det_default="true"/>
//!     <dataset name="gain" source="ndattribute" ndattribute="Gain" when="OnFileWrite"/>
//!     <dataset name="energy" source="constant" value="1.5,2.5" type="float"/>
//!     <hardlink name="link" target="/entry/data"/>
//!   </group>
//! </hdf5_layout>
//! ```
//! Anything the schema does not allow is an error naming the element, the attribute and the
//! line: the writer refuses to open a file rather than guessing (ADCore ignores some of it).
//! A dataset without `source` is allowed only as `performance/timestamp` (the performance
//! dataset, as in ADCore's default layout).

use std::collections::HashSet;

use roxmltree::{Document, Node};

/// When a value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    OnFileOpen,
    OnFileWrite,
    OnFileClose,
}

/// A constant's value, typed as the `type` attribute says.
#[derive(Debug, Clone, PartialEq)]
pub enum Constant {
    Int(Vec<i32>),
    Float(Vec<f64>),
    Str(String),
}

/// Where a value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Constant(Constant),
    NdAttribute(String),
}

/// An HDF5 attribute on a group or dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    pub name: String,
    pub source: Source,
    pub when: When,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DatasetSource {
    Detector {
        default: bool,
    },
    NdAttribute(String),
    Constant(Constant),
    /// `performance/timestamp` without a source.
    Performance,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub name: String,
    pub source: DatasetSource,
    pub when: When,
    pub attrs: Vec<Attr>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Group(Group),
    Dataset(Dataset),
    Hardlink { name: String, target: String },
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Group {
    pub name: String,
    pub ndattr_default: bool,
    pub attrs: Vec<Attr>,
    pub items: Vec<Item>,
}

/// A checked layout; `root` is the file's root group "/".
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub root: Group,
    pub auto_ndattr_default: bool,
    /// `global name="detector_data_destination"`: the NDAttribute naming a frame's dataset.
    pub destination: Option<String>,
}

impl Layout {
    /// XMLFileName's value: XML text (starts with '<') or the path of a file holding it.
    pub fn load(spec: &str) -> Result<Layout, String> {
        let spec = spec.trim();
        if spec.starts_with('<') {
            return Layout::parse(spec);
        }
        let text = std::fs::read_to_string(spec)
            .map_err(|e| format!("cannot read XML layout file {spec}: {e}"))?;
        Layout::parse(&text).map_err(|e| format!("{spec}: {e}"))
    }

    pub fn parse(text: &str) -> Result<Layout, String> {
        let doc = Document::parse(text).map_err(|e| format!("XML syntax error: {e}"))?;
        let top = doc.root_element();
        let p = Parser { doc: &doc };
        if top.tag_name().name() != "hdf5_layout" {
            return Err(p.at(top, "the root element must be <hdf5_layout>"));
        }
        p.only_attrs(top, &["auto_ndattr_default"])?;
        let auto_ndattr_default = p.boolean(top, "auto_ndattr_default", true)?;
        let mut root = Group {
            name: String::new(),
            ..Group::default()
        };
        let mut destination = None;
        for child in top.children().filter(Node::is_element) {
            match child.tag_name().name() {
                "group" => root.items.push(Item::Group(p.group(child)?)),
                "global" => {
                    p.only_attrs(child, &["name", "ndattribute"])?;
                    let name = p.required(child, "name")?;
                    if name != "detector_data_destination" {
                        return Err(p.at(
                            child,
                            &format!(
                                "attribute name=\"{name}\" must be \"detector_data_destination\""
                            ),
                        ));
                    }
                    destination = Some(p.required(child, "ndattribute")?.to_string());
                }
                other => {
                    return Err(p.at(
                        child,
                        &format!("<{other}> is not allowed here (only <group> and <global>)"),
                    ))
                }
            }
        }
        let layout = Layout {
            root,
            auto_ndattr_default,
            destination,
        };
        layout.check()?;
        Ok(layout)
    }

    /// Whole-layout rules: one default detector dataset at most, at least one detector
    /// dataset, hardlink targets that exist, one ndattr_default group at most.
    fn check(&self) -> Result<(), String> {
        let mut paths = HashSet::new();
        let mut dets = Vec::new();
        let mut defaults = 0;
        let mut links = Vec::new();
        walk(&self.root, "", &mut |path, item| match item {
            Item::Group(g) => {
                paths.insert(path.to_string());
                if g.ndattr_default {
                    defaults += 1;
                }
            }
            Item::Dataset(d) => {
                paths.insert(path.to_string());
                if let DatasetSource::Detector { default } = d.source {
                    dets.push((path.to_string(), default));
                }
            }
            Item::Hardlink { target, .. } => links.push((path.to_string(), target.clone())),
        });
        if dets.is_empty() {
            return Err("the layout has no <dataset source=\"detector\">".into());
        }
        if dets.iter().filter(|d| d.1).count() > 1 {
            return Err("more than one <dataset det_default=\"true\">".into());
        }
        if defaults > 1 {
            return Err("more than one <group ndattr_default=\"true\">".into());
        }
        for (link, target) in links {
            let t = target.trim_end_matches('/');
            if !paths.contains(t) {
                return Err(format!(
                    "<hardlink> {link}: target=\"{target}\" is no group or dataset of the layout"
                ));
            }
        }
        Ok(())
    }

    /// The detector datasets' full paths; the default one first.
    pub fn detector_paths(&self) -> Vec<String> {
        let mut dets: Vec<(String, bool)> = Vec::new();
        walk(&self.root, "", &mut |path, item| {
            if let Item::Dataset(Dataset {
                source: DatasetSource::Detector { default },
                ..
            }) = item
            {
                dets.push((path.to_string(), *default));
            }
        });
        dets.sort_by_key(|d| !d.1);
        dets.into_iter().map(|d| d.0).collect()
    }

    /// The NDAttribute datasets: (full path, NDAttribute name, when).
    pub fn ndattr_datasets(&self) -> Vec<(String, String, When)> {
        let mut out = Vec::new();
        walk(&self.root, "", &mut |path, item| {
            if let Item::Dataset(Dataset {
                source: DatasetSource::NdAttribute(a),
                when,
                ..
            }) = item
            {
                out.push((path.to_string(), a.clone(), *when));
            }
        });
        out
    }

    /// The group for NDAttributes the layout does not place: the `ndattr_default` group,
    /// else the root (None when auto_ndattr_default = false and no group is marked).
    pub fn ndattr_default_group(&self) -> Option<String> {
        let mut found = None;
        walk(&self.root, "", &mut |path, item| {
            if let Item::Group(g) = item {
                if g.ndattr_default && found.is_none() {
                    found = Some(path.to_string());
                }
            }
        });
        found.or_else(|| self.auto_ndattr_default.then(|| "/".to_string()))
    }

    /// The performance dataset's group path, if the layout has `performance/timestamp`.
    pub fn performance_group(&self) -> Option<String> {
        let mut found = None;
        walk(&self.root, "", &mut |path, item| {
            if let Item::Dataset(Dataset {
                source: DatasetSource::Performance,
                ..
            }) = item
            {
                found = path.rsplit_once('/').map(|(g, _)| g.to_string());
            }
        });
        found
    }
}

/// Visits every item below `g` with its full path ("/entry/data").
pub fn walk(g: &Group, prefix: &str, f: &mut dyn FnMut(&str, &Item)) {
    for item in &g.items {
        let name = match item {
            Item::Group(c) => &c.name,
            Item::Dataset(d) => &d.name,
            Item::Hardlink { name, .. } => name,
        };
        let path = format!("{prefix}/{name}");
        f(&path, item);
        if let Item::Group(c) = item {
            walk(c, &path, f);
        }
    }
}

struct Parser<'a, 'i> {
    doc: &'a Document<'i>,
}

impl Parser<'_, '_> {
    fn line(&self, n: Node) -> u32 {
        self.doc.text_pos_at(n.range().start).row
    }

    fn at(&self, n: Node, msg: &str) -> String {
        let name = n
            .attribute("name")
            .map(|v| format!(" name=\"{v}\""))
            .unwrap_or_default();
        format!(
            "<{}{name}> at line {}: {msg}",
            n.tag_name().name(),
            self.line(n)
        )
    }

    fn only_attrs(&self, n: Node, allowed: &[&str]) -> Result<(), String> {
        match n.attributes().find(|a| !allowed.contains(&a.name())) {
            Some(a) => Err(self.at(n, &format!("unknown attribute {}", a.name()))),
            None => Ok(()),
        }
    }

    fn required<'n>(&self, n: Node<'n, '_>, attr: &str) -> Result<&'n str, String> {
        match n.attribute(attr) {
            Some(v) if !v.trim().is_empty() => Ok(v.trim()),
            _ => Err(self.at(n, &format!("attribute {attr} is required"))),
        }
    }

    fn boolean(&self, n: Node, attr: &str, default: bool) -> Result<bool, String> {
        match n.attribute(attr).map(str::trim) {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(v) => Err(self.at(
                n,
                &format!("attribute {attr}=\"{v}\" must be true or false"),
            )),
        }
    }

    /// An HDF5 link name: not empty, no '/', not "." or "..".
    fn name(&self, n: Node) -> Result<String, String> {
        let v = self.required(n, "name")?;
        if v.contains('/') || v == "." || v == ".." {
            return Err(self.at(
                n,
                &format!("attribute name=\"{v}\" cannot hold '/' or be . or .."),
            ));
        }
        Ok(v.to_string())
    }

    fn when(&self, n: Node, allowed: &[When], default: When) -> Result<When, String> {
        let w = match n.attribute("when").map(str::trim) {
            None | Some("") => return Ok(default),
            Some("OnFileOpen") => When::OnFileOpen,
            Some("OnFileWrite") => When::OnFileWrite,
            Some("OnFileClose") => When::OnFileClose,
            Some(v) => return Err(self.at(n, &format!("attribute when=\"{v}\" is not known"))),
        };
        if !allowed.contains(&w) {
            return Err(self.at(n, &format!("attribute when=\"{w:?}\" is not allowed here")));
        }
        Ok(w)
    }

    fn constant(&self, n: Node, arrays: bool) -> Result<Constant, String> {
        let Some(value) = n.attribute("value") else {
            return Err(self.at(n, "attribute value is required for source=\"constant\""));
        };
        let parts = || value.split(',').map(str::trim);
        let bad = |t: &str, v: &str| self.at(n, &format!("value=\"{v}\" is not a valid {t}"));
        let c = match n.attribute("type").map(str::trim).unwrap_or("string") {
            "string" => return Ok(Constant::Str(value.to_string())),
            "int" => Constant::Int(
                parts()
                    .map(|s| s.parse::<i32>().map_err(|_| bad("int", value)))
                    .collect::<Result<_, _>>()?,
            ),
            "float" => Constant::Float(
                parts()
                    .map(|s| s.parse::<f64>().map_err(|_| bad("float", value)))
                    .collect::<Result<_, _>>()?,
            ),
            t => {
                return Err(self.at(
                    n,
                    &format!("attribute type=\"{t}\" must be int, float or string"),
                ))
            }
        };
        let len = match &c {
            Constant::Int(v) => v.len(),
            Constant::Float(v) => v.len(),
            Constant::Str(_) => 1,
        };
        if len > 1 && !arrays {
            return Err(self.at(n, "an attribute constant holds one value"));
        }
        Ok(c)
    }

    fn attr(&self, n: Node) -> Result<Attr, String> {
        self.only_attrs(
            n,
            &["name", "source", "when", "value", "type", "ndattribute"],
        )?;
        let name = self.required(n, "name")?.to_string();
        let source = match self.required(n, "source")? {
            "constant" => Source::Constant(self.constant(n, true)?),
            "ndattribute" => Source::NdAttribute(self.required(n, "ndattribute")?.to_string()),
            v => {
                return Err(self.at(
                    n,
                    &format!("attribute source=\"{v}\" must be constant or ndattribute"),
                ))
            }
        };
        let when = self.when(n, &[When::OnFileOpen, When::OnFileClose], When::OnFileOpen)?;
        self.no_children(n)?;
        Ok(Attr { name, source, when })
    }

    fn no_children(&self, n: Node) -> Result<(), String> {
        match n.children().find(Node::is_element) {
            Some(c) => Err(self.at(c, "elements cannot nest here")),
            None => Ok(()),
        }
    }

    fn dataset(&self, n: Node, in_performance: bool) -> Result<Dataset, String> {
        self.only_attrs(
            n,
            &[
                "name",
                "source",
                "when",
                "value",
                "type",
                "ndattribute",
                "det_default",
            ],
        )?;
        let name = self.name(n)?;
        let det_default = self.boolean(n, "det_default", false)?;
        let all = [When::OnFileOpen, When::OnFileWrite, When::OnFileClose];
        let when = self.when(n, &all, When::OnFileWrite)?;
        let source = match n.attribute("source").map(str::trim) {
            Some("detector") => DatasetSource::Detector {
                default: det_default,
            },
            Some("ndattribute") => {
                DatasetSource::NdAttribute(self.required(n, "ndattribute")?.to_string())
            }
            Some("constant") => DatasetSource::Constant(self.constant(n, true)?),
            None if in_performance && name == "timestamp" => DatasetSource::Performance,
            None => return Err(self.at(n, "attribute source is required")),
            Some(v) => {
                return Err(self.at(
                    n,
                    &format!("attribute source=\"{v}\" must be detector, ndattribute or constant"),
                ))
            }
        };
        if det_default && !matches!(source, DatasetSource::Detector { .. }) {
            return Err(self.at(n, "det_default=\"true\" needs source=\"detector\""));
        }
        let mut attrs = Vec::new();
        for c in n.children().filter(Node::is_element) {
            if c.tag_name().name() != "attribute" {
                return Err(self.at(c, "only <attribute> elements can be inside a <dataset>"));
            }
            attrs.push(self.attr(c)?);
        }
        Ok(Dataset {
            name,
            source,
            when,
            attrs,
        })
    }

    fn group(&self, n: Node) -> Result<Group, String> {
        self.only_attrs(n, &["name", "ndattr_default"])?;
        let mut g = Group {
            name: self.name(n)?,
            ndattr_default: self.boolean(n, "ndattr_default", false)?,
            ..Group::default()
        };
        let mut names = HashSet::new();
        for c in n.children().filter(Node::is_element) {
            let item = match c.tag_name().name() {
                "attribute" => {
                    g.attrs.push(self.attr(c)?);
                    continue;
                }
                "group" => Item::Group(self.group(c)?),
                "dataset" => Item::Dataset(self.dataset(c, g.name == "performance")?),
                "hardlink" => {
                    self.only_attrs(c, &["name", "target"])?;
                    let target = self.required(c, "target")?;
                    if !target.starts_with('/') {
                        return Err(
                            self.at(c, &format!("target=\"{target}\" must be an absolute path"))
                        );
                    }
                    Item::Hardlink {
                        name: self.name(c)?,
                        target: target.to_string(),
                    }
                }
                other => return Err(self.at(c, &format!("<{other}> is not allowed in a <group>"))),
            };
            let name = match &item {
                Item::Group(x) => x.name.clone(),
                Item::Dataset(x) => x.name.clone(),
                Item::Hardlink { name, .. } => name.clone(),
            };
            if !names.insert(name.clone()) {
                return Err(self.at(c, &format!("a second object named {name} in this group")));
            }
            g.items.push(item);
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let ok = r#"<hdf5_layout>
  <global name="detector_data_destination" ndattribute="Dest"/>
  <group name="entry" ndattr_default="true">
    <attribute name="NX_class" source="constant" value="NXentry"/>
    <dataset name="data" source="detector" det_default="true"/>
    <dataset name="c" source="constant" value="1, 2,3" type="int"/>
    <hardlink name="l" target="/entry/data"/>
  </group>
</hdf5_layout>"#;
        let l = Layout::parse(ok).unwrap();
        assert_eq!(l.destination.as_deref(), Some("Dest"));
        assert_eq!(l.detector_paths(), ["/entry/data"]);
        assert_eq!(l.ndattr_default_group().as_deref(), Some("/entry"));
        let e = Layout::parse(&ok.replace("type=\"int\"", "type=\"long\"")).unwrap_err();
        assert!(
            e.contains("<dataset name=\"c\"> at line 6") && e.contains("type"),
            "{e}"
        );
        let e = Layout::parse(&ok.replace("/entry/data\"/>", "/nowhere\"/>")).unwrap_err();
        assert!(e.contains("/nowhere"), "{e}");
        let e = Layout::parse("<hdf5_layout><group name=\"a\"></hdf5_layout>").unwrap_err();
        assert!(e.contains("XML syntax error"), "{e}");
        let e = Layout::parse("<hdf5_layout><group name=\"a\"/></hdf5_layout>").unwrap_err();
        assert!(e.contains("no <dataset source=\"detector\">"), "{e}");
        let e = Layout::parse(&ok.replace("source=\"detector\"", "source=\"det\"")).unwrap_err();
        assert!(e.contains("line 5") && e.contains("source=\"det\""), "{e}");
    }
}
