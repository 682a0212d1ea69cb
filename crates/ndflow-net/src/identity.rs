//! Who this process is, as EPICS clients announce it (CA's CLIENT_NAME, pvAccess's "ca"
//! authentication): the login name, which servers use for access rules and put logs.

/// The login name: `USER`, `LOGNAME` or `USERNAME` when set, else the name of the process's
/// user id in `/etc/passwd` (a service or a container often has no login variables), else
/// the numeric id; `None` only when none of these can be read.
pub fn user_name() -> Option<String> {
    if let Some(u) = ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
    {
        return Some(u);
    }
    let uid = real_uid()?;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    Some(name_of(&passwd, uid).unwrap_or_else(|| uid.to_string()))
}

/// The real user id, from `/proc/self/status` ("Uid:\treal\teffective\t…").
fn real_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The name of `uid` in a passwd file's text (`name:x:uid:gid:…`).
fn name_of(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let id: u32 = f.nth(1)?.parse().ok()?;
        (id == uid && !name.is_empty()).then(|| name.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lookup() {
        let text = "root:x:0:0:root:/root:/bin/bash\n# comment\nbad line\nalice:x:1000:1000::/home/alice:/bin/sh\n";
        assert_eq!(name_of(text, 0).as_deref(), Some("root"));
        assert_eq!(name_of(text, 1000).as_deref(), Some("alice"));
        assert_eq!(name_of(text, 7), None);
        assert!(real_uid().is_some());
        assert!(user_name().is_some_and(|u| !u.is_empty()));
    }
}
