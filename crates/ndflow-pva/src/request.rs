//! pvRequest: what a client asks of a GET/PUT/MONITOR — which fields, and options such as
//! `queueSize`, `pipeline` and `ackAny` under `record._options`.
//!
//! The request travels as a structure `{ field { a {} b { c {} } } record { _options { k "v" } } }`.
//! [`PvRequest::decode`] reads it (from p4p, pvapy or our own client: options may be strings, as
//! everyone sends them, or plain scalars); [`build`] / [`build_str`] make one. A server applies the
//! field selection as a mask over the full type ([`PvRequest::mask`], as pvxs does) and keeps
//! sending the full type in the INIT reply.

use crate::wire::{BitSet, FieldDesc, ScalarType, Value};

/// Queue size when the request names none (pvxs default).
pub const DEFAULT_QUEUE_SIZE: u32 = 4;

/// A decoded pvRequest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PvRequest {
    /// Selected fields as dotted paths; empty = everything.
    pub fields: Vec<String>,
    /// `record._options` as strings, in the order received.
    pub options: Vec<(String, String)>,
}

impl PvRequest {
    /// Read a request; a missing (null) type or anything unexpected selects everything.
    pub fn decode(desc: Option<&FieldDesc>, value: Option<&Value>) -> PvRequest {
        let mut req = PvRequest::default();
        let (Some(FieldDesc::Structure(m)), Some(Value::Structure(vals))) = (desc, value) else {
            return req;
        };
        for ((name, fd), v) in m.fields.iter().zip(vals) {
            match name.as_str() {
                "field" => collect_fields(fd, v, "", &mut req.fields),
                "record" => {
                    if let Some(opts) = v.field(fd, "_options") {
                        if let Some((_, od)) = fd.find("_options") {
                            collect_options(od, opts, &mut req.options);
                        }
                    }
                }
                _ => {}
            }
        }
        req
    }

    pub fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `record._options.pipeline` is true.
    pub fn pipeline(&self) -> bool {
        self.option("pipeline")
            .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"))
    }

    /// `record._options.block` is true: a PUT answers when the operation it starts has ended
    /// (p4p `put(wait=True)`, pvxs `.put().set(...).exec()` with `record[block=true]`).
    pub fn block(&self) -> bool {
        self.option("block")
            .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"))
    }

    /// `queueSize`, at least 1 (2 when pipelining, as pvxs requires); default 4.
    pub fn queue_size(&self) -> u32 {
        let q = self
            .option("queueSize")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .map(|v| v.clamp(1, 1 << 20) as u32)
            .unwrap_or(DEFAULT_QUEUE_SIZE);
        if self.pipeline() {
            q.max(2)
        } else {
            q
        }
    }

    /// `ackAny` as a count of updates for `queue_size`: an integer, or "N%" of the queue; default
    /// half the queue. Always in 1..=queue_size.
    pub fn ack_any(&self, queue_size: u32) -> u32 {
        let q = queue_size.max(1);
        let n = match self.option("ackAny").map(str::trim) {
            Some(v) if v.ends_with('%') => v[..v.len() - 1]
                .trim()
                .parse::<f64>()
                .ok()
                .map(|p| (f64::from(q) * p / 100.0).ceil() as i64),
            Some(v) => v.parse::<i64>().ok(),
            None => None,
        };
        n.unwrap_or(i64::from(q / 2)).clamp(1, i64::from(q)) as u32
    }

    /// The bits of `desc` the selection covers (each selected field and all it contains);
    /// `Ok(None)` = everything. `Err` names a request that selects no existing field (pvxs
    /// refuses those too). Unknown paths among known ones are ignored.
    pub fn mask(&self, desc: &FieldDesc) -> Result<Option<BitSet>, String> {
        if self.fields.is_empty() {
            return Ok(None);
        }
        let mut mask = BitSet::new();
        let mut any = false;
        for path in &self.fields {
            if let Some((bit, fd)) = desc.find(path) {
                any = true;
                for b in bit..bit + fd.bit_count() {
                    mask.set(b);
                }
            }
        }
        if !any {
            return Err(format!(
                "pvRequest selects no existing field ({})",
                self.fields.join(",")
            ));
        }
        if mask.get(0) {
            return Ok(None);
        }
        Ok(Some(mask))
    }
}

/// Walk `field { ... }`: an empty sub-structure selects that path; `_options` members are
/// per-field options, not fields.
fn collect_fields(desc: &FieldDesc, v: &Value, prefix: &str, out: &mut Vec<String>) {
    let (FieldDesc::Structure(m), Value::Structure(vals)) = (desc, v) else {
        return;
    };
    for ((name, fd), fv) in m.fields.iter().zip(vals) {
        if name == "_options" || name.is_empty() {
            continue;
        }
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let is_leaf = match fd {
            FieldDesc::Structure(sm) => sm.fields.iter().all(|(n, _)| n == "_options"),
            _ => true,
        };
        if is_leaf {
            out.push(path);
        } else {
            collect_fields(fd, fv, &path, out);
        }
    }
}

fn collect_options(desc: &FieldDesc, v: &Value, out: &mut Vec<(String, String)>) {
    let (FieldDesc::Structure(m), Value::Structure(vals)) = (desc, v) else {
        return;
    };
    for ((name, _), fv) in m.fields.iter().zip(vals) {
        let s = match fv {
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            other => match other.as_f64() {
                Some(x) if x.fract() == 0.0 => format!("{}", x as i64),
                Some(x) => x.to_string(),
                None => continue,
            },
        };
        out.push((name.clone(), s));
    }
}

/// Parse a pvRequest string as pvget/p4p accept it: `field(a,b.c)` and `record[k=v,...]` in any
/// order; a bare `a,b.c` is a field list. Returns (fields, options).
#[allow(clippy::type_complexity)]
pub fn parse_str(s: &str) -> Result<(Vec<String>, Vec<(String, String)>), String> {
    let mut fields = Vec::new();
    let mut options = Vec::new();
    let mut rest = s.trim();
    if !rest.is_empty() && !rest.starts_with("field(") && !rest.starts_with("record[") {
        fields.extend(split_list(rest));
        return Ok((fields, options));
    }
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("field(") {
            let end = r.find(')').ok_or("unterminated field(")?;
            fields.extend(split_list(&r[..end]));
            rest = r[end + 1..].trim_start();
        } else if let Some(r) = rest.strip_prefix("record[") {
            let end = r.find(']').ok_or("unterminated record[")?;
            for kv in split_list(&r[..end]) {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("option without '=': {kv}"))?;
                options.push((k.trim().to_owned(), v.trim().to_owned()));
            }
            rest = r[end + 1..].trim_start();
        } else {
            return Err(format!("cannot parse pvRequest at {rest:?}"));
        }
    }
    Ok((fields, options))
}

fn split_list(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_owned)
}

/// Build a pvRequest: `fields` is a field list (`"value,alarm.severity"`, `"field(value)"` or
/// `""` for everything); options go under `record._options` as strings.
pub fn build(fields: &str, options: &[(&str, &str)]) -> (FieldDesc, Value) {
    let fields = fields.trim();
    let inner = fields
        .strip_prefix("field(")
        .and_then(|f| f.strip_suffix(')'))
        .unwrap_or(fields);
    let list: Vec<String> = split_list(inner).collect();
    let opts: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    build_parts(&list, &opts)
}

/// Build from a pvRequest string (see [`parse_str`]).
pub fn build_str(s: &str) -> Result<(FieldDesc, Value), String> {
    let (f, o) = parse_str(s)?;
    Ok(build_parts(&f, &o))
}

/// A tree of requested paths, kept in first-seen order.
#[derive(Default)]
struct Node(Vec<(String, Node)>);

impl Node {
    fn insert(&mut self, path: &str) {
        let (head, tail) = match path.split_once('.') {
            Some((h, t)) => (h, Some(t)),
            None => (path, None),
        };
        if head.is_empty() {
            return;
        }
        let i = match self.0.iter().position(|(n, _)| n == head) {
            Some(i) => i,
            None => {
                self.0.push((head.to_owned(), Node::default()));
                self.0.len() - 1
            }
        };
        if let Some(t) = tail {
            self.0[i].1.insert(t);
        }
    }

    fn to_desc(&self) -> (FieldDesc, Value) {
        let mut fds = Vec::new();
        let mut vals = Vec::new();
        for (name, child) in &self.0 {
            let (d, v) = child.to_desc();
            fds.push((name.as_str(), d));
            vals.push(v);
        }
        (FieldDesc::structure("", fds), Value::Structure(vals))
    }
}

fn build_parts(fields: &[String], options: &[(String, String)]) -> (FieldDesc, Value) {
    let mut root = Node::default();
    for f in fields {
        root.insert(f);
    }
    let (fd, fv) = root.to_desc();
    let mut top = vec![("field", fd)];
    let mut vals = vec![fv];
    if !options.is_empty() {
        let od = FieldDesc::structure(
            "",
            options
                .iter()
                .map(|(k, _)| (k.as_str(), FieldDesc::Scalar(ScalarType::String)))
                .collect(),
        );
        let ov = Value::Structure(
            options
                .iter()
                .map(|(_, v)| Value::String(v.clone()))
                .collect(),
        );
        top.push(("record", FieldDesc::structure("", vec![("_options", od)])));
        vals.push(Value::Structure(vec![ov]));
    }
    (FieldDesc::structure("", top), Value::Structure(vals))
}

/// Restrict `changed` to `mask` over `desc`: a set structure bit is expanded to the selected
/// fields below it, and a structure whose every field ends up selected is sent as that one bit.
/// `mask` `None` = everything (returned as is).
pub fn apply_mask(desc: &FieldDesc, changed: &BitSet, mask: Option<&BitSet>) -> BitSet {
    let Some(mask) = mask else {
        return changed.clone();
    };
    let mut out = BitSet::new();
    select(desc, changed, mask, 0, false, &mut out);
    out
}

/// Returns true when the whole field at `off` ended up selected (so a parent can fold it).
fn select(
    desc: &FieldDesc,
    changed: &BitSet,
    mask: &BitSet,
    off: usize,
    parent_set: bool,
    out: &mut BitSet,
) -> bool {
    let set = parent_set || changed.get(off);
    match desc {
        FieldDesc::Structure(m) => {
            let n = desc.bit_count();
            if !set && !changed.any_in(off, off + n) {
                return false;
            }
            if mask.get(off) && set {
                out.set(off);
                return true;
            }
            let mut all = true;
            let mut child = off + 1;
            let mut marks = Vec::new();
            for (_, f) in &m.fields {
                let whole = select(f, changed, mask, child, set, out);
                all &= whole;
                marks.push(child);
                child += f.bit_count();
            }
            if all && !m.fields.is_empty() {
                // Fold: the parent bit alone says the same.
                for b in marks {
                    out.clear(b);
                }
                out.set(off);
                return true;
            }
            false
        }
        _ => {
            if set && mask.get(off) {
                out.set(off);
                true
            } else {
                false
            }
        }
    }
}
