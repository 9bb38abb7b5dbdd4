// SPDX-License-Identifier: GPL-2.0

//! InfiniBand path MTUs and how they follow the carrier netdev's MTU.

/// The IB MTU enumeration (`enum ib_mtu`): 256 << (value - 1) bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl IbMtu {
    /// Every IB MTU, smallest first.
    pub const ALL: [IbMtu; 5] = [
        IbMtu::Mtu256,
        IbMtu::Mtu512,
        IbMtu::Mtu1024,
        IbMtu::Mtu2048,
        IbMtu::Mtu4096,
    ];

    /// The payload size in bytes.
    pub fn bytes(self) -> u32 {
        256 << (self as u32 - 1)
    }
}

/// The most a RoCEv2 packet adds around its payload inside the netdev MTU:
/// an IPv6 header (40, larger than IPv4's 20), UDP (8), BTH (12), the
/// largest extended header (AtomicETH, 28; RETH plus ImmDt is only 20) and
/// the ICRC (4).
pub const ROCEV2_MAX_OVERHEAD: u32 = 40 + 8 + 12 + 28 + 4;

/// The largest IB MTU whose packets fit in a netdev MTU of `netdev_mtu`
/// bytes, or `None` if not even 256 bytes fit (such a netdev cannot carry
/// RoCE).
pub fn active_mtu_for_netdev(netdev_mtu: u32) -> Option<IbMtu> {
    let room = netdev_mtu.checked_sub(ROCEV2_MAX_OVERHEAD)?;
    IbMtu::ALL
        .iter()
        .rev()
        .copied()
        .find(|mtu| mtu.bytes() <= room)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(IbMtu::Mtu256.bytes(), 256);
        assert_eq!(IbMtu::Mtu4096.bytes(), 4096);
    }

    #[test]
    fn common_netdev_mtus() {
        assert_eq!(active_mtu_for_netdev(1500), Some(IbMtu::Mtu1024));
        assert_eq!(active_mtu_for_netdev(9000), Some(IbMtu::Mtu4096));
        assert_eq!(active_mtu_for_netdev(4200), Some(IbMtu::Mtu4096));
        assert_eq!(active_mtu_for_netdev(4000), Some(IbMtu::Mtu2048));
        assert_eq!(active_mtu_for_netdev(1280), Some(IbMtu::Mtu1024));
        assert_eq!(active_mtu_for_netdev(1100), Some(IbMtu::Mtu512));
    }

    #[test]
    fn every_netdev_mtu_gets_the_largest_fitting_ib_mtu() {
        let mut previous = None;
        for netdev_mtu in 0..=u32::from(u16::MAX) {
            let chosen = active_mtu_for_netdev(netdev_mtu);
            // Never shrinks as the netdev MTU grows.
            assert!(chosen >= previous, "netdev MTU {netdev_mtu}");
            previous = chosen;
            match chosen {
                Some(mtu) => {
                    assert!(mtu.bytes() + ROCEV2_MAX_OVERHEAD <= netdev_mtu);
                    // The next size up would not fit.
                    if let Some(next) = IbMtu::ALL.iter().find(|m| **m > mtu) {
                        assert!(next.bytes() + ROCEV2_MAX_OVERHEAD > netdev_mtu);
                    }
                }
                None => assert!(netdev_mtu < IbMtu::Mtu256.bytes() + ROCEV2_MAX_OVERHEAD),
            }
        }
    }

    #[test]
    fn boundaries() {
        let exact = |mtu: IbMtu| mtu.bytes() + ROCEV2_MAX_OVERHEAD;
        for mtu in IbMtu::ALL {
            assert_eq!(active_mtu_for_netdev(exact(mtu)), Some(mtu));
        }
        assert_eq!(active_mtu_for_netdev(exact(IbMtu::Mtu256) - 1), None);
        assert_eq!(active_mtu_for_netdev(0), None);
        assert_eq!(active_mtu_for_netdev(u32::MAX), Some(IbMtu::Mtu4096));
    }
}
