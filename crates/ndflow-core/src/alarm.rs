//! Alarms declared with a parameter, as areaDetector's templates declare them on records: the
//! severity of each menu entry of a bi/mbbi (`ZSV`/`OSV`, `ZRSV`…: NDFile's `WriteStatus` is
//! MAJOR on "Write error"), level alarms whose limits follow another parameter (NDPluginBase's
//! `QueueFree` LOW at a quarter of `QueueSize`, set there by a calcout record), and ndflow's
//! own "any loss is worth a look" (`DroppedArrays` non-zero).
//!
//! An alarm is a pure function of the value and the port's other parameters: nothing to keep
//! in step, and every protocol (CA `.SEVR`/`.STAT` and DBR_STS, pvAccess `alarm`) computes the
//! same answer from the same declaration.

/// EPICS alarm severity (menuAlarmSevr); the order is the order of gravity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Severity {
    #[default]
    NoAlarm = 0,
    Minor = 1,
    Major = 2,
    Invalid = 3,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::NoAlarm => "NO_ALARM",
            Severity::Minor => "MINOR",
            Severity::Major => "MAJOR",
            Severity::Invalid => "INVALID",
        }
    }
}

/// Why a record alarms: the EPICS alarm status (menuAlarmStat) it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AlarmStatus {
    #[default]
    NoAlarm = 0,
    Hihi = 3,
    High = 4,
    Lolo = 5,
    Low = 6,
    State = 7,
    /// A link record's input link cannot be read (its PV is not found or went away).
    Link = 14,
}

impl AlarmStatus {
    pub fn name(self) -> &'static str {
        match self {
            AlarmStatus::NoAlarm => "NO_ALARM",
            AlarmStatus::Hihi => "HIHI",
            AlarmStatus::High => "HIGH",
            AlarmStatus::Lolo => "LOLO",
            AlarmStatus::Low => "LOW",
            AlarmStatus::State => "STATE",
            AlarmStatus::Link => "LINK",
        }
    }
}

/// One record's alarm: severity and status (both `NoAlarm` when all is well).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Alarm {
    pub severity: Severity,
    pub status: AlarmStatus,
}

impl Alarm {
    pub const NONE: Alarm = Alarm {
        severity: Severity::NoAlarm,
        status: AlarmStatus::NoAlarm,
    };
    fn new(severity: Severity, status: AlarmStatus) -> Alarm {
        if severity == Severity::NoAlarm {
            return Alarm::NONE;
        }
        Alarm { severity, status }
    }
}

/// Level limits as fractions of another parameter's value (the calcout records of
/// NDPluginBase.template: `QueueFree.LOW` = 0.25 × `QueueSize`). A limit is checked only while
/// that value is positive (a `PoolMaxMem` of 0 means "no cap", not "always full").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Levels {
    pub of: &'static str,
    /// At or above `hihi × of`: MAJOR (HIHI).
    pub hihi: Option<f64>,
    /// At or above `high × of`: MINOR (HIGH).
    pub high: Option<f64>,
    /// At or below `low × of`: MINOR (LOW).
    pub low: Option<f64>,
    /// At or below `lolo × of`: MAJOR (LOLO).
    pub lolo: Option<f64>,
}

impl Levels {
    /// The limits (hihi, high, low, lolo) while the reference parameter holds `full`; `None`
    /// where a level is not declared or the reference is not positive (no limit then).
    pub fn limits(&self, full: f64) -> [Option<f64>; 4] {
        let at = |f: Option<f64>| f.filter(|_| full > 0.0).map(|f| f * full);
        [at(self.hihi), at(self.high), at(self.low), at(self.lolo)]
    }
}

/// What makes a parameter's records alarm.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum AlarmRule {
    #[default]
    None,
    /// The severity of each menu position (status STATE). `outputs`: the setpoint record has
    /// them too (NDArrayBase's `ArrayCallbacks` bo), not only the readback.
    States {
        severities: &'static [Severity],
        outputs: bool,
    },
    /// Level alarms against another parameter of the port.
    Levels(Levels),
    /// Any non-zero value (a count of lost frames) is this severity (status HIGH).
    NonZero(Severity),
}

impl AlarmRule {
    /// The alarm of a record showing `value` (a number; enums their menu position).
    /// `output`: the record is the setpoint of a writable parameter. `other` reads another
    /// parameter of the same port by name.
    pub fn evaluate(
        &self,
        value: Option<f64>,
        output: bool,
        other: impl Fn(&str) -> Option<f64>,
    ) -> Alarm {
        let Some(x) = value else {
            return Alarm::NONE;
        };
        match *self {
            AlarmRule::None => Alarm::NONE,
            AlarmRule::States { outputs, .. } if output && !outputs => Alarm::NONE,
            AlarmRule::States { severities, .. } => {
                let sev = usize::try_from(x as i64)
                    .ok()
                    .and_then(|i| severities.get(i))
                    .copied()
                    .unwrap_or_default();
                Alarm::new(sev, AlarmStatus::State)
            }
            AlarmRule::Levels(_) | AlarmRule::NonZero(_) if output => Alarm::NONE,
            AlarmRule::Levels(l) => {
                let [hihi, high, low, lolo] = l.limits(other(l.of).unwrap_or(0.0));
                if hihi.is_some_and(|h| x >= h) {
                    Alarm::new(Severity::Major, AlarmStatus::Hihi)
                } else if lolo.is_some_and(|h| x <= h) {
                    Alarm::new(Severity::Major, AlarmStatus::Lolo)
                } else if high.is_some_and(|h| x >= h) {
                    Alarm::new(Severity::Minor, AlarmStatus::High)
                } else if low.is_some_and(|h| x <= h) {
                    Alarm::new(Severity::Minor, AlarmStatus::Low)
                } else {
                    Alarm::NONE
                }
            }
            AlarmRule::NonZero(sev) if x != 0.0 => Alarm::new(sev, AlarmStatus::High),
            AlarmRule::NonZero(_) => Alarm::NONE,
        }
    }
}

/// Shorthands for declarations: `NO`, `MINOR`, `MAJOR`, `INVALID`.
pub mod sev {
    use super::Severity;
    pub const NO: Severity = Severity::NoAlarm;
    pub const MINOR: Severity = Severity::Minor;
    pub const MAJOR: Severity = Severity::Major;
    pub const INVALID: Severity = Severity::Invalid;
}

#[cfg(test)]
mod tests {
    use super::sev::*;
    use super::*;

    const QUEUE_FREE: AlarmRule = AlarmRule::Levels(Levels {
        of: "QueueSize",
        hihi: None,
        high: None,
        low: Some(0.25),
        lolo: Some(0.0),
    });

    fn queue(size: f64) -> impl Fn(&str) -> Option<f64> {
        move |n| (n == "QueueSize").then_some(size)
    }

    #[test]
    fn states_follow_the_menu_position() {
        let write_status = AlarmRule::States {
            severities: &[NO, MAJOR],
            outputs: false,
        };
        let none = |_: &str| None;
        assert_eq!(write_status.evaluate(Some(0.0), false, none), Alarm::NONE);
        let bad = write_status.evaluate(Some(1.0), false, none);
        assert_eq!((bad.severity, bad.status), (MAJOR, AlarmStatus::State));
        // A position past the declared list, and the setpoint of an input-only rule: none.
        assert_eq!(write_status.evaluate(Some(7.0), false, none), Alarm::NONE);
        assert_eq!(write_status.evaluate(Some(1.0), true, none), Alarm::NONE);
        let both = AlarmRule::States {
            severities: &[NO, MINOR],
            outputs: true,
        };
        assert_eq!(both.evaluate(Some(1.0), true, none).severity, MINOR);
    }

    #[test]
    fn levels_follow_the_other_parameter() {
        // QueueSize 20: LOW at 5 free, LOLO at 0.
        assert_eq!(
            QUEUE_FREE.evaluate(Some(20.0), false, queue(20.0)),
            Alarm::NONE
        );
        assert_eq!(
            QUEUE_FREE.evaluate(Some(6.0), false, queue(20.0)),
            Alarm::NONE
        );
        let low = QUEUE_FREE.evaluate(Some(5.0), false, queue(20.0));
        assert_eq!((low.severity, low.status), (MINOR, AlarmStatus::Low));
        let empty = QUEUE_FREE.evaluate(Some(0.0), false, queue(20.0));
        assert_eq!((empty.severity, empty.status), (MAJOR, AlarmStatus::Lolo));
        // The limits move with QueueSize; an unknown or zero reference disables them.
        assert_eq!(
            QUEUE_FREE.evaluate(Some(5.0), false, queue(10.0)),
            Alarm::NONE
        );
        assert_eq!(
            QUEUE_FREE.evaluate(Some(0.0), false, queue(0.0)),
            Alarm::NONE
        );
        assert_eq!(QUEUE_FREE.evaluate(Some(0.0), false, |_| None), Alarm::NONE);
        let used = AlarmRule::Levels(Levels {
            of: "QueueSize",
            hihi: Some(1.0),
            high: Some(0.75),
            low: None,
            lolo: None,
        });
        assert_eq!(
            used.evaluate(Some(15.0), false, queue(20.0)).status,
            AlarmStatus::High
        );
        assert_eq!(
            used.evaluate(Some(20.0), false, queue(20.0)).status,
            AlarmStatus::Hihi
        );
        assert_eq!(used.evaluate(Some(14.0), false, queue(20.0)), Alarm::NONE);
    }

    #[test]
    fn non_zero_counts_alarm() {
        let dropped = AlarmRule::NonZero(MINOR);
        assert_eq!(dropped.evaluate(Some(0.0), false, |_| None), Alarm::NONE);
        assert_eq!(dropped.evaluate(Some(3.0), false, |_| None).severity, MINOR);
        assert_eq!(dropped.evaluate(Some(3.0), true, |_| None), Alarm::NONE);
        assert_eq!(dropped.evaluate(None, false, |_| None), Alarm::NONE);
    }
}
