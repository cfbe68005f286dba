//! What makes a server a host on a real link: it answers ARP requests,
//! IPv6 neighbour solicitations and ICMP/ICMPv6 echo requests for its
//! addresses with its port's MAC, and sets aside frames addressed to
//! someone else, so a kernel peer needs no static neighbour entry, `ping`
//! works, and only the application's own traffic reaches the application.
//!
//! [`Host::process`] looks at a frame and either answers it in place
//! ([`HostAction::Reply`]: send it back), drops it
//! ([`HostAction::Drop`], counted) or leaves it to the application
//! ([`HostAction::Pass`]). [`Host::respond`] does the same for the reply
//! drivers, whose requests are read-only: a frame to answer is copied into
//! the response buffer first (answers are rare; the application's frames
//! are not copied). A host without addresses passes every frame, which is
//! how the servers behave without `--ip`.
//!
//! # What a frame must be to pass
//!
//! Its Ethernet destination is the port's MAC, broadcast, or an IPv6
//! multicast address (33:33:...); an IPv4 packet is addressed to one of the
//! host's IPv4 addresses; an IPv6 packet to one of its IPv6 addresses.
//! ICMP, ICMPv6 and ARP never pass: they are answered or dropped.
//!
//! # Answers
//!
//! * ARP request for one of the addresses: the reply (RFC 826), from the
//!   port's MAC to the requester's.
//! * Neighbour solicitation (RFC 4861 section 7.1.1 checks: hop limit 255,
//!   code 0, valid checksum, target not multicast) for one of the IPv6
//!   addresses: a solicited advertisement with the override flag and a
//!   target link-layer address option, to the solicitation's source. A
//!   solicitation from the unspecified address (duplicate address
//!   detection) is not answered: its answer would be larger than the
//!   frame, and answering is only useful when two hosts share an address.
//!   Nor is a multicast solicitation without room for the option.
//! * ICMP echo request to an IPv4 address, ICMPv6 echo request to an
//!   IPv6 address: the echo reply with the same identifier, sequence
//!   number and data, hop limit 64, checksums recomputed.
//!
//! Requests with a wrong checksum are dropped and counted as malformed,
//! as a kernel would drop them. Every answer has the length of the frame
//! it answers (an advertisement may be shorter than its solicitation: the
//! rest is Ethernet padding, zeroed).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::arp::{self, ArpPacket};
use super::ethernet::{self, EthernetFrame, MacAddr};
use super::icmp::{self, IcmpPacket};
use super::icmpv6::{self, Icmpv6Packet};
use super::ipv4::{Ipv4Packet, PROTO_ICMP};
use super::ipv6::{self, Ipv6Packet, NEXT_HEADER_ICMPV6};

/// What to do with a frame after [`Host::process`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAction {
    /// The frame was turned into the answer in place: send it back.
    Reply,
    /// Not for the application (or nothing to answer): dropped, counted.
    Drop,
    /// The application's traffic: hand it on, unchanged.
    Pass,
}

/// What [`Host::respond`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostReply {
    /// The answer is in the response buffer, this many bytes: send it.
    Reply(usize),
    /// Dropped, counted.
    Drop,
    /// The application's traffic.
    Pass,
}

/// Counters of a [`Host`]. Every frame the host looked at is in exactly
/// one of them, or passed to the application.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostStats {
    /// ARP requests answered.
    pub arp_replies: u64,
    /// Neighbour solicitations answered (advertisements sent).
    pub nd_replies: u64,
    /// ICMP echo requests answered.
    pub icmp_echo_replies: u64,
    /// ICMPv6 echo requests answered.
    pub icmpv6_echo_replies: u64,
    /// Frames addressed to another MAC or IP (including ARP for other
    /// addresses and multicast the host does not listen to).
    pub not_for_us: u64,
    /// Frames for the host that it has nothing to answer with: other ICMP
    /// types, ARP replies, duplicate address probes, other EtherTypes.
    pub ignored: u64,
    /// Frames for the host that are too short, inconsistent or carry a
    /// wrong checksum.
    pub malformed: u64,
}

impl HostStats {
    /// All requests answered.
    pub fn answered(&self) -> u64 {
        self.arp_replies + self.nd_replies + self.icmp_echo_replies + self.icmpv6_echo_replies
    }

    /// All frames dropped.
    pub fn dropped(&self) -> u64 {
        self.not_for_us + self.ignored + self.malformed
    }
}

/// What a frame is, decided without changing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Arp,
    Echo4,
    Echo6,
    /// A solicitation to answer; whether the answer carries the option.
    Solicit {
        option: bool,
    },
    Pass,
    NotForUs,
    Ignored,
    Malformed,
}

/// A port's identity on its link: its MAC and the addresses it answers
/// for (at most a handful; looked up linearly).
#[derive(Clone, Debug)]
pub struct Host {
    mac: MacAddr,
    ipv4: Vec<Ipv4Addr>,
    ipv6: Vec<Ipv6Addr>,
    /// Solicited-node multicast addresses of `ipv6`.
    solicited: Vec<Ipv6Addr>,
    stats: HostStats,
}

impl Host {
    /// A host with MAC `mac` answering for `addrs` (none: pass every frame).
    pub fn new(mac: MacAddr, addrs: &[IpAddr]) -> Self {
        let mut ipv4 = Vec::new();
        let mut ipv6 = Vec::new();
        for a in addrs {
            match a {
                IpAddr::V4(a) if !ipv4.contains(a) => ipv4.push(*a),
                IpAddr::V6(a) if !ipv6.contains(a) => ipv6.push(*a),
                _ => {}
            }
        }
        let solicited = ipv6.iter().map(ipv6::solicited_node).collect();
        Host {
            mac,
            ipv4,
            ipv6,
            solicited,
            stats: HostStats::default(),
        }
    }

    /// The port's MAC.
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// Whether the host has addresses (and so filters and answers).
    pub fn is_active(&self) -> bool {
        !self.ipv4.is_empty() || !self.ipv6.is_empty()
    }

    /// Counters so far.
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// Answers `frame` in place, drops it, or passes it on.
    #[inline]
    pub fn process(&mut self, frame: &mut [u8]) -> HostAction {
        if !self.is_active() {
            return HostAction::Pass;
        }
        match self.classify(frame) {
            Class::Pass => HostAction::Pass,
            c => {
                if self.answer(frame, c) {
                    HostAction::Reply
                } else {
                    HostAction::Drop
                }
            }
        }
    }

    /// [`Host::process`] for a read-only `request`: an answer is written
    /// into `response` (a copy of the request, answered in place).
    #[inline]
    pub fn respond(&mut self, request: &[u8], response: &mut [u8]) -> HostReply {
        if !self.is_active() {
            return HostReply::Pass;
        }
        let c = self.classify(request);
        if c == Class::Pass {
            return HostReply::Pass;
        }
        let n = request.len();
        let Some(out) = response.get_mut(..n) else {
            self.stats.malformed += 1;
            return HostReply::Drop;
        };
        out.copy_from_slice(request);
        if self.answer(out, c) {
            HostReply::Reply(n)
        } else {
            HostReply::Drop
        }
    }

    /// Counts a drop of class `c`, or turns `frame` into its answer.
    /// Returns whether there is an answer to send.
    fn answer(&mut self, frame: &mut [u8], c: Class) -> bool {
        let st = &mut self.stats;
        match c {
            Class::Pass => return false,
            Class::NotForUs => st.not_for_us += 1,
            Class::Ignored => st.ignored += 1,
            Class::Malformed => st.malformed += 1,
            Class::Arp => {
                answer_arp(frame, self.mac);
                st.arp_replies += 1;
                return true;
            }
            Class::Echo4 => {
                answer_echo4(frame, self.mac);
                st.icmp_echo_replies += 1;
                return true;
            }
            Class::Echo6 => {
                answer_echo6(frame, self.mac);
                st.icmpv6_echo_replies += 1;
                return true;
            }
            Class::Solicit { option } => {
                answer_solicit(frame, self.mac, option);
                st.nd_replies += 1;
                return true;
            }
        }
        false
    }

    fn classify(&self, frame: &[u8]) -> Class {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return Class::Malformed;
        };
        let dst = eth.dst_addr();
        let multicast = dst.is_multicast();
        if dst != self.mac && dst != MacAddr::BROADCAST && !dst.is_ipv6_multicast() {
            return Class::NotForUs;
        }
        match eth.ethertype() {
            ethernet::ETHERTYPE_IPV4 => self.classify_ipv4(eth.payload(), multicast),
            ethernet::ETHERTYPE_IPV6 => self.classify_ipv6(eth.payload(), multicast),
            ethernet::ETHERTYPE_ARP => {
                let Ok(a) = ArpPacket::new_checked(eth.payload()) else {
                    return Class::Malformed;
                };
                if !self.ipv4.contains(&a.target_ip()) {
                    Class::NotForUs
                } else if a.operation() == arp::OP_REQUEST {
                    Class::Arp
                } else {
                    Class::Ignored
                }
            }
            _ => Class::Ignored,
        }
    }

    fn classify_ipv4(&self, packet: &[u8], l2_multicast: bool) -> Class {
        let Ok(ip) = Ipv4Packet::new_checked(packet) else {
            return Class::Malformed;
        };
        if !self.ipv4.contains(&ip.dst_addr()) {
            return Class::NotForUs;
        }
        if ip.protocol() != PROTO_ICMP {
            return Class::Pass;
        }
        if !ip.verify_checksum() {
            return Class::Malformed;
        }
        let Ok(m) = IcmpPacket::new_checked(ip.payload()) else {
            return Class::Malformed;
        };
        if ip.is_fragment() || l2_multicast || m.msg_type() != icmp::ECHO_REQUEST {
            return Class::Ignored;
        }
        if m.code() != 0 || !m.verify_checksum() {
            return Class::Malformed;
        }
        Class::Echo4
    }

    fn classify_ipv6(&self, packet: &[u8], l2_multicast: bool) -> Class {
        let Ok(ip) = Ipv6Packet::new_checked(packet) else {
            return Class::Malformed;
        };
        let dst = ip.dst_addr();
        let unicast = self.ipv6.contains(&dst);
        if !unicast && !self.solicited.contains(&dst) && dst != ipv6::ALL_NODES {
            return Class::NotForUs;
        }
        if ip.next_header() != NEXT_HEADER_ICMPV6 {
            return if unicast { Class::Pass } else { Class::Ignored };
        }
        let Ok(m) = Icmpv6Packet::new_checked(ip.payload()) else {
            return Class::Malformed;
        };
        let (src, t) = (ip.src_addr(), m.msg_type());
        if t != icmpv6::ECHO_REQUEST && t != icmpv6::NEIGHBOR_SOLICIT {
            return Class::Ignored;
        }
        if m.code() != 0 || !m.verify_checksum(&src, &dst) {
            return Class::Malformed;
        }
        if t == icmpv6::ECHO_REQUEST {
            return if unicast && !l2_multicast {
                Class::Echo6
            } else {
                Class::Ignored
            };
        }
        // A neighbour solicitation (RFC 4861 section 7.1.1).
        let (Ok(target), Ok(_)) = (m.nd_target(), m.nd_lladdr_option(icmpv6::OPT_SOURCE_LLADDR))
        else {
            return Class::Malformed;
        };
        if ip.hop_limit() != 255 || target.is_multicast() {
            return Class::Malformed;
        }
        if !self.ipv6.contains(&target) {
            return Class::NotForUs;
        }
        if src.is_unspecified() {
            return Class::Ignored;
        }
        // The answer takes the solicitation's place: with the option if
        // the frame has room for it, without only to a unicast one
        // (RFC 4861 section 7.2.4).
        let room = packet.len() - ipv6::HEADER_LEN;
        if room >= icmpv6::ND_LEN + icmpv6::LLADDR_OPTION_LEN {
            Class::Solicit { option: true }
        } else if unicast {
            Class::Solicit { option: false }
        } else {
            Class::Ignored
        }
    }
}

/// Ethernet addresses of an answer: back to the sender, from `mac`.
fn answer_ethernet(frame: &mut [u8], mac: MacAddr) {
    let mut eth = EthernetFrame::new_unchecked(frame);
    let sender = eth.src_addr();
    eth.set_dst_addr(sender);
    eth.set_src_addr(mac);
}

fn answer_arp(frame: &mut [u8], mac: MacAddr) {
    answer_ethernet(frame, mac);
    ArpPacket::new_unchecked(&mut frame[ethernet::HEADER_LEN..]).make_reply(mac);
}

fn answer_echo4(frame: &mut [u8], mac: MacAddr) {
    answer_ethernet(frame, mac);
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]);
    ip.swap_addrs();
    ip.set_ttl(64);
    ip.fill_checksum();
    let mut m = IcmpPacket::new_unchecked(ip.payload_mut());
    m.set_msg_type(icmp::ECHO_REPLY);
    m.fill_checksum();
}

fn answer_echo6(frame: &mut [u8], mac: MacAddr) {
    answer_ethernet(frame, mac);
    let mut ip = Ipv6Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]);
    ip.swap_addrs();
    ip.set_hop_limit(64);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let mut m = Icmpv6Packet::new_unchecked(ip.payload_mut());
    m.set_msg_type(icmpv6::ECHO_REPLY);
    m.fill_checksum(&src, &dst);
}

fn answer_solicit(frame: &mut [u8], mac: MacAddr, option: bool) {
    answer_ethernet(frame, mac);
    let l3 = &mut frame[ethernet::HEADER_LEN..];
    let mut ip = Ipv6Packet::new_unchecked(&mut *l3);
    let target = Icmpv6Packet::new_unchecked(ip.payload())
        .nd_target()
        .expect("classified as a solicitation");
    let to = ip.src_addr();
    let len = icmpv6::ND_LEN + if option { icmpv6::LLADDR_OPTION_LEN } else { 0 };
    ip.set_src_addr(target);
    ip.set_dst_addr(to);
    ip.set_hop_limit(255);
    ip.set_payload_len(len as u16);
    let end = ipv6::HEADER_LEN + len;
    // What the solicitation had beyond the advertisement is now padding.
    l3[end..].fill(0);
    let mut m = Icmpv6Packet::new_unchecked(&mut l3[ipv6::HEADER_LEN..end]);
    m.write_neighbor_advert(
        &target,
        icmpv6::FLAG_SOLICITED | icmpv6::FLAG_OVERRIDE,
        option.then_some(mac),
    )
    .expect("the length was chosen for it");
    m.fill_checksum(&target, &to);
}

#[cfg(test)]
mod tests;
