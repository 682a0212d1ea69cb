//! The EPICS record fields with a state of their own that every PV of the directory answers:
//! `.PROC`, `.SCAN`, `.DISA`, `.DISV`, `.UDF`, `.TSE`. (The fields derived from a parameter's
//! declaration and value — `.DESC .EGU .PREC .HOPR .LOPR .DRVH .DRVL .HIHI … .SEVR .STAT .NAME
//! .RTYP .NELM .NORD` — are each protocol's view of the directory.)
//!
//! Their meaning is EPICS': `SCAN` is how an input record updates (`I/O Intr`, the default of
//! every `_RBV`: on change; a period: at most once per period, the last change always
//! following; `Passive`/`Event`: only when processed), `PROC` processes the record (an output
//! applies its value again, an input shows its current value now), and a record whose `DISA`
//! equals its `DISV` (1) is disabled: an input stops updating and a put to an output changes
//! nothing. Outputs post every change whatever their `SCAN`, as output records do when written.
//!
//! The state is one small block of atomics per PV; the decision to post is taken once per post,
//! by the directory, for every protocol (see [`RecordFields::open`]).

use std::sync::atomic::{AtomicBool, AtomicI16, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Instant;

use crate::asyn_fields::{AsynField, AsynFields, AsynKind};
use crate::pvdir::RecordType;

/// EPICS' menuScan, in order.
pub const SCAN_MENU: [&str; 10] = [
    "Passive",
    "Event",
    "I/O Intr",
    "10 second",
    "5 second",
    "2 second",
    "1 second",
    ".5 second",
    ".2 second",
    ".1 second",
];
const SCAN_PASSIVE: u8 = 0;
const SCAN_IO_INTR: u8 = 2;

/// The period of a periodic `SCAN` entry, in milliseconds.
fn period_ms(scan: u8) -> Option<u64> {
    Some(match scan {
        3 => 10_000,
        4 => 5_000,
        5 => 2_000,
        6 => 1_000,
        7 => 500,
        8 => 200,
        9 => 100,
        _ => return None,
    })
}

/// A field with a state of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordField {
    Proc,
    Scan,
    Disa,
    Disv,
    Udf,
    Tse,
    /// Link fields ([`crate::links`]): an input link (a PV name or a constant) and its
    /// mode (supervisory, closed_loop); a raw input link and the raw values of states 0
    /// and 1; an output link and the value it writes.
    Dol,
    Omsl,
    Inp,
    Zrvl,
    Onvl,
    Out,
    Ocal,
    /// A field of an `asyn` record only ([`crate::asyn_fields`]).
    Asyn(AsynField),
}

impl RecordField {
    pub const ALL: [RecordField; 6] = [
        RecordField::Proc,
        RecordField::Scan,
        RecordField::Disa,
        RecordField::Disv,
        RecordField::Udf,
        RecordField::Tse,
    ];

    /// A field of every record, or of an asyn record ([`Self::serves`] tells which).
    pub fn parse(s: &str) -> Option<RecordField> {
        RecordField::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .or(match s {
                "DOL" => Some(RecordField::Dol),
                "OMSL" => Some(RecordField::Omsl),
                "INP" => Some(RecordField::Inp),
                "ZRVL" => Some(RecordField::Zrvl),
                "ONVL" => Some(RecordField::Onvl),
                "OUT" => Some(RecordField::Out),
                "OCAL" => Some(RecordField::Ocal),
                _ => None,
            })
            .or_else(|| AsynField::parse(s).map(RecordField::Asyn))
    }

    /// Whether a record of type `r` has this field (the link fields: only link records,
    /// which [`crate::pvdir::PvDirectory::has_field`] knows).
    pub fn serves(self, r: RecordType) -> bool {
        match self {
            RecordField::Asyn(_) => r == RecordType::Helper("asyn"),
            f if f.is_link() => false,
            _ => true,
        }
    }

    /// The field holding a link of kind `k` (`.DOL`, `.INP`, `.OUT`; `.PROC` for none).
    pub fn link_of(k: ndflow_core::LinkKind) -> RecordField {
        match k {
            ndflow_core::LinkKind::Input => RecordField::Dol,
            ndflow_core::LinkKind::RawInput => RecordField::Inp,
            ndflow_core::LinkKind::Output { .. } => RecordField::Out,
            ndflow_core::LinkKind::None => RecordField::Proc,
        }
    }

    /// One of a link record's fields.
    pub fn is_link(self) -> bool {
        matches!(
            self,
            RecordField::Dol
                | RecordField::Omsl
                | RecordField::Inp
                | RecordField::Zrvl
                | RecordField::Onvl
                | RecordField::Out
                | RecordField::Ocal
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            RecordField::Proc => "PROC",
            RecordField::Scan => "SCAN",
            RecordField::Disa => "DISA",
            RecordField::Disv => "DISV",
            RecordField::Udf => "UDF",
            RecordField::Tse => "TSE",
            RecordField::Dol => "DOL",
            RecordField::Omsl => "OMSL",
            RecordField::Inp => "INP",
            RecordField::Zrvl => "ZRVL",
            RecordField::Onvl => "ONVL",
            RecordField::Out => "OUT",
            RecordField::Ocal => "OCAL",
            RecordField::Asyn(a) => a.name(),
        }
    }

    /// Whether clients may write it (UDF and TSE are shown, not changed).
    pub fn writable(self) -> bool {
        !matches!(self, RecordField::Udf | RecordField::Tse)
    }

    /// How it travels: EPICS' field type (PROC and UDF are DBF_UCHAR, SCAN a menu, DISA, DISV
    /// and TSE DBF_SHORT; an asyn record's as asyn declares them).
    pub fn kind(self) -> FieldKind {
        match self {
            RecordField::Proc | RecordField::Udf => FieldKind::UChar,
            RecordField::Scan => FieldKind::Menu(&SCAN_MENU),
            RecordField::Dol | RecordField::Inp | RecordField::Out | RecordField::Ocal => {
                FieldKind::Text
            }
            RecordField::Zrvl | RecordField::Onvl => FieldKind::Long,
            RecordField::Omsl => FieldKind::Menu(&crate::links::OMSL_MENU),
            RecordField::Asyn(a) => match a.kind() {
                AsynKind::Menu(m) => FieldKind::Menu(m),
                AsynKind::Long => FieldKind::Long,
            },
            _ => FieldKind::Short,
        }
    }
}

/// The type of a [`RecordField`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    UChar,
    Short,
    Long,
    /// A string (DBF_STRING, or a link field's text).
    Text,
    Menu(&'static [&'static str]),
}

/// One PV's fields.
struct EntryFields {
    /// Input records gate their posts by SCAN; outputs post every change.
    input: bool,
    scan: AtomicU8,
    disa: AtomicI16,
    disv: AtomicI16,
    /// Milliseconds since [`RecordFields::start`] of the last post (periodic SCAN).
    last_post: AtomicU64,
    /// A change was held back by a periodic SCAN: post it when the period is over.
    owed: AtomicBool,
    /// Post the next time whatever SCAN says (PROC of an input).
    force: AtomicBool,
    /// What the directory decided for the post under way ([`RecordFields::open`]).
    open: AtomicBool,
}

/// The fields of every PV of a directory, by entry id.
pub struct RecordFields {
    start: Instant,
    entries: Vec<EntryFields>,
    /// How many entries have a periodic SCAN (the publisher then wakes to post what is owed).
    periodic: AtomicUsize,
    asyn: AsynFields,
}

impl RecordFields {
    /// `inputs`: per entry, whether it is an input record (SCAN `I/O Intr`) or an output
    /// (`Passive`), as areaDetector's templates declare them.
    pub fn new(inputs: impl IntoIterator<Item = bool>) -> RecordFields {
        let entries = inputs
            .into_iter()
            .map(|input| EntryFields {
                input,
                scan: AtomicU8::new(if input { SCAN_IO_INTR } else { SCAN_PASSIVE }),
                disa: AtomicI16::new(0),
                disv: AtomicI16::new(1),
                last_post: AtomicU64::new(0),
                owed: AtomicBool::new(false),
                force: AtomicBool::new(false),
                open: AtomicBool::new(true),
            })
            .collect();
        RecordFields {
            start: Instant::now(),
            entries,
            periodic: AtomicUsize::new(0),
            asyn: AsynFields::default(),
        }
    }

    /// The value of field `f` of entry `e` (0 for an unknown entry).
    pub fn get(&self, e: usize, f: RecordField) -> i64 {
        let Some(x) = self.entries.get(e) else {
            return 0;
        };
        match f {
            RecordField::Proc | RecordField::Udf | RecordField::Tse => 0,
            RecordField::Scan => x.scan.load(Ordering::Relaxed) as i64,
            RecordField::Disa => x.disa.load(Ordering::Relaxed) as i64,
            RecordField::Disv => x.disv.load(Ordering::Relaxed) as i64,
            RecordField::Asyn(a) => self.asyn.get(e, a),
            // The directory's ([`crate::links`]).
            _ => 0,
        }
    }

    /// Stores a write of `v` to SCAN, DISA or DISV. PROC is the directory's (it acts).
    pub fn set(&self, e: usize, f: RecordField, v: i64) -> Result<(), String> {
        let x = self.entries.get(e).ok_or("no such PV")?;
        let short =
            || i16::try_from(v).map_err(|_| format!("{v} is out of range for .{}", f.name()));
        match f {
            RecordField::Scan => {
                let idx = u8::try_from(v)
                    .ok()
                    .filter(|i| (*i as usize) < SCAN_MENU.len())
                    .ok_or_else(|| {
                        format!(
                            "{v} is not a SCAN choice (0..{}: {})",
                            SCAN_MENU.len() - 1,
                            SCAN_MENU.join(", ")
                        )
                    })?;
                let was = x.scan.swap(idx, Ordering::AcqRel);
                match (period_ms(was).is_some(), period_ms(idx).is_some()) {
                    (false, true) => {
                        self.periodic.fetch_add(1, Ordering::AcqRel);
                    }
                    (true, false) => {
                        self.periodic.fetch_sub(1, Ordering::AcqRel);
                    }
                    _ => {}
                }
                // Whatever was held back shows under the new SCAN.
                x.force.store(true, Ordering::Release);
            }
            RecordField::Disa => {
                x.disa.store(short()?, Ordering::Release);
                x.force.store(true, Ordering::Release);
            }
            RecordField::Disv => {
                x.disv.store(short()?, Ordering::Release);
                x.force.store(true, Ordering::Release);
            }
            RecordField::Asyn(a) => {
                self.asyn.set(e, a, v)?;
                x.force.store(true, Ordering::Release);
            }
            _ => {
                return Err(format!(".{} cannot be stored", f.name()));
            }
        }
        Ok(())
    }

    /// Whether the record is disabled (DISA = DISV).
    pub fn disabled(&self, e: usize) -> bool {
        self.entries
            .get(e)
            .is_some_and(|x| x.disa.load(Ordering::Acquire) == x.disv.load(Ordering::Acquire))
    }

    /// The next post of `e` goes out whatever its SCAN says (PROC).
    pub fn force(&self, e: usize) {
        if let Some(x) = self.entries.get(e) {
            x.force.store(true, Ordering::Release);
        }
    }

    /// Decides, once per post and for every protocol, whether `e` shows the value being
    /// posted ([`Self::is_open`]).
    pub fn open(&self, e: usize) {
        let Some(x) = self.entries.get(e) else {
            return;
        };
        let now = self.start.elapsed().as_millis() as u64;
        let forced = x.force.swap(false, Ordering::AcqRel);
        let open = if !x.input || forced {
            true
        } else if self.disabled(e) {
            false
        } else {
            let scan = x.scan.load(Ordering::Acquire);
            match period_ms(scan) {
                _ if scan == SCAN_IO_INTR => true,
                Some(p) if now.saturating_sub(x.last_post.load(Ordering::Acquire)) >= p => true,
                Some(_) => {
                    x.owed.store(true, Ordering::Release);
                    false
                }
                None => false,
            }
        };
        if open {
            x.last_post.store(now, Ordering::Release);
            x.owed.store(false, Ordering::Release);
        }
        x.open.store(open, Ordering::Release);
    }

    /// What [`Self::open`] decided for the post under way.
    pub fn is_open(&self, e: usize) -> bool {
        self.entries
            .get(e)
            .is_none_or(|x| x.open.load(Ordering::Acquire))
    }

    /// Whether some entry has a periodic SCAN.
    pub fn any_periodic(&self) -> bool {
        self.periodic.load(Ordering::Acquire) > 0
    }

    /// Entries whose held-back change is due now; each is forced open for its next post.
    pub fn due(&self) -> Vec<usize> {
        let now = self.start.elapsed().as_millis() as u64;
        let mut out = Vec::new();
        for (e, x) in self.entries.iter().enumerate() {
            if !x.owed.load(Ordering::Acquire) {
                continue;
            }
            let p = period_ms(x.scan.load(Ordering::Acquire)).unwrap_or(0);
            if now.saturating_sub(x.last_post.load(Ordering::Acquire)) >= p {
                x.force.store(true, Ordering::Release);
                out.push(e);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_follow_scan_outputs_always_post() {
        let f = RecordFields::new([true, false]);
        assert_eq!(f.get(0, RecordField::Scan), SCAN_IO_INTR as i64);
        assert_eq!(f.get(1, RecordField::Scan), SCAN_PASSIVE as i64);
        f.open(0);
        f.open(1);
        assert!(f.is_open(0) && f.is_open(1));
        // Passive: held back until processed.
        f.set(0, RecordField::Scan, 0).unwrap();
        f.open(0); // the SCAN write itself shows once
        assert!(f.is_open(0));
        f.open(0);
        assert!(!f.is_open(0));
        f.force(0);
        f.open(0);
        assert!(f.is_open(0));
        // An output with SCAN Passive still posts its changes.
        f.open(1);
        assert!(f.is_open(1));
    }

    #[test]
    fn periodic_scan_holds_changes_and_owes_them() {
        let f = RecordFields::new([true]);
        f.set(0, RecordField::Scan, 9).unwrap(); // .1 second
        assert!(f.any_periodic());
        f.open(0);
        assert!(f.is_open(0), "the first post after the write shows");
        f.open(0);
        assert!(!f.is_open(0), "a second change within the period waits");
        assert!(f.due().is_empty());
        std::thread::sleep(std::time::Duration::from_millis(120));
        assert_eq!(f.due(), vec![0]);
        f.open(0);
        assert!(f.is_open(0));
        f.set(0, RecordField::Scan, 2).unwrap();
        assert!(!f.any_periodic());
    }

    #[test]
    fn disabled_inputs_stop_and_bad_writes_are_named() {
        let f = RecordFields::new([true]);
        f.set(0, RecordField::Disa, 1).unwrap();
        assert!(f.disabled(0));
        f.open(0); // the DISA write itself
        f.open(0);
        assert!(!f.is_open(0));
        f.set(0, RecordField::Disv, 5).unwrap();
        assert!(!f.disabled(0));
        let e = f.set(0, RecordField::Scan, 10).unwrap_err();
        assert!(
            e.contains("not a SCAN choice") && e.contains("I/O Intr"),
            "{e}"
        );
        assert!(f.set(0, RecordField::Disa, 70_000).is_err());
        assert!(f.set(0, RecordField::Udf, 1).is_err());
        assert_eq!(RecordField::parse("SCAN"), Some(RecordField::Scan));
        assert_eq!(RecordField::parse("VAL"), None);
    }
}
