//! The UDP socket a server takes searches on.

use std::io::{self, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;

use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrIn};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// The group every server on the host joins on the loopback interface (as pvxs and
/// pvAccessCPP do): a unicast search passed on to it reaches them all.
pub const LOCAL_GROUP: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 128);

/// One received datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub len: usize,
    pub src: SocketAddr,
    /// The address it was sent to (a local address, a broadcast address or a group); `None`
    /// when the kernel did not say.
    pub dst: Option<Ipv4Addr>,
}

impl Datagram {
    /// Sent to this host alone (not broadcast, not to a group): the kernel hands such a
    /// datagram to one of the sockets sharing the port, so the others never see it.
    pub fn is_unicast(&self) -> bool {
        self.dst.is_some_and(|d| !crate::ifaces::is_broadcast(d))
    }

    /// Passed on by a server of this host through [`LOCAL_GROUP`].
    pub fn is_forwarded(&self) -> bool {
        self.dst == Some(LOCAL_GROUP) && self.src.ip().is_loopback()
    }
}

/// The search socket: IPv4 wildcard, SO_REUSEADDR, IP_PKTINFO, [`LOCAL_GROUP`] joined on
/// loopback and set as the interface for the group.
pub struct DiscoverySocket {
    sock: UdpSocket,
    port: u16,
    in_group: bool,
}

/// Whether a datagram sent to the group through loopback comes back (a firewall or a kernel
/// without multicast on `lo` would swallow it, and with it every unicast search passed on).
/// A second member listens, so nothing is taken from the socket's own queue; the probe is an
/// empty datagram, which every server ignores.
fn probe_group(sock: &std::net::UdpSocket, port: u16) -> io::Result<()> {
    use socket2::{Domain, Protocol, Socket, Type};
    let probe = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    probe.set_reuse_address(true)?;
    probe.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)).into())?;
    probe.join_multicast_v4(&LOCAL_GROUP, &Ipv4Addr::LOCALHOST)?;
    let probe: std::net::UdpSocket = probe.into();
    probe.set_read_timeout(Some(std::time::Duration::from_millis(250)))?;
    sock.send_to(&[], (LOCAL_GROUP, port))?;
    let mut buf = [0u8; 1];
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(250);
    while std::time::Instant::now() < deadline {
        match probe.recv_from(&mut buf) {
            Ok((0, from)) if from.ip().is_loopback() => return Ok(()),
            Ok(_) => continue,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut =>
            {
                break
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "no datagram came back",
    ))
}

impl DiscoverySocket {
    /// Bind `0.0.0.0:port` (0: a free port). Call inside the Tokio runtime that will poll it.
    pub fn bind(port: u16) -> io::Result<DiscoverySocket> {
        use socket2::{Domain, Protocol, Socket, Type};
        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        let sock = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        sock.set_reuse_address(true)?;
        sock.set_broadcast(true)?;
        sock.set_nonblocking(true)?;
        sock.bind(&addr.into())?;
        let std_sock: std::net::UdpSocket = sock.into();
        setsockopt(&std_sock, sockopt::Ipv4PacketInfo, &true).map_err(io::Error::from)?;
        let sock2 = socket2::SockRef::from(&std_sock);
        // Without the group (a kernel or sandbox that refuses it) the server still answers
        // what reaches it directly; only the unicast fan-out to other servers is lost.
        let port = std_sock.local_addr()?.port();
        let in_group = sock2
            .join_multicast_v4(&LOCAL_GROUP, &Ipv4Addr::LOCALHOST)
            .and_then(|()| sock2.set_multicast_if_v4(&Ipv4Addr::LOCALHOST))
            .and_then(|()| sock2.set_multicast_loop_v4(true))
            .and_then(|()| probe_group(&std_sock, port))
            .map_err(|e| {
                tracing::warn!(
                    "the loopback group {LOCAL_GROUP} does not work here ({e}): a unicast search \
                     reaches only one of the servers sharing UDP port {port}"
                )
            })
            .is_ok();
        Ok(DiscoverySocket {
            sock: UdpSocket::from_std(std_sock)?,
            port,
            in_group,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the socket joined [`LOCAL_GROUP`] (a unicast search can be passed on).
    pub fn in_group(&self) -> bool {
        self.in_group
    }

    /// The next datagram, with its source and destination.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<Datagram> {
        let fd = self.sock.as_raw_fd();
        self.sock
            .async_io(Interest::READABLE, || {
                let mut cmsg = nix::cmsg_space!(nix::libc::in_pktinfo);
                let mut iov = [IoSliceMut::new(buf)];
                let msg = recvmsg::<SockaddrIn>(fd, &mut iov, Some(&mut cmsg), MsgFlags::empty())
                    .map_err(io::Error::from)?;
                let mut dst = None;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::Ipv4PacketInfo(info) = c {
                            dst = Some(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr)));
                        }
                    }
                }
                let src = msg
                    .address
                    .map(|a| SocketAddr::V4(SocketAddrV4::new(a.ip(), a.port())))
                    .unwrap_or_else(|| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
                Ok(Datagram {
                    len: msg.bytes,
                    src,
                    dst,
                })
            })
            .await
    }

    pub async fn send_to(&self, bytes: &[u8], dest: SocketAddr) -> io::Result<usize> {
        self.sock.send_to(bytes, dest).await
    }

    /// Send to [`LOCAL_GROUP`] at our port, through loopback: every server of the host that
    /// shares the port receives it (this one too).
    pub async fn send_to_group(&self, bytes: &[u8]) -> io::Result<usize> {
        self.sock
            .send_to(bytes, SocketAddr::from((LOCAL_GROUP, self.port)))
            .await
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// The next non-empty datagram (the start-up probes are empty).
    async fn next(s: &DiscoverySocket, buf: &mut [u8]) -> Datagram {
        loop {
            let d = s.recv(buf).await.unwrap();
            if d.len > 0 {
                return d;
            }
        }
    }

    #[test]
    fn destination_is_reported_and_the_group_reaches_every_sharer() {
        rt().block_on(async {
            let a = DiscoverySocket::bind(0).unwrap();
            let b = DiscoverySocket::bind(a.port()).unwrap();
            assert!(a.in_group() && b.in_group(), "the loopback group probe");
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            tx.send_to(b"uni", ("127.0.0.1", a.port())).unwrap();
            // A unicast reaches exactly one of the two sharers, with its destination.
            let (mut ba, mut bb) = ([0u8; 64], [0u8; 64]);
            let (got, buf) = tokio::select! {
                d = next(&a, &mut ba) => (d, &ba),
                d = next(&b, &mut bb) => (d, &bb),
            };
            assert_eq!(&buf[..got.len], b"uni");
            let mut buf = [0u8; 64];
            assert_eq!(got.dst, Some(Ipv4Addr::LOCALHOST));
            assert!(got.is_unicast() && !got.is_forwarded());
            assert_eq!(got.src, tx.local_addr().unwrap());
            // Through the group, both get it.
            a.send_to_group(b"all").await.unwrap();
            for s in [&a, &b] {
                let d = tokio::time::timeout(Duration::from_secs(2), next(s, &mut buf))
                    .await
                    .expect("group datagram");
                assert_eq!(&buf[..d.len], b"all");
                assert_eq!(d.dst, Some(LOCAL_GROUP));
                assert!(d.is_forwarded() && !d.is_unicast());
            }
        });
    }
}
