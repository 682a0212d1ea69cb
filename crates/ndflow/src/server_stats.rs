//! The protocol servers' counters as the IOC's own PVs (`$(P)NDFLOW:CaConnections`, …):
//! connections and channels open, searches refused or passed on, and every connection closed
//! for bad input, so that an operator sees a scanner or a broken client without reading logs.
//! Read-only, refreshed once a second by the IOC's main loop.

use ndflow_core::{ParamDef, ParamStore, ParamValue};

use crate::serve::Servers;

/// The counters' declarations, part of the IOC port (`crate::logging::ioc_port`).
pub static SERVER_STATS: &[ParamDef] = &[
    ParamDef::int64("CaConnections", 0)
        .read_only_plain()
        .doc("Channel Access: open TCP connections"),
    ParamDef::int64("CaChannels", 0)
        .read_only_plain()
        .doc("Channel Access: open channels over all connections"),
    ParamDef::int64("CaSearchesRefused", 0)
        .read_only_plain()
        .doc("Channel Access: searches not answered because of where they came from"),
    ParamDef::int64("CaSearchesForwarded", 0)
        .read_only_plain()
        .doc("Channel Access: unicast searches passed on to the other servers of this host"),
    ParamDef::int64("CaSearchesLimited", 0)
        .read_only_plain()
        .doc("Channel Access: search replies not sent because a client searched faster than 1000 a second (10,000 for all)"),
    ParamDef::int64("CaPartialTimeouts", 0)
        .read_only_plain()
        .doc("Channel Access: connections closed because a message stayed incomplete for 30 s"),
    ParamDef::int64("CaPartialOverCap", 0)
        .read_only_plain()
        .doc("Channel Access: connections closed because the incomplete messages of all clients would have held more than 256 MiB with theirs"),
    ParamDef::int64("CaLimitRefused", 0)
        .read_only_plain()
        .doc("Channel Access: channels, subscriptions and notified puts refused because their connection had as many as it may (100,000 channels or subscriptions, 4096 puts in progress)"),
    ParamDef::int64("PvaConnections", 0)
        .read_only_plain()
        .doc("pvAccess: open TCP connections"),
    ParamDef::int64("PvaChannels", 0)
        .read_only_plain()
        .doc("pvAccess: open channels"),
    ParamDef::int64("PvaMonitors", 0)
        .read_only_plain()
        .doc("pvAccess: live monitor subscriptions"),
    ParamDef::int64("PvaSearchesRefused", 0)
        .read_only_plain()
        .doc("pvAccess: searches not answered because of where they came from"),
    ParamDef::int64("PvaSearchesForwarded", 0)
        .read_only_plain()
        .doc("pvAccess: unicast searches passed on to the other servers of this host"),
    ParamDef::int64("PvaPartialTimeouts", 0)
        .read_only_plain()
        .doc("pvAccess: connections closed because a message they began stayed incomplete for 40 s"),
    ParamDef::int64("PvaPartialOverCap", 0)
        .read_only_plain()
        .doc("pvAccess: connections closed because the incomplete messages of all clients would have held more than 256 MiB with theirs"),
    ParamDef::int64("PvaSearchesLimited", 0)
        .read_only_plain()
        .doc("pvAccess: search replies not sent because a client searched faster than 1000 a second (10,000 for all)"),
    ParamDef::int64("PvaLimitRefused", 0)
        .read_only_plain()
        .doc("pvAccess: channels and requests refused because their connection held as many as it may (65,536 of each)"),
    ParamDef::int64("PvaMalformed", 0)
        .read_only_plain()
        .doc("pvAccess: messages that could not be decoded (the connection is closed)"),
];

fn count(v: impl TryInto<i64>) -> ParamValue {
    ParamValue::Int(v.try_into().unwrap_or(i64::MAX))
}

/// Copies the running servers' counters into `store` (the IOC port's).
pub fn update(store: &ParamStore, servers: &Servers) {
    let mut w: Vec<(usize, ParamValue)> = Vec::new();
    let mut put = |name: &str, v: ParamValue| {
        if let Some(i) = store.index(name) {
            w.push((i, v));
        }
    };
    if let Some(ca) = servers.ca.as_ref().and_then(|c| c.server()) {
        let (refused, forwarded) = ca.search_counts();
        put("CaConnections", count(ca.connections()));
        put("CaChannels", count(ca.channels()));
        put("CaSearchesRefused", count(refused));
        put("CaSearchesForwarded", count(forwarded));
        put("CaPartialTimeouts", count(ca.partial_timeouts()));
        put("CaPartialOverCap", count(ca.partial_over_cap()));
        put("CaSearchesLimited", count(ca.searches_limited()));
        put("CaLimitRefused", count(ca.limit_refusals()));
    }
    if let Some(pva) = servers.pva.as_ref().and_then(|p| p.server()) {
        let s = pva.stats();
        put("PvaConnections", count(s.connections));
        put("PvaChannels", count(s.channels));
        put("PvaMonitors", count(s.monitors));
        put("PvaSearchesRefused", count(s.searches_refused));
        put("PvaSearchesForwarded", count(s.searches_forwarded));
        put("PvaMalformed", count(s.malformed));
        put("PvaPartialTimeouts", count(s.partial_timeouts));
        put("PvaPartialOverCap", count(s.partial_over_cap));
        put("PvaSearchesLimited", count(s.searches_limited));
        put("PvaLimitRefused", count(s.limit_refusals));
    }
    store.set_many(&w);
}
