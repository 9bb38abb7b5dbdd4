// SPDX-License-Identifier: GPL-2.0

//! UDP tunnel sockets (encapsulation receive: each datagram goes to a
//! callback in softirq context) and IPv4 and IPv6 transmission through the
//! kernel's routing and neighbour tables.

use super::net::Net;
use super::skb::SkBuff;
use crate::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::Arc;

/// What receives a tunnel's datagrams.
pub trait UdpReceiver: Sync {
    /// Takes one datagram; `skb.data()` starts at its UDP header. Runs in
    /// softirq context.
    fn receive(&self, skb: SkBuff);
}

/// The address family of a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6 only.
    V6,
}

/// A kernel UDP socket bound to a port of a namespace, delivering to a
/// receiver it keeps alive.
///
/// # Invariants
///
/// `sock` is an open tunnel socket whose user data points at the `R` that
/// `_receiver` holds, and whose receive callback is `receive_cb::<R>`.
pub struct UdpTunnel<R: UdpReceiver> {
    sock: NonNull<bindings::socket>,
    /// What the socket delivers to; dropped only after the socket closed
    /// and its running callbacks finished.
    _receiver: Arc<R>,
}

// SAFETY: the socket is only released (once) through `drop`; the receiver
// is `Sync`, and shared through an `Arc`, which `Send` and `Sync` allow.
unsafe impl<R: UdpReceiver + Send> Send for UdpTunnel<R> {}
// SAFETY: no shared access besides the pointer and the `Arc`.
unsafe impl<R: UdpReceiver + Send> Sync for UdpTunnel<R> {}

/// # Safety
///
/// Called only by the UDP layer for a tunnel socket this module opened, with
/// an skb it owns.
unsafe extern "C" fn receive_cb<R: UdpReceiver>(
    sk: *mut bindings::sock,
    skb: *mut bindings::sk_buff,
) -> core::ffi::c_int {
    // SAFETY: the UDP layer hands the skb over; returning 0 says it was
    // consumed, and `R::receive` owns (and frees) it, or `SkBuff` frees it
    // on drop.
    let Some(skb) = (unsafe { SkBuff::from_raw(skb) }) else {
        return 0;
    };
    // SAFETY: `sk` is our tunnel socket, whose user data `open` set to the
    // `R` of the tunnel's `Arc`, which the tunnel holds until the socket
    // is closed and its callbacks have finished.
    let receiver = unsafe { bindings::srnic_sk_user_data(sk) }.cast::<R>();
    // SAFETY: as above; the pointer is valid or null.
    if let Some(receiver) = unsafe { receiver.as_ref() } {
        receiver.receive(skb);
    }
    0
}

impl<R: UdpReceiver> UdpTunnel<R> {
    /// Binds `port` of `family` in `net`, delivering to `receiver`;
    /// `EADDRINUSE` if another socket (rdma_rxe's) has it.
    pub fn open(net: &Net, family: Family, port: u16, receiver: Arc<R>) -> Result<Self> {
        let mut err = 0;
        let target: *const R = &*receiver;
        // SAFETY: creates and configures a kernel socket; `receive_cb::<R>` stays valid while the
        // module is loaded, the socket is closed before that ends, and the tunnel keeps `receiver`
        // alive (by the `Arc`, whose data never moves) until the socket is closed.
        let sock = unsafe {
            bindings::srnic_udp_tunnel_open(
                net.as_raw(),
                family == Family::V6,
                port,
                Some(receive_cb::<R>),
                target.cast_mut().cast(),
                &mut err,
            )
        };
        match NonNull::new(sock) {
            Some(sock) => Ok(Self {
                sock,
                _receiver: receiver,
            }),
            None => Err(Error::from_errno(if err < 0 { err } else { -12 })),
        }
    }
}

impl<R: UdpReceiver> Drop for UdpTunnel<R> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant, ours, released once. Receive callbacks run under RCU;
        // waiting for a grace period lets any running one finish before its receiver (dropped after
        // this, with the fields) or the module's code may go.
        unsafe { bindings::srnic_udp_tunnel_close(self.sock.as_ptr()) };
        // SAFETY: a tunnel is closed from the module's namespace exit or
        // module exit, process context without a read-side section open
        // (a receive callback, which runs under RCU, never drops one).
        unsafe { super::rcu::synchronize() };
    }
}

/// A route to a destination, holding its reference.
///
/// # Invariants
///
/// `dst` is a route of `family` on which this value holds one reference.
pub struct Route {
    dst: NonNull<bindings::dst_entry>,
    family: Family,
}

// SAFETY: the reference a `Route` holds is counted atomically and may be
// given back on any CPU, in any context (`dst_release` frees the entry after
// an RCU grace period), so a `Route` may move to another thread.
unsafe impl Send for Route {}

/// The route `dst` (NULL: none, for the reason `err`), owned from here on.
///
/// # Safety
///
/// `dst` is NULL or a route of `family` whose reference the caller hands
/// over (`Route` releases it).
unsafe fn route_from(
    dst: *mut bindings::dst_entry,
    err: core::ffi::c_int,
    family: Family,
) -> Result<Route> {
    NonNull::new(dst)
        .map(|dst| Route { dst, family })
        .ok_or_else(|| Error::from_errno(if err < 0 { err } else { -22 }))
}

impl Route {
    /// The IPv4 route from `saddr` to `daddr` (network order) with `tos`,
    /// out of interface `oif` (0: any).
    pub fn lookup4(net: &Net, daddr: [u8; 4], saddr: [u8; 4], tos: u8, oif: i32) -> Result<Self> {
        let mut err = 0;
        // SAFETY: a route lookup in a live namespace; the result holds a
        // reference we drop in `drop` (or hand to `transmit`).
        let dst = unsafe {
            bindings::srnic_route4(
                net.as_raw(),
                u32::from_ne_bytes(daddr),
                u32::from_ne_bytes(saddr),
                tos,
                oif,
                &mut err,
            )
        };
        // SAFETY: `srnic_route4` returns NULL or an IPv4 route with a
        // reference for us.
        unsafe { route_from(dst, err, Family::V4) }
    }

    /// The IPv6 route from `saddr` to `daddr` with a traffic class and
    /// flow label, out of interface `oif` (0: any; link-local addresses
    /// need it).
    pub fn lookup6(
        net: &Net,
        daddr: &[u8; 16],
        saddr: &[u8; 16],
        traffic_class: u8,
        flow_label: u32,
        oif: i32,
    ) -> Result<Self> {
        let mut err = 0;
        let daddr = in6_addr(daddr);
        let saddr = in6_addr(saddr);
        // SAFETY: as in `lookup4`; the addresses are read during the call.
        let dst = unsafe {
            bindings::srnic_route6(
                net.as_raw(),
                &daddr,
                &saddr,
                traffic_class,
                flow_label,
                oif,
                &mut err,
            )
        };
        // SAFETY: `srnic_route6` returns NULL or an IPv6 route with a
        // reference for us.
        unsafe { route_from(dst, err, Family::V6) }
    }

    /// Whether the route may be kept past the exit of its namespace (a
    /// plain IPv4 route): the dst_ops of an IPv6 route or an IPsec bundle
    /// are the namespace's, and go with it.
    pub fn outlives_namespace(&self) -> bool {
        // SAFETY: the reference we hold (type invariant) keeps it valid.
        unsafe { bindings::srnic_dst_outlives_namespace(self.dst.as_ptr()) }
    }

    /// Whether the route still holds: the routes have not changed since it
    /// was looked up, and its device is still there. A route kept from one
    /// send to the next is checked so before each use, as a connected
    /// socket's is.
    pub fn is_current(&self) -> bool {
        // Only IPv4 routes are checked so (an IPv6 route's check needs the
        // FIB's cookie, which no caller keeps): an IPv6 one never holds.
        if self.family != Family::V4 {
            return false;
        }
        // SAFETY: the reference we hold (type invariant) keeps the route
        // valid; the check takes and drops no reference.
        unsafe { bindings::srnic_dst_current(self.dst.as_ptr()) }
    }

    /// The interface the route leaves through.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: the reference we hold (type invariant) keeps it valid.
        unsafe { bindings::srnic_dst_dev_ifindex(self.dst.as_ptr()) }
    }

    /// Whether the destination is an address of this host (the route goes
    /// through the loopback interface).
    pub fn is_local(&self) -> bool {
        // SAFETY: the reference we hold (type invariant) keeps it valid.
        unsafe { bindings::srnic_dst_dev_is_loopback(self.dst.as_ptr()) }
    }

    /// Whether the route's device sends page fragments as they are
    /// (scatter-gather); before one that does not, the stack copies each
    /// fragmented skb into a linear one, so a sender copies at once.
    pub fn device_gathers(&self) -> bool {
        // SAFETY: the reference we hold (type invariant) keeps it valid.
        unsafe { bindings::srnic_dst_dev_gathers(self.dst.as_ptr()) }
    }
}

impl Clone for Route {
    fn clone(&self) -> Self {
        // SAFETY: the reference we hold (type invariant) keeps the route
        // valid; the clone takes a
        // reference of its own, which its `drop` gives back.
        let dst = unsafe { bindings::srnic_dst_clone(self.dst.as_ptr()) };
        Self {
            // `dst_clone` returns the entry it was given.
            dst: NonNull::new(dst).unwrap_or(self.dst),
            family: self.family,
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: the reference this value holds (type invariant), dropped
        // once.
        unsafe { bindings::srnic_dst_release(self.dst.as_ptr()) };
    }
}

fn in6_addr(bytes: &[u8; 16]) -> bindings::in6_addr {
    let mut addr = bindings::in6_addr::default();
    // The byte view of the address union covers all 16 bytes.
    addr.in6_u.u6_addr8 = *bytes;
    addr
}

/// The bytes of an IPv4 header, aligned as `struct iphdr` is.
#[repr(C, align(4))]
pub struct Ipv4HeaderBytes(pub [u8; 20]);

/// Sets the identification of `header`, a complete IPv4 header, to the
/// first of `count` consecutive ones reserved for datagrams from its source
/// to its destination, and returns it.
pub fn select_idents(net: &Net, header: &mut Ipv4HeaderBytes, count: u32) -> u16 {
    // SAFETY: `header` is 20 writable bytes with the alignment and layout
    // of `struct iphdr` (a complete IPv4 header), which the kernel reads
    // (addresses, protocol) and writes (identification).
    unsafe {
        bindings::srnic_ip4_select_idents(
            net.as_raw(),
            header.0.as_mut_ptr().cast::<bindings::iphdr>(),
            count,
        )
    };
    let [_, _, _, _, high, low, ..] = header.0;
    u16::from_be_bytes([high, low])
}

/// IP datagrams of one flow (addresses and ports) that pass the IP stack
/// as one: the first carries the others on its fragment list, marked as a
/// UDP GSO list, and the stack cuts them apart again before the device
/// driver, each with its own headers and payload. The stack rewrites only
/// the lengths, the IPv4 header checksum, and the IPv4 identifications,
/// which it numbers on from the first datagram's.
///
/// No datagram may be longer than the first (the stack checks only the
/// first against the path MTU, and takes the first's UDP payload length as
/// the list's segment size); the caller keeps to that. Shorter ones may
/// come anywhere: segmentation sets each datagram's IP and UDP lengths
/// from its own.
///
/// # Invariants
///
/// `head` holds an IP header of `network_len` bytes and a UDP header in its
/// linear part. `last` is NULL when `count` is 1, else the last of the
/// `count - 1` datagrams `push` chained onto `head`'s fragment list, which
/// `head` owns.
pub struct DatagramList {
    head: SkBuff,
    last: *mut bindings::sk_buff,
    count: u32,
    network_len: u32,
}

// SAFETY: `last` points into the list `head` owns.
unsafe impl Send for DatagramList {}

/// Whether `skb`'s linear part holds an IP header of `network_len` bytes
/// and a UDP header.
fn has_headers(skb: &SkBuff, network_len: u32) -> bool {
    skb.data().len() >= network_len as usize + 8
}

impl DatagramList {
    /// Bytes a list may have, as the stack counts it: its IPv4 total
    /// length, or its UDP length, must fit in 16 bits.
    pub const MAX_BYTES: usize = u16::MAX as usize;

    /// The list of `first`, a complete IP datagram whose `network_len`
    /// bytes of IP header and UDP header are in its linear part;
    /// `EINVAL` if they are not.
    pub fn new(first: SkBuff, network_len: u32) -> Result<Self> {
        if !has_headers(&first, network_len) {
            return Err(EINVAL);
        }
        Ok(Self {
            head: first,
            last: core::ptr::null_mut(),
            count: 1,
            network_len,
        })
    }

    /// How many datagrams the list holds.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The bytes the list hands to the IP stack: the first datagram whole,
    /// the UDP payloads of the others.
    pub fn bytes(&self) -> u32 {
        self.head.len()
    }

    /// Adds `skb`, a complete datagram with headers of the first one's
    /// shape (IP header length, UDP, in its linear part) and of its flow;
    /// `EINVAL` (and `skb` is freed) if its headers are not there.
    pub fn push(&mut self, skb: SkBuff) -> Result {
        if !has_headers(&skb, self.network_len) {
            return Err(EINVAL);
        }
        let skb = skb.into_raw();
        // SAFETY: both skbs are ours, `last` is the list's tail or null (type invariant), and `skb`
        // has its IP and UDP headers in its linear part (checked); the head takes ownership of
        // `skb`.
        unsafe {
            bindings::srnic_skb_chain_datagram(self.head.as_raw(), self.last, skb, self.network_len)
        };
        self.last = skb;
        self.count += 1;
        Ok(())
    }

    /// The skb to hand to the IP stack: the first datagram alone, or the
    /// list, whose UDP length then covers every datagram, as the stack
    /// expects of a list (segmentation sets each datagram's own again).
    pub fn into_skb(mut self) -> Result<SkBuff> {
        if self.count == 1 {
            return Ok(self.head);
        }
        if self.bytes() as usize > Self::MAX_BYTES {
            return Err(E2BIG);
        }
        let list_udp_len = self
            .bytes()
            .checked_sub(self.network_len)
            .and_then(|len| u16::try_from(len).ok())
            .ok_or(E2BIG)?;
        let at = self.network_len as usize + 4;
        let udp_len: &mut [u8; 2] = self
            .head
            .data_mut()
            .get_mut(at..at + 2)
            .and_then(|field| field.try_into().ok())
            .ok_or(EINVAL)?;
        let first_udp_len = u16::from_be_bytes(*udp_len);
        *udp_len = list_udp_len.to_be_bytes();
        let gso_size = u32::from(first_udp_len).checked_sub(8).ok_or(EINVAL)?;
        // SAFETY: by the type invariant, the head is ours and carries
        // `count - 1` datagrams on its fragment list, each as `push` chained
        // it.
        unsafe { bindings::srnic_skb_set_datagram_list(self.head.as_raw(), gso_size, self.count) };
        Ok(self.head)
    }
}

/// Sends `skb`, whose data is a complete IP packet of the route's family,
/// along `route`; `EAGAIN` if it was dropped for lack of room on the way
/// out.
pub fn transmit(net: &Net, skb: SkBuff, route: Route) -> Result {
    let dst = route.dst.as_ptr();
    let family = route.family;
    core::mem::forget(route);
    let (net, sk, skb) = (net.as_raw(), core::ptr::null_mut(), skb.into_raw());
    // SAFETY: hands the skb and the route reference to the IP stack, which
    // owns both from here on.
    let ret = unsafe {
        match family {
            Family::V4 => bindings::srnic_ip4_xmit(net, sk, skb, dst),
            Family::V6 => bindings::srnic_ip6_xmit(net, sk, skb, dst),
        }
    };
    // Positive: dropped on the way out (queue full).
    if ret > 0 {
        return Err(EAGAIN);
    }
    kernel::error::to_result(ret)
}
