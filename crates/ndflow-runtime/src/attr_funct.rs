//! `type="FUNCT"` attributes: areaDetector calls a compiled C function named by `source` with
//! the `param` string; ndflow has a fixed set of built-in functions instead ([`FUNCTIONS`]),
//! chosen by `source` (case-insensitive). An attribute naming any other function (a site's
//! `myAttrFunct1`) is skipped with one warning that names the entry and the function; the rest
//! of the file loads.
//!
//! `expression` takes `param` as a small arithmetic expression: numbers, attribute names,
//! `+ - * /`, unary minus and parentheses (`(Gain * 2 + Offset) / 3`). Names are those of
//! attributes already on the frame when this one is attached (the driver's own, or earlier
//! entries of the same file); a missing or non-numeric one leaves the value undefined. A name
//! that starts with a digit or has characters other than letters, digits, `_`, `.` and `:` is
//! written in double quotes (`"13SIM1:Temp" * 2`).

use std::time::{SystemTime, UNIX_EPOCH};

use ndflow_core::{AttrValue, NDArray};

use crate::attr_file::Want;

/// The built-in functions: `source` name and what it gives (`param` is the entry's `param`).
pub const FUNCTIONS: &[(&str, &str)] = &[
    (
        "wallTime",
        "the time the frame is stamped, UTC, ISO 8601 with milliseconds (STRING)",
    ),
    (
        "epochSeconds",
        "seconds since 1970-01-01 UTC when the frame is stamped (DOUBLE)",
    ),
    ("hostName", "this computer's host name (STRING)"),
    ("processId", "the IOC's process id (INT)"),
    ("uniqueId", "the frame's uniqueId, its frame counter (INT)"),
    (
        "constant",
        "`param` itself: a number when it reads as one, else text",
    ),
    (
        "expression",
        "`param` evaluated: + - * / and parentheses over numbers and attribute names (DOUBLE)",
    ),
];

/// One FUNCT entry, ready to evaluate.
#[derive(Debug, Clone)]
pub(crate) enum Funct {
    WallTime,
    EpochSeconds,
    HostName(String),
    ProcessId,
    UniqueId,
    Constant(AttrValue),
    Expression(Expr),
}

/// Why a FUNCT entry was not loaded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FunctError {
    /// Not one of [`FUNCTIONS`]: skipped with a warning.
    Unknown,
    /// The function is known but its `param` is wrong (an expression's syntax): refuses the file.
    Bad(String),
}

impl Funct {
    /// The function `source` with argument `param`.
    pub(crate) fn parse(source: &str, param: &str) -> Result<Funct, FunctError> {
        Ok(match source.trim().to_ascii_lowercase().as_str() {
            "walltime" => Funct::WallTime,
            "epochseconds" => Funct::EpochSeconds,
            "hostname" => Funct::HostName(host_name()),
            "processid" => Funct::ProcessId,
            "uniqueid" => Funct::UniqueId,
            "constant" => Funct::Constant(number_or_text(param)),
            "expression" => Funct::Expression(
                Expr::parse(param)
                    .map_err(|e| FunctError::Bad(format!("expression '{param}': {e}")))?,
            ),
            _ => return Err(FunctError::Unknown),
        })
    }

    /// The value for `frame`, converted to `want` (the entry's `datatype`).
    pub(crate) fn value(&self, frame: &NDArray, want: Want) -> AttrValue {
        let v = match self {
            Funct::WallTime => AttrValue::String(iso_utc(SystemTime::now())),
            Funct::EpochSeconds => AttrValue::Float64(epoch_seconds(SystemTime::now())),
            Funct::HostName(h) => AttrValue::String(h.clone()),
            Funct::ProcessId => {
                AttrValue::Int32(i32::try_from(std::process::id()).unwrap_or(i32::MAX))
            }
            Funct::UniqueId => AttrValue::Int32(frame.unique_id),
            Funct::Constant(v) => v.clone(),
            Funct::Expression(e) => e
                .eval(&|name| {
                    frame
                        .attributes
                        .iter()
                        .find(|a| a.name == name)
                        .and_then(|a| a.value.as_f64())
                })
                .map_or(AttrValue::Undefined, AttrValue::Float64),
        };
        convert(v, want)
    }
}

/// `datatype` applied to a function's natural value: INT truncates a number (text that does
/// not read as one is undefined), DOUBLE widens, STRING prints.
fn convert(v: AttrValue, want: Want) -> AttrValue {
    match (want, &v) {
        (Want::Native, _) | (_, AttrValue::Undefined) => v,
        (Want::String, AttrValue::String(_)) => v,
        (Want::String, _) => AttrValue::String(match v.as_f64() {
            Some(f) if v.data_type() == Some(ndflow_core::DataType::Float64) => f.to_string(),
            Some(f) => format!("{}", f as i64),
            None => String::new(),
        }),
        (Want::Int, AttrValue::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(to_i32)
            .map_or(AttrValue::Undefined, AttrValue::Int32),
        (Want::Int, _) => v
            .as_f64()
            .and_then(to_i32)
            .map_or(AttrValue::Undefined, AttrValue::Int32),
        (Want::Double, AttrValue::String(s)) => s
            .trim()
            .parse::<f64>()
            .map_or(AttrValue::Undefined, AttrValue::Float64),
        (Want::Double, _) => v.as_f64().map_or(AttrValue::Undefined, AttrValue::Float64),
    }
}

fn to_i32(f: f64) -> Option<i32> {
    let t = f.trunc();
    (t.is_finite() && t >= i32::MIN as f64 && t <= i32::MAX as f64).then_some(t as i32)
}

fn number_or_text(s: &str) -> AttrValue {
    let t = s.trim();
    if let Ok(i) = t.parse::<i32>() {
        AttrValue::Int32(i)
    } else if let Ok(f) = t.parse::<f64>() {
        AttrValue::Float64(f)
    } else {
        AttrValue::String(s.to_string())
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_default()
}

fn epoch_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `2026-11-27T08:30:00.123Z`.
fn iso_utc(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, dd) = ndflow_core::calendar::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// A parsed `expression`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Num(f64),
    Name(String),
    Neg(Box<Expr>),
    Bin(Box<Expr>, char, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Op(char),
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':')
}

fn tokens(s: &str) -> Result<Vec<(usize, Tok)>, String> {
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&(at, c)) = chars.get(i) {
        if c.is_whitespace() {
            i += 1;
        } else if matches!(c, '+' | '-' | '*' | '/' | '(' | ')') {
            out.push((at, Tok::Op(c)));
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|&(_, c)| c.is_ascii_digit() || c == '.')
            {
                i += 1;
            }
            // An exponent: 1e-3, 2E5.
            if chars.get(i).is_some_and(|&(_, c)| c == 'e' || c == 'E') {
                let mut j = i + 1;
                if chars.get(j).is_some_and(|&(_, c)| c == '+' || c == '-') {
                    j += 1;
                }
                if chars.get(j).is_some_and(|&(_, c)| c.is_ascii_digit()) {
                    i = j;
                    while chars.get(i).is_some_and(|&(_, c)| c.is_ascii_digit()) {
                        i += 1;
                    }
                }
            }
            let end = chars.get(i).map_or(s.len(), |&(p, _)| p);
            let text = &s[at..end];
            let v = text
                .parse::<f64>()
                .map_err(|_| format!("'{text}' at {} is not a number", start + 1))?;
            out.push((at, Tok::Num(v)));
        } else if c == '"' {
            let close = s[at + 1..]
                .find('"')
                .ok_or_else(|| format!("unterminated quoted name at {}", at + 1))?;
            out.push((at, Tok::Name(s[at + 1..at + 1 + close].to_string())));
            let end = at + 1 + close + 1;
            while chars.get(i).is_some_and(|&(p, _)| p < end) {
                i += 1;
            }
        } else if is_name_char(c) {
            let start = at;
            while chars.get(i).is_some_and(|&(_, c)| is_name_char(c)) {
                i += 1;
            }
            let end = chars.get(i).map_or(s.len(), |&(p, _)| p);
            out.push((at, Tok::Name(s[start..end].to_string())));
        } else {
            return Err(format!("unexpected '{c}' at {}", at + 1));
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
    len: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(_, t)| t)
    }
    fn pos(&self) -> usize {
        self.toks.get(self.at).map_or(self.len, |(p, _)| *p) + 1
    }
    fn sum(&mut self) -> Result<Expr, String> {
        let mut left = self.product()?;
        while let Some(Tok::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.at += 1;
            left = Expr::Bin(Box::new(left), op, Box::new(self.product()?));
        }
        Ok(left)
    }
    fn product(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while let Some(Tok::Op(op @ ('*' | '/'))) = self.peek().cloned() {
            self.at += 1;
            left = Expr::Bin(Box::new(left), op, Box::new(self.unary()?));
        }
        Ok(left)
    }
    fn unary(&mut self) -> Result<Expr, String> {
        match self.peek() {
            Some(Tok::Op('-')) => {
                self.at += 1;
                Ok(Expr::Neg(Box::new(self.unary()?)))
            }
            Some(Tok::Op('+')) => {
                self.at += 1;
                self.unary()
            }
            _ => self.atom(),
        }
    }
    fn atom(&mut self) -> Result<Expr, String> {
        let pos = self.pos();
        match self.peek().cloned() {
            Some(Tok::Num(v)) => {
                self.at += 1;
                Ok(Expr::Num(v))
            }
            Some(Tok::Name(n)) => {
                self.at += 1;
                Ok(Expr::Name(n))
            }
            Some(Tok::Op('(')) => {
                self.at += 1;
                let e = self.sum()?;
                if self.peek() != Some(&Tok::Op(')')) {
                    return Err(format!("missing ')' at {}", self.pos()));
                }
                self.at += 1;
                Ok(e)
            }
            Some(Tok::Op(c)) => Err(format!("unexpected '{c}' at {pos}")),
            None => Err("unexpected end".into()),
        }
    }
}

impl Expr {
    /// Parses `s`; the error says what and where (1-based character position).
    pub(crate) fn parse(s: &str) -> Result<Expr, String> {
        let toks = tokens(s)?;
        if toks.is_empty() {
            return Err("empty".into());
        }
        let mut p = Parser {
            toks,
            at: 0,
            len: s.len(),
        };
        let e = p.sum()?;
        if p.at < p.toks.len() {
            let what = match p.peek() {
                Some(Tok::Op(c)) => format!("'{c}'"),
                Some(Tok::Name(n)) => format!("'{n}'"),
                Some(Tok::Num(v)) => format!("'{v}'"),
                None => String::new(),
            };
            return Err(format!("unexpected {what} at {}", p.pos()));
        }
        Ok(e)
    }

    /// The value, `None` when a name has no numeric value (division by zero gives inf/NaN).
    pub(crate) fn eval(&self, lookup: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
        Some(match self {
            Expr::Num(v) => *v,
            Expr::Name(n) => lookup(n)?,
            Expr::Neg(e) => -e.eval(lookup)?,
            Expr::Bin(a, op, b) => {
                let (a, b) = (a.eval(lookup)?, b.eval(lookup)?);
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    _ => a / b,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(s: &str) -> Option<f64> {
        let vars = |n: &str| match n {
            "Gain" => Some(2.0),
            "Offset" => Some(1.5),
            "13SIM1:cam1:X" => Some(10.0),
            "odd name" => Some(4.0),
            _ => None,
        };
        Expr::parse(s).unwrap().eval(&vars)
    }

    #[test]
    fn expressions_follow_precedence_and_parentheses() {
        assert_eq!(eval("1 + 2 * 3"), Some(7.0));
        assert_eq!(eval("(1 + 2) * 3"), Some(9.0));
        assert_eq!(eval("10 / 4 - 1"), Some(1.5));
        assert_eq!(eval("-Gain * -(Offset + 0.5)"), Some(4.0));
        assert_eq!(eval("Gain*Gain/Gain"), Some(2.0));
        assert_eq!(eval("1e3 + 2.5E-1"), Some(1000.25));
        assert_eq!(eval("\"13SIM1:cam1:X\" / 5"), Some(2.0));
        assert_eq!(eval("\"odd name\" + 1"), Some(5.0));
        assert_eq!(eval("Missing + 1"), None, "an unknown name is undefined");
        assert_eq!(eval("8 - 2 - 1"), Some(5.0), "left associative");
    }

    #[test]
    fn expression_errors_say_what_and_where() {
        let err = |s: &str| Expr::parse(s).unwrap_err();
        assert_eq!(err(""), "empty");
        assert_eq!(err("1 +"), "unexpected end");
        assert_eq!(err("(1 + 2"), "missing ')' at 7");
        assert_eq!(err("1 2"), "unexpected '2' at 3");
        assert_eq!(err("2 * ) 3"), "unexpected ')' at 5");
        assert_eq!(err("a % b"), "unexpected '%' at 3");
        assert_eq!(err("1..2"), "'1..2' at 1 is not a number");
        assert_eq!(err("\"x"), "unterminated quoted name at 1");
    }

    #[test]
    fn functions_are_found_case_insensitively_and_unknown_ones_are_told_apart() {
        assert!(matches!(Funct::parse("wallTime", ""), Ok(Funct::WallTime)));
        assert!(matches!(
            Funct::parse("EPOCHSECONDS", ""),
            Ok(Funct::EpochSeconds)
        ));
        assert!(matches!(
            Funct::parse("hostname", ""),
            Ok(Funct::HostName(_))
        ));
        assert!(matches!(
            Funct::parse("processId", ""),
            Ok(Funct::ProcessId)
        ));
        assert!(matches!(Funct::parse("uniqueId", ""), Ok(Funct::UniqueId)));
        assert!(matches!(
            Funct::parse("constant", "12"),
            Ok(Funct::Constant(AttrValue::Int32(12)))
        ));
        assert_eq!(
            Funct::parse("myAttrFunct1", "PI").unwrap_err(),
            FunctError::Unknown
        );
        assert_eq!(
            Funct::parse("expression", "1 +").unwrap_err(),
            FunctError::Bad("expression '1 +': unexpected end".into())
        );
    }

    #[test]
    fn wall_time_is_iso_8601_utc() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_795_768_202_789);
        assert_eq!(iso_utc(t), "2026-11-27T08:30:02.789Z");
        assert_eq!(iso_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + std::time::Duration::from_secs(951_782_400);
        assert_eq!(iso_utc(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn datatype_converts_a_function_value() {
        assert_eq!(
            convert(AttrValue::Float64(2.7), Want::Int),
            AttrValue::Int32(2)
        );
        assert_eq!(
            convert(AttrValue::Int32(3), Want::Double),
            AttrValue::Float64(3.0)
        );
        assert_eq!(
            convert(AttrValue::Int32(3), Want::String),
            AttrValue::String("3".into())
        );
        assert_eq!(
            convert(AttrValue::Float64(0.5), Want::String),
            AttrValue::String("0.5".into())
        );
        assert_eq!(
            convert(AttrValue::String("x".into()), Want::Int),
            AttrValue::Undefined
        );
        assert_eq!(
            convert(AttrValue::String("7".into()), Want::Double),
            AttrValue::Float64(7.0)
        );
    }
}
