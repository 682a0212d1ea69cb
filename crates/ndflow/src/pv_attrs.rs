//! EPICS_PV attributes of NDAttributes files: one Channel Access monitor per PV, whose latest
//! value each frame copies (a frame never waits for the network). The client reads the usual
//! EPICS_CA_* variables; an unreachable PV leaves the attribute undefined and is retried.

use std::sync::Arc;
use std::time::Duration;

use ndflow_ca::{Client, ClientConfig, ClientError, Values};
use ndflow_core::AttrValue;
use ndflow_runtime::{PvCell, PvReader};
use parking_lot::Mutex;

/// How long a failed connection waits before the next try.
const RETRY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct CaPvReader {
    client: Mutex<Option<Arc<Client>>>,
}

impl CaPvReader {
    fn client(&self) -> Option<Arc<Client>> {
        let mut c = self.client.lock();
        if c.is_none() {
            match Client::new(ClientConfig::from_env()) {
                Ok(cl) => *c = Some(Arc::new(cl)),
                Err(e) => tracing::warn!("EPICS_PV attributes: cannot start a CA client: {e}"),
            }
        }
        c.clone()
    }
}

impl PvReader for CaPvReader {
    fn watch(&self, pv: &str, dbrtype: &str) -> PvCell {
        let cell: PvCell = Arc::new(Mutex::new(AttrValue::Undefined));
        let Some(client) = self.client() else {
            return cell;
        };
        let want = Want::parse(dbrtype);
        let (pv, mine) = (pv.to_string(), Arc::clone(&cell));
        let spawned = std::thread::Builder::new()
            .name("ndflow-attr-pv".into())
            .spawn(move || follow(&client, &pv, want, &mine));
        if let Err(e) = spawned {
            tracing::warn!("EPICS_PV attributes: cannot start a monitor thread: {e}");
        }
        cell
    }
}

/// Keeps `cell` current until the attribute list holding it is dropped (the cell's only other
/// owner), reconnecting when the server goes away.
fn follow(client: &Client, pv: &str, want: Want, cell: &PvCell) {
    let mut warned = false;
    while Arc::strong_count(cell) > 1 {
        let sub = match client.monitor(pv) {
            Ok(s) => s,
            Err(e) => {
                if !warned {
                    tracing::warn!("EPICS_PV attribute '{pv}': {e}; retrying");
                    warned = true;
                }
                std::thread::sleep(RETRY);
                continue;
            }
        };
        warned = false;
        while Arc::strong_count(cell) > 1 {
            match sub.recv_timeout(RETRY) {
                Ok(r) => *cell.lock() = want.convert(&r.values),
                Err(ClientError::Timeout) => {}
                Err(_) => {
                    *cell.lock() = AttrValue::Undefined;
                    break;
                }
            }
        }
    }
}

/// The attribute type asked for by `dbrtype` (DBR_NATIVE keeps the PV's own).
#[derive(Clone, Copy)]
enum Want {
    Native,
    Int,
    Double,
    String,
}

impl Want {
    fn parse(dbrtype: &str) -> Want {
        match dbrtype.trim().to_ascii_uppercase().as_str() {
            "DBR_CHAR" | "DBR_SHORT" | "DBR_INT" | "DBR_LONG" | "DBR_ENUM" => Want::Int,
            "DBR_FLOAT" | "DBR_DOUBLE" => Want::Double,
            "DBR_STRING" => Want::String,
            _ => Want::Native,
        }
    }

    fn convert(self, v: &Values) -> AttrValue {
        let num = match v {
            Values::Short(x) => x.first().map(|&a| a as f64),
            Values::Float(x) => x.first().map(|&a| a as f64),
            Values::Enum(x) => x.first().map(|&a| a as f64),
            Values::Char(x) => x.first().map(|&a| a as f64),
            Values::Long(x) => x.first().map(|&a| a as f64),
            Values::Double(x) => x.first().copied(),
            Values::String(x) => x.first().and_then(|s| s.trim().parse().ok()),
        };
        let text = || match v {
            Values::String(x) => x.first().cloned().unwrap_or_default(),
            _ => num.map(|n| n.to_string()).unwrap_or_default(),
        };
        match self {
            Want::String => AttrValue::String(text()),
            Want::Double => num.map_or(AttrValue::Undefined, AttrValue::Float64),
            Want::Int => num.map_or(AttrValue::Undefined, |n| AttrValue::Int32(n as i32)),
            Want::Native => match v {
                Values::String(_) => AttrValue::String(text()),
                Values::Short(x) => x
                    .first()
                    .map_or(AttrValue::Undefined, |&a| AttrValue::Int16(a)),
                Values::Enum(x) => x
                    .first()
                    .map_or(AttrValue::Undefined, |&a| AttrValue::UInt16(a)),
                Values::Char(x) => x
                    .first()
                    .map_or(AttrValue::Undefined, |&a| AttrValue::UInt8(a)),
                Values::Long(x) => x
                    .first()
                    .map_or(AttrValue::Undefined, |&a| AttrValue::Int32(a)),
                Values::Float(x) => x
                    .first()
                    .map_or(AttrValue::Undefined, |&a| AttrValue::Float32(a)),
                Values::Double(x) => x
                    .first()
                    .map_or(AttrValue::Undefined, |&a| AttrValue::Float64(a)),
            },
        }
    }
}
