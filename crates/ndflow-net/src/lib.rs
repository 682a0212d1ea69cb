//! The host's network as the EPICS servers and clients of ndflow see it.
//!
//! - [`ifaces`]: the IPv4 interfaces, their broadcast addresses, and whether an address is
//!   this host's (cached; interfaces come and go).
//! - [`Listen`]: whom a server serves — this host only (the default), or other hosts too.
//! - [`DiscoverySocket`]: the UDP search socket every server binds the same way: the wildcard
//!   address with SO_REUSEADDR (so several servers on a host share the port and a local
//!   client's broadcast arrives), the destination address of each datagram (IP_PKTINFO: was it
//!   sent to us alone, or broadcast?), and membership of the loopback multicast group
//!   224.0.0.128, through which a server passes a unicast search on to every other server of
//!   the host (the kernel gives a unicast datagram to one socket only).
//! - [`identity`]: the login name clients announce.
//! - [`ReplyLimiter`]: search replies rate-limited per client address and in all.

pub mod identity;
pub mod ifaces;
mod limit;
mod listen;
mod socket;

pub use limit::ReplyLimiter;
pub use listen::{Listen, ListenError};
pub use socket::{Datagram, DiscoverySocket, LOCAL_GROUP};
