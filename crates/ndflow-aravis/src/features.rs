//! The camera's features as ADGenICam's `makeDb.py` sees them in the GenICam XML: which
//! features get records, their types, access, limits and enumeration entries, and the record
//! (PV) and drvInfo names it gives them — so our PVs match the databases and screens sites
//! already generated for a camera model.
//!
//! makeDb.py's rules, reproduced here:
//! - Every named node that is a child of the root element (or of a `Group`) gets a record
//!   name, in document order — categories and registers too, so they take part in clashes.
//!   The name is `GC_` + node name; over 20 characters it is split into words (a letter and
//!   everything up to the next capital, the `GC_` prefix being words `G` and `C_`) and the
//!   words longer than 3 are cut to 3, first to last, one at a time, until it fits; then it is
//!   hard-cut to 20. On a clash the tail is overwritten with a counter (0, 1, …, 9, 10 …)
//!   until the name is free.
//! - Features come from every `Category` in document order (not only those under `Root`),
//!   each category's own features before its subcategories', each feature once.
//! - Integer/IntReg/IntConverter/IntSwissKnife are integers (`GC_I_`), Float/Converter/
//!   SwissKnife floats (`GC_D_`), Boolean `GC_B_`, String/StringReg `GC_S_`, Command `GC_C_`,
//!   Enumeration `GC_E_`; every feature's drvInfo carries its type letter and the full
//!   feature name. Other node types (MaskedIntReg, FloatReg, …) get no records.
//! - A feature is read-only when its first AccessMode/ImposedAccessMode says RO; without one,
//!   the node its pValue names decides; a SwissKnife without either is read-only.
//!   Read-only features get only the `_RBV` record.
//! - Enumerations keep their first 16 entries, names cut to 16 characters (mbbo states).

use std::collections::{HashMap, HashSet};

use roxmltree::{Document, Node};

/// Record names may not be longer than this (makeDb.py's limit, EPICS' 60 less the prefix).
pub const MAX_RECORD_NAME: usize = 20;
/// mbbi/mbbo states: 16, with 16-character names.
pub const MAX_ENUM_STATES: usize = 16;
pub const MAX_ENUM_NAME: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeatureType {
    Integer,
    Float,
    Boolean,
    String,
    Enumeration,
    Command,
}

impl FeatureType {
    /// The drvInfo type letter makeDb.py puts after the prefix.
    pub fn letter(self) -> char {
        match self {
            FeatureType::Integer => 'I',
            FeatureType::Float => 'D',
            FeatureType::Boolean => 'B',
            FeatureType::String => 'S',
            FeatureType::Enumeration => 'E',
            FeatureType::Command => 'C',
        }
    }

    /// The type makeDb.py gives an XML node element, or `None` when it makes no records.
    pub fn of_node(element: &str) -> Option<FeatureType> {
        Some(match element {
            "Integer" | "IntReg" | "IntConverter" | "IntSwissKnife" => FeatureType::Integer,
            "Float" | "Converter" | "SwissKnife" => FeatureType::Float,
            "Boolean" => FeatureType::Boolean,
            "String" | "StringReg" => FeatureType::String,
            "Enumeration" => FeatureType::Enumeration,
            "Command" => FeatureType::Command,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    RO,
    RW,
    WO,
}

/// A constant limit from the XML (`<Min>`/`<Max>`; computed ones, `pMin`/`pMax`, are not).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    Int(i64),
    Float(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct EnumEntry {
    pub name: String,
    /// `<Value>`; `None` when absent or not a number.
    pub value: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Feature {
    pub name: String,
    /// The XML element (`IntSwissKnife`, `StringReg`, …).
    pub node: String,
    pub kind: FeatureType,
    pub access: Access,
    /// makeDb.py makes an output record (anything not read-only).
    pub writable: bool,
    pub unit: Option<String>,
    pub min: Option<Limit>,
    pub max: Option<Limit>,
    /// Every `EnumEntry`, in XML order (see [`Feature::epics_states`] for the records' subset).
    pub entries: Vec<EnumEntry>,
    pub display_name: Option<String>,
    pub description: Option<String>,
    /// The category it was first found in.
    pub category: String,
    /// Whether that category is under `Root` (makeDb.py lists features of orphan categories too).
    pub under_root: bool,
    /// The record name: `$(P)$(R)` + this, and + `_RBV` for the readback.
    pub pv: String,
    /// The asyn drvInfo string: `GC_I_Width`, `GC_E_PixelFormat`, …
    pub drv_info: String,
}

impl Feature {
    /// The states an mbbo gets: the first 16 entries, names cut to 16 characters.
    pub fn epics_states(&self) -> Vec<(String, Option<i64>)> {
        self.entries
            .iter()
            .take(MAX_ENUM_STATES)
            .map(|e| (e.name.chars().take(MAX_ENUM_NAME).collect(), e.value))
            .collect()
    }
}

/// A node a category lists that makeDb.py makes no records for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub name: String,
    /// The XML element, or `None` when no node has that name.
    pub node: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct FeatureList {
    pub features: Vec<Feature>,
    pub skipped: Vec<Skipped>,
}

impl FeatureList {
    pub fn get(&self, name: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.name == name)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    #[error("GenICam XML: {0}")]
    Xml(#[from] roxmltree::Error),
    #[error("GenICam XML: the record prefix must be 2 ASCII letters or digits, not {0:?}")]
    Prefix(String),
}

/// The feature list with makeDb.py's default prefix `GC`.
pub fn parse(xml: &str) -> Result<FeatureList, FeatureError> {
    parse_with_prefix(xml, "GC")
}

/// As [`parse`], with makeDb.py's `--prefix` (two characters replacing `GC`).
pub fn parse_with_prefix(xml: &str, prefix: &str) -> Result<FeatureList, FeatureError> {
    if prefix.len() != 2 || !prefix.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(FeatureError::Prefix(prefix.to_string()));
    }
    // arv-tool may leave the camera's id on the first line of a saved file; makeDb.py skips it.
    let start = xml
        .lines()
        .take(2)
        .position(|l| l.trim_start().starts_with('<'))
        .map(|i| xml.lines().take(i).map(|l| l.len() + 1).sum::<usize>())
        .unwrap_or(0);
    let doc = Document::parse(xml.get(start..).unwrap_or(xml).trim_start())?;

    let mut nodes = Vec::new();
    collect_nodes(doc.root_element(), &mut nodes);
    let mut lookup: HashMap<&str, Node> = HashMap::new();
    let mut names = RecordNames::default();
    let mut categories = Vec::new();
    for n in &nodes {
        let Some(name) = n.attribute("Name") else {
            continue;
        };
        lookup.insert(name, *n);
        names.add(name, prefix);
        if n.tag_name().name() == "Category" {
            categories.push(name);
        }
    }

    let under_root = categories_under_root(&lookup);
    let mut walk = Walk {
        lookup: &lookup,
        visited: HashSet::new(),
        done: HashSet::new(),
        found: Vec::new(),
        skipped: Vec::new(),
    };
    for c in &categories {
        walk.category(c);
    }

    let features = walk
        .found
        .iter()
        .filter_map(|(name, category)| {
            let node = lookup.get(name.as_str())?;
            let kind = FeatureType::of_node(node.tag_name().name())?;
            Some(feature(
                node,
                name,
                kind,
                category,
                under_root.contains(category.as_str()),
                &lookup,
                &names,
                prefix,
            ))
        })
        .collect();
    Ok(FeatureList {
        features,
        skipped: walk.skipped,
    })
}

/// The root element's children, and those of `Group`s, which makeDb.py looks at.
fn collect_nodes<'a, 'i>(parent: Node<'a, 'i>, out: &mut Vec<Node<'a, 'i>>) {
    for n in parent.children().filter(Node::is_element) {
        if n.tag_name().name() == "Group" {
            collect_nodes(n, out);
        } else {
            out.push(n);
        }
    }
}

fn child<'a, 'i>(node: &Node<'a, 'i>, tag: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == tag)
}

fn child_text(node: &Node, tag: &str) -> Option<String> {
    child(node, tag).map(|c| text(&c))
}

/// The element's own text (makeDb.py joins its text children), trimmed.
fn text(node: &Node) -> String {
    node.children()
        .filter(|c| c.is_text())
        .filter_map(|c| c.text())
        .collect::<String>()
        .trim()
        .to_string()
}

struct Walk<'l, 'a, 'i> {
    lookup: &'l HashMap<&'a str, Node<'a, 'i>>,
    visited: HashSet<String>,
    done: HashSet<String>,
    /// (feature, category) in makeDb.py's order.
    found: Vec<(String, String)>,
    skipped: Vec<Skipped>,
}

impl Walk<'_, '_, '_> {
    fn category(&mut self, name: &str) {
        if !self.visited.insert(name.to_string()) {
            return;
        }
        let Some(node) = self.lookup.get(name).copied() else {
            return;
        };
        let mut subs = Vec::new();
        for p in node
            .children()
            .filter(|c| c.is_element() && c.tag_name().name() == "pFeature")
        {
            let feature = text(&p);
            let target = self.lookup.get(feature.as_str());
            match target.map(|t| t.tag_name().name()) {
                Some("Category") => subs.push(feature),
                Some(element) if FeatureType::of_node(element).is_some() => {
                    if self.done.insert(feature.clone()) {
                        self.found.push((feature, name.to_string()));
                    }
                }
                other => {
                    if self.done.insert(feature.clone()) {
                        self.skipped.push(Skipped {
                            name: feature,
                            node: other.map(str::to_string),
                        });
                    }
                }
            }
        }
        for s in subs {
            self.category(&s);
        }
    }
}

fn categories_under_root(lookup: &HashMap<&str, Node>) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut todo = vec!["Root".to_string()];
    while let Some(c) = todo.pop() {
        let Some(node) = lookup.get(c.as_str()) else {
            continue;
        };
        if node.tag_name().name() != "Category" || !seen.insert(c) {
            continue;
        }
        for p in node
            .children()
            .filter(|n| n.is_element() && n.tag_name().name() == "pFeature")
        {
            todo.push(text(&p));
        }
    }
    seen
}

#[allow(clippy::too_many_arguments)]
fn feature(
    node: &Node,
    name: &str,
    kind: FeatureType,
    category: &str,
    under_root: bool,
    lookup: &HashMap<&str, Node>,
    names: &RecordNames,
    prefix: &str,
) -> Feature {
    let access = access_mode(node, lookup, 0);
    let limit = |tag| {
        let t = child_text(node, tag)?;
        match kind {
            FeatureType::Float => t.parse::<f64>().ok().map(Limit::Float),
            FeatureType::Integer => parse_int(&t).map(Limit::Int),
            _ => None,
        }
    };
    let entries = node
        .children()
        .filter(|c| c.is_element() && c.tag_name().name() == "EnumEntry")
        .filter_map(|e| {
            Some(EnumEntry {
                name: e.attribute("Name")?.to_string(),
                value: child_text(&e, "Value").and_then(|v| parse_int(&v)),
            })
        })
        .collect();
    Feature {
        name: name.to_string(),
        node: node.tag_name().name().to_string(),
        kind,
        access,
        writable: access != Access::RO,
        unit: child_text(node, "Unit").filter(|u| !u.is_empty()),
        min: limit("Min"),
        max: limit("Max"),
        entries,
        display_name: child_text(node, "DisplayName"),
        description: child_text(node, "Description"),
        category: category.to_string(),
        under_root,
        pv: names.get(name).unwrap_or(name).to_string(),
        drv_info: format!("{prefix}_{}_{name}", kind.letter()),
    }
}

/// GenICam integers may be hex (`0x1F`).
fn parse_int(t: &str) -> Option<i64> {
    let t = t.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => i64::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    }
}

/// makeDb.py's rule (first AccessMode/ImposedAccessMode, else the pValue node's, else RO for
/// a SwissKnife, else RW), keeping WO apart from RW. Chains are cut at 16 to survive cycles.
fn access_mode(node: &Node, lookup: &HashMap<&str, Node>, depth: usize) -> Access {
    let mut referenced = None;
    for c in node.children().filter(Node::is_element) {
        match c.tag_name().name() {
            "AccessMode" | "ImposedAccessMode" => {
                return match text(&c).as_str() {
                    "RO" => Access::RO,
                    "WO" => Access::WO,
                    _ => Access::RW,
                };
            }
            "pValue" => referenced = Some(text(&c)),
            _ => {}
        }
    }
    match referenced.and_then(|r| lookup.get(r.as_str())) {
        Some(r) if depth < 16 => access_mode(r, lookup, depth + 1),
        Some(_) => Access::RW,
        None if matches!(node.tag_name().name(), "SwissKnife" | "IntSwissKnife") => Access::RO,
        None => Access::RW,
    }
}

/// makeDb.py's record names, given out in document order.
#[derive(Default)]
struct RecordNames {
    by_node: HashMap<String, String>,
    /// How many nodes hold each record name (a repeated node name gives up its old one).
    taken: HashMap<String, usize>,
}

impl RecordNames {
    fn add(&mut self, node: &str, prefix: &str) {
        let mut name: Vec<char> = shorten(&format!("{prefix}_{node}")).chars().collect();
        let mut i = 0usize;
        while self.taken.contains_key(&name.iter().collect::<String>()) {
            let digits: Vec<char> = i.to_string().chars().collect();
            name.truncate(name.len().saturating_sub(digits.len()));
            name.extend(digits);
            i += 1;
        }
        let name: String = name.into_iter().collect();
        *self.taken.entry(name.clone()).or_default() += 1;
        if let Some(old) = self.by_node.insert(node.to_string(), name) {
            if let Some(n) = self.taken.get_mut(&old) {
                *n -= 1;
                if *n == 0 {
                    self.taken.remove(&old);
                }
            }
        }
    }

    fn get(&self, node: &str) -> Option<&str> {
        self.by_node.get(node).map(String::as_str)
    }
}

/// makeDb.py's shortening of `GC_Name` to 20 characters, before clashes are resolved.
pub fn shorten(record: &str) -> String {
    if record.chars().count() <= MAX_RECORD_NAME {
        return record.to_string();
    }
    let mut words = words(record);
    let mut out = record.to_string();
    for i in 0..words.len() {
        if words[i].chars().count() > 3 {
            words[i] = words[i].chars().take(3).collect();
            out = words.concat();
            if out.chars().count() <= MAX_RECORD_NAME {
                break;
            }
        }
    }
    out.chars().take(MAX_RECORD_NAME).collect()
}

/// `re.findall('[a-zA-Z][^A-Z]*', s)`: a word starts at a letter and runs to the next capital;
/// anything before the first letter is dropped.
fn words(s: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for c in s.chars() {
        match words.last_mut() {
            Some(w) if !c.is_ascii_uppercase() => w.push(c),
            _ if c.is_ascii_alphabetic() => words.push(c.to_string()),
            _ => {}
        }
    }
    words
}

#[cfg(test)]
mod tests;
