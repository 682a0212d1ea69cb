//! Who may read and write which PV, for every protocol.
//!
//! The config's `[[access]]` tables are tried in order; the first whose `pvs` pattern, `hosts`
//! and `users` all match decides. With no matching rule, clients on this machine (loopback
//! addresses, this host's own addresses, `localhost`, this host's name) may write and every
//! other client may only read. The servers serve this host only unless told otherwise, so by
//! default that is everyone; a Channel Access client's HOST_NAME counts only when it connects
//! from this host (from elsewhere, its address is its host).
//!
//! ```toml
//! [[access]]
//! pvs = "13SIM1:cam1:*"       # glob over full PV names: * any run, ? one character
//! hosts = ["127.0.0.1"]       # client host (CA: its HOST_NAME or address; pvAccess: address)
//! users = ["*"]               # client user name (CA CLIENT_NAME, pvAccess "ca" auth)
//! rights = "read"             # "write", "read" or "none" (none hides the PV)
//! ```

/// What a client may do with a PV (ordered: `None < Read < Write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rights {
    /// The PV is hidden: searches for it are not answered.
    None,
    Read,
    Write,
}

impl Rights {
    pub fn parse(s: &str) -> Result<Rights, String> {
        match s {
            "none" => Ok(Rights::None),
            "read" => Ok(Rights::Read),
            "write" => Ok(Rights::Write),
            other => Err(format!(
                "rights must be \"write\", \"read\" or \"none\", not \"{other}\""
            )),
        }
    }
}

/// One `[[access]]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessRule {
    pub pvs: String,
    pub hosts: Vec<String>,
    pub users: Vec<String>,
    pub rights: Rights,
}

impl AccessRule {
    fn matches(&self, pv: &str, host: &str, user: &str) -> bool {
        glob(&self.pvs, pv)
            && (self.hosts.is_empty() || self.hosts.iter().any(|h| glob(h, host)))
            && (self.users.is_empty() || self.users.iter().any(|u| glob(u, user)))
    }
}

/// The rules of one IOC.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccessRules {
    pub rules: Vec<AccessRule>,
}

impl AccessRules {
    pub fn rights(&self, pv: &str, host: &str, user: &str) -> Rights {
        match self.rules.iter().find(|r| r.matches(pv, host, user)) {
            Some(r) => r.rights,
            None if is_local(host) => Rights::Write,
            None => Rights::Read,
        }
    }
}

/// Whether a client host is this machine.
pub fn is_local(host: &str) -> bool {
    if host.is_empty() || host == "localhost" {
        return true;
    }
    if let Ok(ip) = host.parse() {
        return ndflow_net::ifaces::is_local(ip);
    }
    local_host_name().is_some_and(|h| h.eq_ignore_ascii_case(host))
}

fn local_host_name() -> Option<String> {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string())
            .or_else(|| std::env::var("HOSTNAME").ok())
    })
    .clone()
}

/// `*` matches any run of characters, `?` one character; everything else itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with one backtrack point (the last `*`): linear in practice.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("13SIM1:cam1:*", "13SIM1:cam1:Acquire"));
        assert!(!glob("13SIM1:cam1:*", "13SIM1:image1:ArrayData"));
        assert!(glob("*:Acquire", "X:cam1:Acquire"));
        assert!(glob("a?c", "abc") && !glob("a?c", "abbc"));
        assert!(glob("*", "") && glob("**x*", "yyxyy") && !glob("x*", "yx"));
    }

    #[test]
    fn first_matching_rule_wins_and_default_is_local_write() {
        let rules = AccessRules {
            rules: vec![
                AccessRule {
                    pvs: "P:cam1:Acquire*".into(),
                    hosts: vec![],
                    users: vec!["operator".into()],
                    rights: Rights::Write,
                },
                AccessRule {
                    pvs: "P:cam1:*".into(),
                    hosts: vec![],
                    users: vec![],
                    rights: Rights::Read,
                },
                AccessRule {
                    pvs: "P:secret*".into(),
                    hosts: vec!["127.*".into()],
                    users: vec![],
                    rights: Rights::None,
                },
            ],
        };
        assert_eq!(
            rules.rights("P:cam1:Acquire", "127.0.0.1", "operator"),
            Rights::Write
        );
        assert_eq!(
            rules.rights("P:cam1:Acquire", "127.0.0.1", "guest"),
            Rights::Read
        );
        assert_eq!(rules.rights("P:secretX", "127.0.0.1", "x"), Rights::None);
        assert_eq!(rules.rights("P:other", "127.0.0.1", "x"), Rights::Write);
        assert_eq!(rules.rights("P:other", "10.1.2.3", "x"), Rights::Read);
        assert!(Rights::parse("bogus").unwrap_err().contains("bogus"));
    }
}
