//! Simulated hosts for the scale-out bench: one network namespace for the head and one per
//! writer, each writer joined to the head by its own veth pair whose head end is rate-limited
//! (tc tbf) to stand in for a link of a given speed. The namespaces hold nothing but these
//! links and their own loopback, so servers inside may bind 0.0.0.0 without being reachable
//! from anywhere else; everything is deleted when the value is dropped.
//!
//! Addresses: writer k's link is 10.231.k.0/30, the head end .1, the writer end .2.

use std::fs::File;
use std::process::Command;

/// The namespaces of one bench row (deleted on drop).
pub struct Netns {
    pub head: String,
    pub writers: Vec<String>,
}

/// Runs `ip ARGS`; an error carries ip's message.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// "10gbit" / "500mbit" / "2.5gbit" / "100kbit" → bits per second.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("gbit") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("mbit") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kbit") {
        (n, 1e3)
    } else {
        return Err(format!(
            "bad --rate '{s}': expected a number with gbit, mbit or kbit (e.g. 1gbit)"
        ));
    };
    match num.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v * mult),
        _ => Err(format!("bad --rate '{s}': not a positive number")),
    }
}

/// Whether this process may build the simulated hosts: root, `ip netns`, veth pairs and the
/// tbf qdisc all work (tried on a scratch namespace, deleted again); the reason if not.
pub fn available() -> Result<(), String> {
    // The effective uid is the second number of /proc/self/status's "Uid:" line.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse::<u32>().ok());
    if euid != Some(0) {
        return Err("not root".into());
    }
    let probe = format!("ndprobe{}", std::process::id() % 100_000);
    ip(&["netns", "add", &probe]).map_err(|e| format!("no usable `ip netns`: {e}"))?;
    let tried = ip(&[
        "-n", &probe, "link", "add", "pa", "type", "veth", "peer", "name", "pb",
    ])
    .and_then(|()| {
        let out = Command::new("ip")
            .args([
                "netns", "exec", &probe, "tc", "qdisc", "add", "dev", "pa", "root",
            ])
            .args(["tbf", "rate", "1gbit", "burst", "65536", "latency", "50ms"])
            .output()
            .map_err(|e| format!("cannot run tc: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "tc tbf: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    });
    let _ = ip(&["netns", "del", &probe]);
    tried
}

impl Netns {
    pub fn head_addr(k: usize) -> String {
        format!("10.231.{k}.1")
    }
    pub fn writer_addr(k: usize) -> String {
        format!("10.231.{k}.2")
    }

    /// A head namespace and `writers` writer namespaces, links limited to `rate` (tc units,
    /// e.g. "1gbit") from the head towards each writer, MTU 9000 (detector networks run
    /// jumbo frames).
    pub fn create(tag: &str, writers: usize, rate: &str) -> Result<Netns, String> {
        let bits = parse_rate(rate)?;
        let mut ns = Netns {
            head: format!("{tag}h"),
            writers: Vec::new(),
        };
        ip(&["netns", "add", &ns.head])?;
        ip(&["-n", &ns.head, "link", "set", "lo", "up"])?;
        // 20 ms of data per burst (at least 64 KiB): enough for tbf at high rates.
        let burst = format!("{}", ((bits / 8.0 / 50.0) as u64).max(65536));
        for k in 1..=writers {
            let w = format!("{tag}w{k}");
            ip(&["netns", "add", &w])?;
            ns.writers.push(w.clone());
            let (vh, vw) = (format!("{tag}h{k}"), format!("{tag}w{k}"));
            ip(&[
                "link", "add", &vh, "mtu", "9000", "type", "veth", "peer", "name", &vw, "mtu",
                "9000",
            ])?;
            ip(&["link", "set", &vh, "netns", &ns.head])?;
            ip(&["link", "set", &vw, "netns", &w])?;
            let (ha, wa) = (Self::head_addr(k), Self::writer_addr(k));
            ip(&[
                "-n",
                &ns.head,
                "addr",
                "add",
                &format!("{ha}/30"),
                "dev",
                &vh,
            ])?;
            ip(&["-n", &w, "addr", "add", &format!("{wa}/30"), "dev", &vw])?;
            ip(&["-n", &ns.head, "link", "set", &vh, "up"])?;
            ip(&["-n", &w, "link", "set", &vw, "up"])?;
            ip(&["-n", &w, "link", "set", "lo", "up"])?;
            let out = Command::new("ip")
                .args([
                    "netns", "exec", &ns.head, "tc", "qdisc", "add", "dev", &vh, "root",
                ])
                .args(["tbf", "rate", rate, "burst", &burst, "latency", "50ms"])
                .output()
                .map_err(|e| format!("cannot run tc: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "tc qdisc add dev {vh} tbf rate {rate}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        Ok(ns)
    }
}

/// Moves the calling thread into namespace `name` (threads it starts afterwards are there too).
pub fn enter(name: &str) -> Result<(), String> {
    let f = File::open(format!("/var/run/netns/{name}"))
        .map_err(|e| format!("namespace {name}: {e}"))?;
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("setns {name}: {e}"))
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends inside it (and so their peers).
        for w in &self.writers {
            let _ = ip(&["netns", "del", w]);
        }
        let _ = ip(&["netns", "del", &self.head]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_tc_units() {
        assert_eq!(parse_rate("1gbit"), Ok(1e9));
        assert_eq!(parse_rate("2.5Gbit"), Ok(2.5e9));
        assert_eq!(parse_rate("500mbit"), Ok(5e8));
        assert!(parse_rate("10G").is_err());
        assert!(parse_rate("-1gbit").is_err());
    }
}
