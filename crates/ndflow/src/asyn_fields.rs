//! The fields of an `asyn` record (a port's `AsynIO`), as areaDetector's screens show them:
//! `.CNCT` (the port's connection), `.ENBL`, `.AUCT` (auto-connect), the trace masks `.TMSK`
//! and `.TIOM` with their bit fields `.TB0`…`.TB5` and `.TIB0`…`.TIB2`, and `.TSIZ`.
//!
//! An ndflow port has no asyn port beneath it: it is always connected and enabled, so those
//! read `Connect` and `Enable`. Every field takes a write, as asyn's record does, and shows
//! it back; none of them changes what the port does (ndflow's logging is `LogLevel`'s). The
//! trace bits are views of their mask: writing `.TB1` sets bit 1 of `.TMSK`.

use std::collections::HashMap;

use parking_lot::Mutex;

const CNCT_MENU: [&str; 2] = ["Disconnect", "Connect"];
const ENBL_MENU: [&str; 2] = ["Disable", "Enable"];
const AUCT_MENU: [&str; 2] = ["noAutoConnect", "autoConnect"];
const BIT_MENU: [&str; 2] = ["Off", "On"];

/// A field of an asyn record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsynField {
    Cnct,
    Enbl,
    Auct,
    /// The trace mask (asynTraceMask).
    Tmsk,
    /// The trace I/O mask (asynTraceIOMask).
    Tiom,
    /// Bit n of `.TMSK` (0..=5).
    Tb(u8),
    /// Bit n of `.TIOM` (0..=2).
    Tib(u8),
    /// How many bytes of each I/O a trace shows.
    Tsiz,
}

/// How a field's value travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsynKind {
    Menu(&'static [&'static str]),
    Long,
}

impl AsynField {
    pub fn parse(s: &str) -> Option<AsynField> {
        let bit = |rest: &str, n: u8| rest.parse::<u8>().ok().filter(|b| *b < n);
        Some(match s {
            "CNCT" => AsynField::Cnct,
            "ENBL" => AsynField::Enbl,
            "AUCT" => AsynField::Auct,
            "TMSK" => AsynField::Tmsk,
            "TIOM" => AsynField::Tiom,
            "TSIZ" => AsynField::Tsiz,
            _ => {
                if let Some(r) = s.strip_prefix("TIB") {
                    AsynField::Tib(bit(r, 3)?)
                } else if let Some(r) = s.strip_prefix("TB") {
                    AsynField::Tb(bit(r, 6)?)
                } else {
                    return None;
                }
            }
        })
    }

    pub fn name(self) -> &'static str {
        const TB: [&str; 6] = ["TB0", "TB1", "TB2", "TB3", "TB4", "TB5"];
        const TIB: [&str; 3] = ["TIB0", "TIB1", "TIB2"];
        match self {
            AsynField::Cnct => "CNCT",
            AsynField::Enbl => "ENBL",
            AsynField::Auct => "AUCT",
            AsynField::Tmsk => "TMSK",
            AsynField::Tiom => "TIOM",
            AsynField::Tsiz => "TSIZ",
            AsynField::Tb(n) => TB.get(n as usize).copied().unwrap_or("TB0"),
            AsynField::Tib(n) => TIB.get(n as usize).copied().unwrap_or("TIB0"),
        }
    }

    pub fn kind(self) -> AsynKind {
        match self {
            AsynField::Cnct => AsynKind::Menu(&CNCT_MENU),
            AsynField::Enbl => AsynKind::Menu(&ENBL_MENU),
            AsynField::Auct => AsynKind::Menu(&AUCT_MENU),
            AsynField::Tb(_) | AsynField::Tib(_) => AsynKind::Menu(&BIT_MENU),
            AsynField::Tmsk | AsynField::Tiom | AsynField::Tsiz => AsynKind::Long,
        }
    }
}

/// One asyn record's fields, with asyn's defaults: connected, enabled, auto-connect, errors
/// traced (asynTRACE_ERROR), I/O traced as ASCII (asynTRACEIO_ASCII), 80 bytes.
#[derive(Clone, Copy)]
struct AsynState {
    cnct: i64,
    enbl: i64,
    auct: i64,
    tmsk: i64,
    tiom: i64,
    tsiz: i64,
}

const DEFAULT: AsynState = AsynState {
    cnct: 1,
    enbl: 1,
    auct: 1,
    tmsk: 1,
    tiom: 1,
    tsiz: 80,
};

/// The asyn fields of a directory's asyn records, by entry id (made on the first write).
#[derive(Default)]
pub struct AsynFields {
    written: Mutex<HashMap<usize, AsynState>>,
}

impl AsynFields {
    pub fn get(&self, e: usize, f: AsynField) -> i64 {
        let s = self.written.lock().get(&e).copied().unwrap_or(DEFAULT);
        match f {
            AsynField::Cnct => s.cnct,
            AsynField::Enbl => s.enbl,
            AsynField::Auct => s.auct,
            AsynField::Tmsk => s.tmsk,
            AsynField::Tiom => s.tiom,
            AsynField::Tsiz => s.tsiz,
            AsynField::Tb(n) => (s.tmsk >> n) & 1,
            AsynField::Tib(n) => (s.tiom >> n) & 1,
        }
    }

    /// Stores a write; a menu field takes only its choices' indexes.
    pub fn set(&self, e: usize, f: AsynField, v: i64) -> Result<(), String> {
        if let AsynKind::Menu(m) = f.kind() {
            if !(0..m.len() as i64).contains(&v) {
                return Err(format!(
                    "{v} is not a .{} choice (0: {}, 1: {})",
                    f.name(),
                    m[0],
                    m[1]
                ));
            }
        }
        let long = i32::try_from(v)
            .map(i64::from)
            .map_err(|_| format!("{v} is out of range for .{}", f.name()))?;
        let mut map = self.written.lock();
        let s = map.entry(e).or_insert(DEFAULT);
        let bit = |mask: i64, n: u8| (mask & !(1 << n)) | (v << n);
        match f {
            AsynField::Cnct => s.cnct = v,
            AsynField::Enbl => s.enbl = v,
            AsynField::Auct => s.auct = v,
            AsynField::Tmsk => s.tmsk = long,
            AsynField::Tiom => s.tiom = long,
            AsynField::Tsiz => s.tsiz = long,
            AsynField::Tb(n) => s.tmsk = bit(s.tmsk, n),
            AsynField::Tib(n) => s.tiom = bit(s.tiom, n),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_writes_and_trace_bits() {
        let a = AsynFields::default();
        assert_eq!(a.get(3, AsynField::Cnct), 1);
        assert_eq!(a.get(3, AsynField::Enbl), 1);
        assert_eq!(a.get(3, AsynField::Tb(0)), 1);
        assert_eq!(a.get(3, AsynField::Tb(1)), 0);
        a.set(3, AsynField::Tb(1), 1).unwrap();
        assert_eq!(a.get(3, AsynField::Tmsk), 3);
        a.set(3, AsynField::Tmsk, 0x10).unwrap();
        assert_eq!(a.get(3, AsynField::Tb(4)), 1);
        assert_eq!(a.get(3, AsynField::Tb(0)), 0);
        a.set(3, AsynField::Cnct, 0).unwrap();
        assert_eq!(a.get(3, AsynField::Cnct), 0);
        assert_eq!(a.get(4, AsynField::Cnct), 1, "another record keeps its own");
        let e = a.set(3, AsynField::Enbl, 2).unwrap_err();
        assert!(e.contains("ENBL") && e.contains("Enable"), "{e}");
        assert!(a.set(3, AsynField::Tsiz, 1 << 40).is_err());
    }

    #[test]
    fn names_round_trip() {
        for s in [
            "CNCT", "ENBL", "AUCT", "TMSK", "TIOM", "TSIZ", "TB0", "TB5", "TIB0", "TIB2",
        ] {
            let f = AsynField::parse(s).unwrap();
            assert_eq!(f.name(), s);
        }
        assert_eq!(AsynField::parse("TB6"), None);
        assert_eq!(AsynField::parse("TIB3"), None);
        assert_eq!(AsynField::parse("PROC"), None);
    }
}
