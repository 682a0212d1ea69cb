//! File names and directories: the printf-style `FileTemplate` and `CreateDirectory` rules.
//!
//! areaDetector passes `(FilePath, FileName, FileNumber)` to C `sprintf`, so a template with
//! a wrong conversion is undefined behaviour there. Here the template is parsed: conversions
//! are consumed in order against the argument types (string, string, integer), and anything
//! else (`%f`, `%x`, `%*d`, a fourth conversion, `%s` where the number goes) is refused with a
//! message that names the template.

use std::fmt::Write as _;
use std::io;
use std::path::{Component, Path, PathBuf};

/// One argument of the template, in the order areaDetector passes them.
enum Arg<'a> {
    Str(&'a str),
    Int(i64),
}

/// `sprintf(template, path, name, number)` for the `%s`/`%d` forms areaDetector templates use
/// (flags `-`, `0`, `+`, space; width; precision), plus `%%`.
pub fn format_file_name(
    template: &str,
    path: &str,
    name: &str,
    number: i64,
) -> Result<String, String> {
    let args = [Arg::Str(path), Arg::Str(name), Arg::Int(number)];
    let mut next = 0usize;
    let mut out = String::with_capacity(template.len() + path.len() + name.len() + 8);
    let mut chars = template.chars().peekable();
    let bad = |why: &str| format!("FileTemplate \"{template}\": {why}");
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let (mut left, mut zero, mut plus, mut space) = (false, false, false, false);
        while let Some(&f) = chars.peek() {
            match f {
                '-' => left = true,
                '0' => zero = true,
                '+' => plus = true,
                ' ' => space = true,
                _ => break,
            }
            chars.next();
        }
        let width = read_number(&mut chars).map_err(&bad)?;
        let precision = if chars.peek() == Some(&'.') {
            chars.next();
            Some(read_number(&mut chars).map_err(&bad)?.unwrap_or(0))
        } else {
            None
        };
        let conv = chars
            .next()
            .ok_or_else(|| bad("ends inside a conversion"))?;
        let arg = args
            .get(next)
            .ok_or_else(|| bad("more than 3 conversions (path, name, number)"))?;
        next += 1;
        let body = match (conv, arg) {
            ('s', Arg::Str(s)) => match precision {
                Some(p) => s.chars().take(p).collect(),
                None => (*s).to_string(),
            },
            ('d' | 'i', Arg::Int(v)) => {
                let mut digits = v.unsigned_abs().to_string();
                if let Some(p) = precision {
                    if p == 0 && *v == 0 {
                        digits.clear();
                    }
                    while digits.len() < p {
                        digits.insert(0, '0');
                    }
                }
                let sign = if *v < 0 {
                    "-"
                } else if plus {
                    "+"
                } else if space {
                    " "
                } else {
                    ""
                };
                // C ignores the 0 flag when a precision is given or when left-justifying.
                if zero && !left && precision.is_none() {
                    while sign.len() + digits.len() < width.unwrap_or(0) {
                        digits.insert(0, '0');
                    }
                }
                format!("{sign}{digits}")
            }
            ('s', Arg::Int(_)) => {
                return Err(bad(&format!(
                    "conversion {next} is %s but argument {next} is the file number (use %d)"
                )))
            }
            ('d' | 'i', Arg::Str(_)) => {
                return Err(bad(&format!(
                    "conversion {next} is %{conv} but argument {next} is a string (use %s)"
                )))
            }
            (other, _) => {
                return Err(bad(&format!(
                    "unsupported conversion %{other} (only %s, %d, %i, %%)"
                )))
            }
        };
        let pad = width.unwrap_or(0).saturating_sub(body.chars().count());
        if left {
            out.push_str(&body);
            out.extend(std::iter::repeat_n(' ', pad));
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&body);
        }
    }
    Ok(out)
}

fn read_number(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Result<Option<usize>, &'static str> {
    if chars.peek() == Some(&'*') {
        return Err("'*' width/precision is not supported");
    }
    let mut n: Option<usize> = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        chars.next();
        let v = n.unwrap_or(0).saturating_mul(10).saturating_add(d as usize);
        if v > 4096 {
            return Err("width/precision larger than 4096");
        }
        n = Some(v);
    }
    Ok(n)
}

/// `FilePath` with areaDetector's trailing separator (checkPath appends one).
pub fn normalize_dir(path: &str) -> String {
    if path.is_empty() || path.ends_with('/') {
        path.to_string()
    } else {
        let mut s = String::with_capacity(path.len() + 1);
        let _ = write!(s, "{path}/");
        s
    }
}

/// Creates the directory `dir` by areaDetector's `CreateDirectory` rule: 0 creates nothing;
/// −N creates at most the last N levels; +N requires the first N levels to exist and creates
/// the rest. Returns whether the directory exists afterwards.
pub fn create_directory(dir: &Path, depth: i64) -> io::Result<bool> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(dir.as_os_str().is_empty() || dir.is_dir());
    }
    if depth == 0 {
        return Ok(false);
    }
    // Levels below the root, counting from the top.
    let levels: Vec<Component<'_>> = dir
        .components()
        .filter(|c| matches!(c, Component::Normal(_) | Component::ParentDir))
        .collect();
    let n = levels.len();
    let mut prefix: PathBuf = dir
        .components()
        .take_while(|c| !matches!(c, Component::Normal(_) | Component::ParentDir))
        .collect();
    let mut existing = 0usize;
    for c in &levels {
        prefix.push(c);
        if prefix.is_dir() {
            existing += 1;
        } else {
            break;
        }
    }
    let must_exist = if depth > 0 {
        usize::try_from(depth).unwrap_or(usize::MAX).min(n)
    } else {
        n.saturating_sub(usize::try_from(depth.unsigned_abs()).unwrap_or(usize::MAX))
    };
    if existing < must_exist {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "CreateDirectory={depth}: the first {must_exist} level(s) of {} must exist, \
                 only {existing} do",
                dir.display()
            ),
        ));
    }
    std::fs::create_dir_all(dir)?;
    Ok(true)
}
