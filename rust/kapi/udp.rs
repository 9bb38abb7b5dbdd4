// SPDX-License-Identifier: GPL-2.0

//! A UDP tunnel socket (encapsulation receive: each datagram goes to a
//! callback in softirq context) and IPv4 transmission through the kernel's
//! routing and neighbour tables.

use super::skb::SkBuff;
use crate::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;

/// What receives the tunnel's datagrams.
pub trait UdpReceiver {
    /// Takes one datagram; `skb.data()` starts at its UDP header. Runs in
    /// softirq context.
    fn receive(skb: SkBuff);
}

/// A kernel UDP socket bound to a port of the initial network namespace,
/// delivering to `R`.
pub struct UdpTunnel {
    sock: NonNull<bindings::socket>,
}

// SAFETY: the socket is only released (once) through `drop`.
unsafe impl Send for UdpTunnel {}
// SAFETY: no shared access besides the pointer.
unsafe impl Sync for UdpTunnel {}

unsafe extern "C" fn receive_cb<R: UdpReceiver>(
    _sk: *mut bindings::sock,
    skb: *mut bindings::sk_buff,
) -> core::ffi::c_int {
    // SAFETY: the UDP layer hands the skb over; returning 0 says it was
    // consumed, and `R::receive` owns (and frees) it.
    if let Some(skb) = unsafe { SkBuff::from_raw(skb) } {
        R::receive(skb);
    }
    0
}

impl UdpTunnel {
    /// Binds `port` in the initial namespace; `EADDRINUSE` if another
    /// socket (rdma_rxe's) has it.
    pub fn open<R: UdpReceiver>(port: u16) -> Result<Self> {
        let mut err = 0;
        // SAFETY: creates and configures a kernel socket; `receive_cb::<R>`
        // stays valid while the module is loaded, and the socket is closed
        // before that ends.
        let sock = unsafe {
            bindings::srnic_udp_tunnel_open(
                bindings::srnic_init_net(),
                port,
                Some(receive_cb::<R>),
                &mut err,
            )
        };
        match NonNull::new(sock) {
            Some(sock) => Ok(Self { sock }),
            None => Err(Error::from_errno(if err < 0 { err } else { -12 })),
        }
    }
}

impl Drop for UdpTunnel {
    fn drop(&mut self) {
        // SAFETY: opened in `open`, released once. Receive callbacks run
        // under RCU; waiting for a grace period lets any running one finish
        // before the module's code may go.
        unsafe { bindings::srnic_udp_tunnel_close(self.sock.as_ptr()) };
        super::rcu::synchronize();
    }
}

/// A route to an IPv4 destination, holding its reference.
pub struct Route4(NonNull<bindings::rtable>);

impl Route4 {
    /// Looks up the route from `saddr` to `daddr` (network order) with
    /// `tos`, out of interface `oif` (0: any).
    pub fn lookup(daddr: [u8; 4], saddr: [u8; 4], tos: u8, oif: i32) -> Result<Self> {
        let mut err = 0;
        // SAFETY: a route lookup in the initial namespace; the result holds
        // a reference we drop in `drop` (or hand to `transmit`).
        let rt = unsafe {
            bindings::srnic_route4(
                bindings::srnic_init_net(),
                u32::from_ne_bytes(daddr),
                u32::from_ne_bytes(saddr),
                tos,
                oif,
                &mut err,
            )
        };
        NonNull::new(rt)
            .map(Self)
            .ok_or_else(|| Error::from_errno(if err < 0 { err } else { -22 }))
    }

    /// The interface the route leaves through.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: our route is valid while we hold it.
        unsafe { bindings::srnic_rt_dev_ifindex(self.0.as_ptr()) }
    }
}

impl Drop for Route4 {
    fn drop(&mut self) {
        // SAFETY: our reference, dropped once.
        unsafe { bindings::srnic_rt_put(self.0.as_ptr()) };
    }
}

/// Picks the IPv4 identification for the header at the start of `skb`'s
/// data (it must be there: the ICRC covers it).
pub fn select_ident(skb: &mut SkBuff) {
    let data = skb.data().as_ptr().cast_mut().cast::<bindings::iphdr>();
    // SAFETY: the caller pushed a complete IPv4 header at `data`.
    unsafe { bindings::srnic_ip4_select_ident(bindings::srnic_init_net(), skb.as_raw(), data) };
}

/// Sends `skb`, whose data is a complete IPv4 packet, along `route`;
/// `EAGAIN` if it was dropped for lack of room on the way out.
pub fn transmit(skb: SkBuff, route: Route4) -> Result {
    let rt = route.0.as_ptr();
    core::mem::forget(route);
    // SAFETY: hands the skb and the route reference to the IP stack, which
    // owns both from here on.
    let ret = unsafe {
        bindings::srnic_ip4_xmit(
            bindings::srnic_init_net(),
            core::ptr::null_mut(),
            skb.into_raw(),
            rt,
        )
    };
    // Positive: dropped on the way out (queue full).
    if ret > 0 {
        return Err(EAGAIN);
    }
    kernel::error::to_result(ret)
}
