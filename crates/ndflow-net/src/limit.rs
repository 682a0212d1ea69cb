//! Search replies, rate-limited: a flood of searches (or spoofed ones aimed at a third host)
//! gets at most a few replies a second per client address and a bounded number in all, so the
//! server neither spends its time answering nor becomes an amplifier. Replies over the limits
//! are dropped (the client searches again, as every EPICS client does) and counted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

use parking_lot::Mutex;

/// Addresses remembered at most; past it, the idle ones are forgotten (a spoofed flood from
/// many addresses cannot grow the table).
const MAX_SOURCES: usize = 4096;

/// Token buckets: one per client address and one for all.
pub struct ReplyLimiter {
    per_source: f64,
    total: f64,
    /// Seconds of rate a bucket holds when full (the burst allowed after a quiet spell).
    burst_seconds: f64,
    state: Mutex<State>,
}

struct State {
    total: (f64, Instant),
    sources: HashMap<IpAddr, (f64, Instant)>,
}

impl ReplyLimiter {
    /// At most `per_source` replies a second to one address and `total` a second in all,
    /// each with a burst of two seconds' worth.
    pub fn new(per_source: f64, total: f64) -> ReplyLimiter {
        let now = Instant::now();
        ReplyLimiter {
            per_source,
            total,
            burst_seconds: 2.0,
            state: Mutex::new(State {
                total: (total * 2.0, now),
                sources: HashMap::new(),
            }),
        }
    }

    /// Whether a reply to `ip` may go now (and takes its token).
    pub fn allow(&self, ip: IpAddr) -> bool {
        self.allow_at(ip, Instant::now())
    }

    fn allow_at(&self, ip: IpAddr, now: Instant) -> bool {
        let mut st = self.state.lock();
        let (per, total, burst) = (self.per_source, self.total, self.burst_seconds);
        let refill = |b: &mut (f64, Instant), rate: f64| {
            let dt = now.saturating_duration_since(b.1).as_secs_f64();
            b.0 = (b.0 + dt * rate).min(rate * burst);
            b.1 = now;
        };
        refill(&mut st.total, total);
        if st.sources.len() >= MAX_SOURCES && !st.sources.contains_key(&ip) {
            // Forget the addresses whose bucket has refilled: they have been quiet.
            let full = per * burst;
            st.sources
                .retain(|_, b| b.0 + now.saturating_duration_since(b.1).as_secs_f64() * per < full);
            if st.sources.len() >= MAX_SOURCES {
                return false;
            }
        }
        let src = st.sources.entry(ip).or_insert((per * burst, now));
        refill(src, per);
        if src.0 < 1.0 {
            return false;
        }
        if st.total.0 < 1.0 {
            return false;
        }
        if let Some(src) = st.sources.get_mut(&ip) {
            src.0 -= 1.0;
        }
        st.total.0 -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    fn ip(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
    }

    #[test]
    fn a_flood_from_one_address_gets_the_rate_and_a_burst() {
        let l = ReplyLimiter::new(10.0, 1000.0);
        let t0 = Instant::now();
        let allowed = (0..100).filter(|_| l.allow_at(ip(1), t0)).count();
        assert_eq!(allowed, 20, "two seconds' burst");
        // Another address has its own bucket.
        assert!(l.allow_at(ip(2), t0));
        // A second later, ten more.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!((0..100).filter(|_| l.allow_at(ip(1), t1)).count(), 10);
    }

    #[test]
    fn the_total_caps_many_addresses() {
        let l = ReplyLimiter::new(10.0, 50.0);
        let t0 = Instant::now();
        let allowed = (0..200u32)
            .filter(|n| l.allow_at(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n)), t0))
            .count();
        assert_eq!(allowed, 100, "two seconds of the total");
    }

    #[test]
    fn the_table_of_addresses_stays_bounded() {
        let l = ReplyLimiter::new(1.0, 1e9);
        let t0 = Instant::now();
        for n in 0..(MAX_SOURCES as u32 + 100) {
            l.allow_at(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n)), t0);
        }
        assert!(l.state.lock().sources.len() <= MAX_SOURCES);
        // Once they have been quiet long enough, new addresses are served again.
        let later = t0 + Duration::from_secs(10);
        assert!(l.allow_at(ip(9), later));
    }
}
