//! The web server's view of the IOC: reads parameters through the PV directory (by PV name,
//! as a Channel Access or pvAccess client would) and writes through its put path, so a
//! browser's put is validated, access-checked (`[[access]]`, as user `web` from the browser's
//! address) and put-logged exactly like a CA or pva put.

use std::sync::Arc;
use std::time::Duration;

use ndflow_core::{ParamKind, ParamValue};
use serde_json::{json, Map, Value};

use crate::pvdir::{menu_position, ClientInfo, Face, PvDirectory};

/// One port as the page sees it.
pub struct WebPort {
    pub name: String,
    /// The config's type (`sim`, `roi`, `stats`, `web`, …).
    pub type_name: String,
    /// IOC prefix and port prefix: the start of its PV names.
    pub prefix: String,
    pub driver: bool,
}

pub struct DirBackend {
    pub dir: Arc<PvDirectory>,
    pub ports: Vec<WebPort>,
}

/// The pipeline page's counters, by parameter name (read from `Name_RBV`, else `Name`).
const PIPELINE: &[&str] = &[
    "ArrayCounter",
    "ArrayRate",
    "ArraysProcessed",
    "QueueSize",
    "QueueFree",
    "ExecutionTime",
    "DroppedArrays",
    "DroppedQueueFull",
    "DroppedMinTime",
    "DroppedUnsupported",
    "DroppedDisabled",
    "DroppedErrors",
    "NDArrayPort",
    "DetectorState",
];

impl DirBackend {
    /// The value of PV `name` as JSON: numbers, strings, an enum as its menu string.
    fn value(&self, name: &str) -> Value {
        let Some((entry, slot)) = self.dir.find(name).and_then(|e| {
            let s = self.dir.slot_of(e)?;
            Some((self.dir.entry(e)?, s))
        }) else {
            return Value::Null;
        };
        let v = slot.value();
        if let ParamKind::Enum(_) = slot.def.kind {
            let i = menu_position(slot.def, &v);
            let choices = slot.def.choices(entry.face == Face::Readback);
            if let Some(c) = choices.and_then(|c| c.get(i as usize)) {
                return json!(c);
            }
        }
        match v {
            ParamValue::Int(i) => json!(i),
            ParamValue::Float(f) if f.is_finite() => json!(f),
            ParamValue::Float(_) => Value::Null,
            ParamValue::Str(s) => json!(s),
            ParamValue::Array(_) => Value::Null,
        }
    }

    /// `Name_RBV` of a port, else `Name`.
    fn port_value(&self, prefix: &str, name: &str) -> Value {
        match self.value(&format!("{prefix}{name}_RBV")) {
            Value::Null => self.value(&format!("{prefix}{name}")),
            v => v,
        }
    }
}

/// A JSON value as a parameter value: numbers, strings (menu strings), booleans as 0/1.
fn to_param(v: &Value) -> Result<ParamValue, String> {
    match v {
        Value::Bool(b) => Ok(ParamValue::Int(*b as i64)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(ParamValue::Int(i)),
            None => n
                .as_f64()
                .map(ParamValue::Float)
                .ok_or_else(|| format!("value {n} is not a number ndflow can hold")),
        },
        Value::String(s) => Ok(ParamValue::Str(s.clone())),
        other => Err(format!(
            "value {other} must be a number, a string or a boolean"
        )),
    }
}

impl ndflow_web::Backend for DirBackend {
    fn ports(&self) -> Value {
        Value::Array(
            self.ports
                .iter()
                .map(|p| {
                    json!({"name": p.name, "type": p.type_name, "prefix": p.prefix,
                           "driver": p.driver})
                })
                .collect(),
        )
    }

    fn values(&self, names: &[&str]) -> Value {
        let mut m = Map::new();
        for n in names {
            m.insert(n.to_string(), self.value(n));
        }
        Value::Object(m)
    }

    fn pipeline(&self) -> Value {
        Value::Array(
            self.ports
                .iter()
                .map(|p| {
                    let mut m = Map::new();
                    m.insert("name".into(), json!(p.name));
                    m.insert("type".into(), json!(p.type_name));
                    for k in PIPELINE {
                        let v = self.port_value(&p.prefix, k);
                        if !v.is_null() {
                            m.insert(k.to_string(), v);
                        }
                    }
                    Value::Object(m)
                })
                .collect(),
        )
    }

    fn put(&self, pv: &str, value: &Value, host: &str) -> Result<(), String> {
        let entry = self
            .dir
            .find(pv)
            .ok_or_else(|| format!("no PV '{pv}' on this IOC"))?;
        let value = to_param(value).map_err(|e| format!("{pv}: {e}"))?;
        let client = ClientInfo {
            host: host.to_string(),
            user: "web".into(),
            protocol: "web",
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.dir.put(
            entry,
            value,
            Some(&client),
            false,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| format!("{pv}: the put did not finish within 10 s"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_become_parameter_values_or_a_clear_error() {
        assert_eq!(to_param(&json!(3)).unwrap(), ParamValue::Int(3));
        assert_eq!(to_param(&json!(0.5)).unwrap(), ParamValue::Float(0.5));
        assert_eq!(to_param(&json!(true)).unwrap(), ParamValue::Int(1));
        assert_eq!(
            to_param(&json!("Continuous")).unwrap(),
            ParamValue::Str("Continuous".into())
        );
        assert!(to_param(&json!([1])).unwrap_err().contains("[1]"));
    }
}
