//! EPICS calc expressions (libCom `postfix`/`calcPerform`), the subset trigger expressions use.
//!
//! Syntax and precedence follow EPICS base's `postfix.c` (lowest first):
//! `? :` · `|| | OR XOR` · `&& & AND << >> >>>` · `= == # != < <= > >=` · `+ -` · `* / %` ·
//! `^ **` · unary `- ! ~ NOT` and functions. Binary operators of one level associate to the
//! left (`2^3^2` = 64, as EPICS); a unary minus binds tighter than `^` (`-2^2` = 4).
//! Names are case-insensitive. Operands: numbers (`1`, `2.5`, `1e3`, `0x1F`), the inputs
//! `A`..`L`, `PI`, `D2R`, `R2D`, `NAN`, `INF`. Functions: ABS SQRT SQR EXP LN LOG LOGE SIN
//! COS TAN ASIN ACOS ATAN SINH COSH TANH CEIL FLOOR NINT ISINF, and with an argument list
//! MIN MAX ATAN2 FMOD ISNAN FINITE. As `calcPerform`: comparisons and logic give 1 or 0 (any
//! non-zero, NaN included, is true), `%` and the bit operators work on 32-bit integers, and
//! `x % 0` is NaN. Not supported: assignment (`:=`), `;`, `VAL`, `RNDM`.

use std::fmt;

/// A parse error: what was wrong, the token and its byte offset in the expression.
#[derive(Debug, Clone)]
pub struct CalcError {
    pub message: String,
    pub token: String,
    pub at: usize,
}

impl fmt::Display for CalcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.token.is_empty() {
            write!(f, "{} at end of expression", self.message)
        } else {
            write!(f, "{} '{}' at offset {}", self.message, self.token, self.at)
        }
    }
}

impl std::error::Error for CalcError {}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bin {
    Or,
    BitOr,
    BitXor,
    And,
    BitAnd,
    Shl,
    Shr,
    /// `>>>`: logical (unsigned) right shift.
    ShrLogic,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

impl Bin {
    fn level(self) -> u8 {
        use Bin::*;
        match self {
            Or | BitOr | BitXor => 1,
            And | BitAnd | Shl | Shr | ShrLogic => 2,
            Eq | Ne | Lt | Le | Gt | Ge => 3,
            Add | Sub => 4,
            Mul | Div | Mod => 5,
            Pow => 6,
        }
    }
}

#[derive(Debug, Clone)]
enum Expr {
    Num(f64),
    Var(usize),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    BitNot(Box<Expr>),
    Func(fn(f64) -> f64, Box<Expr>),
    Var2(fn(f64, f64) -> f64, Box<Expr>, Box<Expr>),
    /// MIN / MAX / ISNAN / FINITE over a list.
    List(ListFn, Vec<Expr>),
    Bin(Bin, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ListFn {
    Min,
    Max,
    IsNan,
    Finite,
}

/// A parsed expression, evaluated against the inputs `A`..`L`.
#[derive(Debug, Clone)]
pub struct Calc {
    expr: Expr,
}

/// Number of inputs, `A`..`L`.
pub const NARGS: usize = 12;

impl Calc {
    /// Parses `text`; an error names the offending token.
    pub fn parse(text: &str) -> Result<Calc, CalcError> {
        let tokens = lex(text)?;
        let mut p = Parser { tokens, pos: 0 };
        let expr = p.cond()?;
        if let Some(t) = p.tokens.get(p.pos) {
            return Err(t.error("unexpected"));
        }
        Ok(Calc { expr })
    }

    /// The value for inputs `args` (A = args[0], ...).
    pub fn eval(&self, args: &[f64; NARGS]) -> f64 {
        eval(&self.expr, args)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Op(&'static str),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    text: String,
    at: usize,
}

impl Token {
    fn error(&self, message: &str) -> CalcError {
        CalcError {
            message: message.to_string(),
            token: self.text.clone(),
            at: self.at,
        }
    }
}

/// Longest first, so that `**` is not read as `*`.
const OPS: &[&str] = &[
    ">>>", "**", "&&", "||", "==", "!=", "<=", ">=", "<<", ">>", ":=", "+", "-", "*", "/", "%",
    "^", "(", ")", ",", "?", ":", "=", "#", "<", ">", "!", "~", "&", "|", ";",
];

fn lex(text: &str) -> Result<Vec<Token>, CalcError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            let hex = c == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X'));
            let v = if hex {
                i += 2;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    i += 1;
                }
                u32::from_str_radix(&text[start + 2..i], 16)
                    .map(f64::from)
                    .ok()
            } else {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1;
                }
                // An exponent only when digits follow (`1e3`, `2E-4`).
                if i < b.len() && matches!(b[i], b'e' | b'E') {
                    let mut j = i + 1;
                    if j < b.len() && matches!(b[j], b'+' | b'-') {
                        j += 1;
                    }
                    if j < b.len() && b[j].is_ascii_digit() {
                        i = j;
                        while i < b.len() && b[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                text[start..i].parse::<f64>().ok()
            };
            let Some(v) = v else {
                return Err(CalcError {
                    message: "bad number".into(),
                    token: text[start..i].to_string(),
                    at: start,
                });
            };
            out.push(Token {
                tok: Tok::Num(v),
                text: text[start..i].to_string(),
                at: start,
            });
            continue;
        }
        if c.is_ascii_alphabetic() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            out.push(Token {
                tok: Tok::Name(word.to_ascii_uppercase()),
                text: word.to_string(),
                at: start,
            });
            continue;
        }
        let Some(op) = OPS.iter().find(|op| text[i..].starts_with(**op)) else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(CalcError {
                message: "unknown character".into(),
                token: ch.to_string(),
                at: i,
            });
        };
        i += op.len();
        out.push(Token {
            tok: Tok::Op(op),
            text: op.to_string(),
            at: start,
        });
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

fn end_error(message: &str) -> CalcError {
    CalcError {
        message: message.to_string(),
        token: String::new(),
        at: 0,
    }
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.peek().map(|t| &t.tok) {
            Some(Tok::Op(op)) => Some(op),
            _ => None,
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), CalcError> {
        match self.peek() {
            Some(Token {
                tok: Tok::Op(o), ..
            }) if *o == op => {
                self.pos += 1;
                Ok(())
            }
            Some(t) => Err(t.error(&format!("expected '{op}', found"))),
            None => Err(end_error(&format!("expected '{op}'"))),
        }
    }

    /// `c ? a : b`, right-associative, lowest.
    fn cond(&mut self) -> Result<Expr, CalcError> {
        let c = self.binary(1)?;
        if self.peek_op() != Some("?") {
            return Ok(c);
        }
        self.pos += 1;
        let a = self.cond()?;
        self.expect(":")?;
        let b = self.cond()?;
        Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)))
    }

    fn bin_op(&self) -> Option<Bin> {
        let t = self.peek()?;
        Some(match &t.tok {
            Tok::Op(op) => match *op {
                "||" => Bin::Or,
                "|" => Bin::BitOr,
                "&&" => Bin::And,
                "&" => Bin::BitAnd,
                "<<" => Bin::Shl,
                ">>" => Bin::Shr,
                ">>>" => Bin::ShrLogic,
                "=" | "==" => Bin::Eq,
                "#" | "!=" => Bin::Ne,
                "<" => Bin::Lt,
                "<=" => Bin::Le,
                ">" => Bin::Gt,
                ">=" => Bin::Ge,
                "+" => Bin::Add,
                "-" => Bin::Sub,
                "*" => Bin::Mul,
                "/" => Bin::Div,
                "%" => Bin::Mod,
                "^" | "**" => Bin::Pow,
                _ => return None,
            },
            Tok::Name(n) => match n.as_str() {
                "OR" => Bin::BitOr,
                "XOR" => Bin::BitXor,
                "AND" => Bin::BitAnd,
                _ => return None,
            },
            Tok::Num(_) => return None,
        })
    }

    /// Precedence climbing over levels `min`..=6, left-associative.
    fn binary(&mut self, min: u8) -> Result<Expr, CalcError> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.bin_op().filter(|op| op.level() >= min) {
            self.pos += 1;
            let rhs = self.binary(op.level() + 1)?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, CalcError> {
        let Some(t) = self.peek().cloned() else {
            return Err(end_error("expected an operand"));
        };
        self.pos += 1;
        let arg = |p: &mut Parser| p.unary().map(Box::new);
        match &t.tok {
            Tok::Num(v) => Ok(Expr::Num(*v)),
            Tok::Op("-") => Ok(Expr::Neg(arg(self)?)),
            Tok::Op("!") => Ok(Expr::Not(arg(self)?)),
            Tok::Op("~") => Ok(Expr::BitNot(arg(self)?)),
            Tok::Op("(") => {
                let e = self.cond()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Op(_) => Err(t.error("expected an operand, found")),
            Tok::Name(n) => {
                let name = n.as_str();
                if name.len() == 1 && ("A"..="L").contains(&name) {
                    return Ok(Expr::Var((name.as_bytes()[0] - b'A') as usize));
                }
                if let Some(v) = constant(name) {
                    return Ok(Expr::Num(v));
                }
                if name == "NOT" {
                    return Ok(Expr::BitNot(arg(self)?));
                }
                if let Some(f) = function(name) {
                    return Ok(Expr::Func(f, arg(self)?));
                }
                let list = match name {
                    "MIN" => Some(ListFn::Min),
                    "MAX" => Some(ListFn::Max),
                    "ISNAN" => Some(ListFn::IsNan),
                    "FINITE" => Some(ListFn::Finite),
                    _ => None,
                };
                let two: Option<fn(f64, f64) -> f64> = match name {
                    "ATAN2" => Some(|y, x| y.atan2(x)),
                    "FMOD" => Some(|a, b| a % b),
                    _ => None,
                };
                if list.is_none() && two.is_none() {
                    return Err(t.error("unknown name"));
                }
                let args = self.arg_list(&t)?;
                if let Some(f) = two {
                    let [a, b]: [Expr; 2] = args
                        .try_into()
                        .map_err(|_| t.error("needs exactly 2 arguments:"))?;
                    return Ok(Expr::Var2(f, Box::new(a), Box::new(b)));
                }
                Ok(Expr::List(list.unwrap_or(ListFn::Min), args))
            }
        }
    }

    /// `( e1, e2, ... )` after a function name.
    fn arg_list(&mut self, name: &Token) -> Result<Vec<Expr>, CalcError> {
        if self.peek_op() != Some("(") {
            return Err(name.error("expected '(' after"));
        }
        self.pos += 1;
        let mut args = vec![self.cond()?];
        while self.peek_op() == Some(",") {
            self.pos += 1;
            args.push(self.cond()?);
        }
        self.expect(")")?;
        Ok(args)
    }
}

fn constant(name: &str) -> Option<f64> {
    Some(match name {
        "PI" => std::f64::consts::PI,
        "D2R" => std::f64::consts::PI / 180.0,
        "R2D" => 180.0 / std::f64::consts::PI,
        "NAN" => f64::NAN,
        "INF" => f64::INFINITY,
        _ => return None,
    })
}

fn function(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "ABS" => f64::abs,
        "SQRT" | "SQR" => f64::sqrt,
        "EXP" => f64::exp,
        "LN" | "LOGE" => f64::ln,
        "LOG" => f64::log10,
        "SIN" => f64::sin,
        "COS" => f64::cos,
        "TAN" => f64::tan,
        "ASIN" => f64::asin,
        "ACOS" => f64::acos,
        "ATAN" => f64::atan,
        "SINH" => f64::sinh,
        "COSH" => f64::cosh,
        "TANH" => f64::tanh,
        "CEIL" => f64::ceil,
        "FLOOR" => f64::floor,
        // Nearest integer, halves away from zero (C's floor(x + 0.5) for x >= 0).
        "NINT" => f64::round,
        "ISINF" => |x: f64| truth(x.is_infinite()),
        _ => return None,
    })
}

fn truth(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// C's truthiness of a double: NaN is true.
fn is_true(x: f64) -> bool {
    x != 0.0
}

/// calcPerform's cast of a double to a 32-bit integer for bit operators.
fn int(x: f64) -> i32 {
    x as i64 as i32
}

fn eval(e: &Expr, args: &[f64; NARGS]) -> f64 {
    let ev = |x: &Expr| eval(x, args);
    match e {
        Expr::Num(v) => *v,
        Expr::Var(i) => args[*i],
        Expr::Neg(x) => -ev(x),
        Expr::Not(x) => truth(!is_true(ev(x))),
        Expr::BitNot(x) => f64::from(!int(ev(x))),
        Expr::Func(f, x) => f(ev(x)),
        Expr::Var2(f, a, b) => f(ev(a), ev(b)),
        Expr::List(f, xs) => {
            let vals = xs.iter().map(ev);
            match f {
                // calcPerform: NaN wins MIN/MAX.
                ListFn::Min => vals.fold(f64::INFINITY, |m, v| {
                    if v.is_nan() || m.is_nan() {
                        f64::NAN
                    } else {
                        m.min(v)
                    }
                }),
                ListFn::Max => vals.fold(f64::NEG_INFINITY, |m, v| {
                    if v.is_nan() || m.is_nan() {
                        f64::NAN
                    } else {
                        m.max(v)
                    }
                }),
                ListFn::IsNan => truth(vals.into_iter().any(f64::is_nan)),
                ListFn::Finite => truth(vals.into_iter().all(f64::is_finite)),
            }
        }
        Expr::Cond(c, a, b) => {
            if is_true(ev(c)) {
                ev(a)
            } else {
                ev(b)
            }
        }
        Expr::Bin(op, a, b) => {
            let (x, y) = (ev(a), ev(b));
            match op {
                Bin::Or => truth(is_true(x) || is_true(y)),
                Bin::And => truth(is_true(x) && is_true(y)),
                Bin::BitOr => f64::from(int(x) | int(y)),
                Bin::BitXor => f64::from(int(x) ^ int(y)),
                Bin::BitAnd => f64::from(int(x) & int(y)),
                Bin::Shl => f64::from(int(x).wrapping_shl(int(y) as u32)),
                Bin::Shr => f64::from(int(x).wrapping_shr(int(y) as u32)),
                Bin::ShrLogic => f64::from((int(x) as u32).wrapping_shr(int(y) as u32)),
                Bin::Eq => truth(x == y),
                Bin::Ne => truth(x != y),
                Bin::Lt => truth(x < y),
                Bin::Le => truth(x <= y),
                Bin::Gt => truth(x > y),
                Bin::Ge => truth(x >= y),
                Bin::Add => x + y,
                Bin::Sub => x - y,
                Bin::Mul => x * y,
                Bin::Div => x / y,
                Bin::Mod => match int(y) {
                    0 => f64::NAN,
                    d => f64::from(int(x).wrapping_rem(d)),
                },
                Bin::Pow => x.powf(y),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, a: f64, b: f64) -> f64 {
        let mut args = [0.0; NARGS];
        args[0] = a;
        args[1] = b;
        Calc::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .eval(&args)
    }

    #[test]
    fn arithmetic_and_precedence() {
        // Hand-checked values.
        assert_eq!(run("1+2*3", 0.0, 0.0), 7.0);
        assert_eq!(run("(1+2)*3", 0.0, 0.0), 9.0);
        assert_eq!(run("10-4-3", 0.0, 0.0), 3.0); // left-assoc
        assert_eq!(run("2^3^2", 0.0, 0.0), 64.0); // EPICS: left-assoc
        assert_eq!(run("2**10", 0.0, 0.0), 1024.0);
        assert_eq!(run("-2^2", 0.0, 0.0), 4.0); // unary minus binds tighter
        assert_eq!(run("7%3", 0.0, 0.0), 1.0);
        assert_eq!(run("-7%3", 0.0, 0.0), -1.0); // C's truncating remainder
        assert!(run("5%0", 0.0, 0.0).is_nan());
        assert_eq!(run("1/4", 0.0, 0.0), 0.25);
        assert_eq!(run("A*2+B", 3.0, 4.0), 10.0);
        assert_eq!(run("a*2+b", 3.0, 4.0), 10.0); // names case-insensitive
        assert_eq!(run("1.5e2 + .5", 0.0, 0.0), 150.5);
        assert_eq!(run("0x10 + 1", 0.0, 0.0), 17.0);
        // Comparisons below + and -: (A+1) > (B*2).
        assert_eq!(run("A+1>B*2", 4.0, 2.0), 1.0);
        assert_eq!(run("A+1>B*2", 3.0, 2.0), 0.0);
    }

    #[test]
    fn comparisons_logic_and_conditional() {
        assert_eq!(run("A=3", 3.0, 0.0), 1.0);
        assert_eq!(run("A==3", 2.0, 0.0), 0.0);
        assert_eq!(run("A#3", 2.0, 0.0), 1.0);
        assert_eq!(run("A!=3", 3.0, 0.0), 0.0);
        assert_eq!(run("A<=B", 2.0, 2.0), 1.0);
        assert_eq!(run("A>=B", 1.0, 2.0), 0.0);
        assert_eq!(run("A>1&&B<2", 2.0, 1.0), 1.0);
        assert_eq!(run("A>1&&B<2", 2.0, 3.0), 0.0);
        assert_eq!(run("A>1||B<2", 0.0, 1.0), 1.0);
        assert_eq!(run("!A", 0.0, 0.0), 1.0);
        assert_eq!(run("!A", 5.0, 0.0), 0.0);
        assert_eq!(run("!NAN", 0.0, 0.0), 0.0); // NaN is true
                                                // && (level 2) above || (level 1): 1 || (0 && 0) = 1.
        assert_eq!(run("1||0&&0", 0.0, 0.0), 1.0);
        assert_eq!(run("A>5?10:20", 6.0, 0.0), 10.0);
        assert_eq!(run("A>5?10:20", 5.0, 0.0), 20.0);
        // Right-nested conditionals.
        assert_eq!(run("A<0?-1:A=0?0:1", -3.0, 0.0), -1.0);
        assert_eq!(run("A<0?-1:A=0?0:1", 0.0, 0.0), 0.0);
        assert_eq!(run("A<0?-1:A=0?0:1", 9.0, 0.0), 1.0);
        assert_eq!(run("6&3", 0.0, 0.0), 2.0);
        assert_eq!(run("6|3", 0.0, 0.0), 7.0);
        assert_eq!(run("6 XOR 3", 0.0, 0.0), 5.0);
        assert_eq!(run("1<<4", 0.0, 0.0), 16.0);
        assert_eq!(run("-16>>2", 0.0, 0.0), -4.0);
        assert_eq!(run("-16>>>28", 0.0, 0.0), 15.0);
        assert_eq!(run("~0", 0.0, 0.0), -1.0);
    }

    #[test]
    fn functions() {
        assert_eq!(run("ABS(A)", -2.5, 0.0), 2.5);
        assert_eq!(run("ABS -3", 0.0, 0.0), 3.0);
        assert_eq!(run("SQRT(16)+SQR(9)", 0.0, 0.0), 7.0);
        assert_eq!(run("MIN(A,B,1)", 3.0, 2.0), 1.0);
        assert_eq!(run("MAX(A,B)", 3.0, 7.0), 7.0);
        assert!(run("MAX(A,B)", f64::NAN, 7.0).is_nan());
        assert_eq!(run("NINT(2.5)+NINT(-2.5)", 0.0, 0.0), 0.0);
        assert_eq!(run("FLOOR(-1.5)+CEIL(1.2)", 0.0, 0.0), 0.0);
        assert_eq!(run("LOG(1000)", 0.0, 0.0), 3.0);
        assert_eq!(run("ATAN2(1,1)*4", 0.0, 0.0), std::f64::consts::PI);
        assert_eq!(run("FMOD(7.5,2)", 0.0, 0.0), 1.5);
        assert_eq!(run("ISNAN(A)", f64::NAN, 0.0), 1.0);
        assert_eq!(run("ISNAN(A,B)", 1.0, 2.0), 0.0);
        assert_eq!(run("FINITE(A)", f64::INFINITY, 0.0), 0.0);
    }

    #[test]
    fn errors_name_the_bad_token() {
        let err = |t: &str| Calc::parse(t).unwrap_err();
        let e = err("A+*2");
        assert_eq!((e.token.as_str(), e.at), ("*", 2));
        assert!(e.to_string().contains("'*'"), "{e}");
        let e = err("A+FOO");
        assert_eq!((e.token.as_str(), e.at), ("FOO", 2));
        assert!(e.to_string().contains("unknown name"), "{e}");
        let e = err("A $ 2");
        assert_eq!((e.token.as_str(), e.at), ("$", 2));
        let e = err("(A+1");
        assert!(e.to_string().contains("expected ')'"), "{e}");
        let e = err("A 2");
        assert_eq!((e.token.as_str(), e.at), ("2", 2));
        let e = err("A?1");
        assert!(e.to_string().contains("expected ':'"), "{e}");
        let e = err("MAX A");
        assert_eq!(e.token, "MAX");
        let e = err("ATAN2(1)");
        assert_eq!(e.token, "ATAN2");
        assert!(err("").to_string().contains("expected an operand"));
        let e = err("A:=1");
        assert_eq!(e.token, ":=");
    }
}
