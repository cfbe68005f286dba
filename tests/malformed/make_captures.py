#!/usr/bin/env python3
"""Writes capture files made by scapy, not by this project, into a directory.

    python3 make_captures.py DIR

Every file is the same on every run (fixed frames, fixed timestamps, a
seeded generator for the random bytes). The tests that replay them through
pktgen and the pcap port (pktgen/tests/malformed.rs,
tests/tests/malformed_pcap.rs) know what each one holds; the comment above
each file below says it too.
"""

import logging
import os
import random
import sys

# scapy warns about link types it did not choose; the files say what they are.
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, LLC, SNAP, CookedLinux, Dot1AD, Dot1Q, Dot3, Ether
from scapy.packet import Padding, Raw
from scapy.utils import PcapNgWriter, PcapWriter

SRC = "02:00:00:00:00:01"
DST = "02:00:00:00:00:02"
T0 = 1_700_000_000


def eth(ty=None):
    return Ether(src=SRC, dst=DST) if ty is None else Ether(src=SRC, dst=DST, type=ty)


def payload(n, seed):
    return Raw(bytes((seed + i) % 251 for i in range(n)))


def udp4(n, seed=0):
    """IPv4/UDP with an n-byte payload (frame: 42 + n bytes)."""
    return IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1000 + seed, dport=2000) / payload(n, seed)


def udp6(n, seed=0):
    """IPv6/UDP with an n-byte payload (frame: 62 + n bytes)."""
    return IPv6(src="fd00::1", dst="fd00::2") / UDP(sport=1000 + seed, dport=2000) / payload(n, seed)


def stamp(pkts):
    """Fixed timestamps, 10 us apart."""
    for i, p in enumerate(pkts):
        p.time = T0 + i / 100_000
    return pkts


def write(d, name, pkts, **kw):
    w = PcapWriter(os.path.join(d, name), sync=True, **kw)
    for p in stamp(pkts):
        w.write(p)
    w.close()


def write_raw(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_captures.py DIR")
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)

    # Controls: well-formed IPv4/UDP and IPv6/UDP, 60 to 1514 bytes.
    write(d, "ipv4_udp.pcap", [eth() / udp4(n, i) for i, n in enumerate([18, 58, 458, 1472])])
    write(d, "ipv6_udp.pcap", [eth() / udp6(n, i) for i, n in enumerate([18, 138, 1452])])
    # The same IPv4 frames in a nanosecond pcap, and in a big-endian one.
    write(d, "nanosecond.pcap", [eth() / udp4(n, i) for i, n in enumerate([18, 58, 458])], nano=True)
    write(d, "big_endian.pcap", [eth() / udp4(n, i) for i, n in enumerate([18, 58])], endianness=">")

    # 802.1Q VLAN (priority 3, VLAN 100), and QinQ: an 802.1ad S-tag
    # (0x88a8, VLAN 10) in front of an 802.1Q C-tag (VLAN 20).
    write(d, "vlan.pcap", [eth() / Dot1Q(prio=3, vlan=100) / udp4(n, i) for i, n in enumerate([14, 100, 1468])])
    write(
        d,
        "qinq.pcap",
        [eth(0x88A8) / Dot1AD(vlan=10) / Dot1Q(vlan=20) / udp4(n, i) for i, n in enumerate([10, 100, 1464])],
    )

    # Runts: shorter than 60 bytes but whole (IPv4/UDP without payload,
    # 42 B; ARP without padding, 42 B; 20 B and 14 B of an EtherType that
    # states no length), after a control frame.
    write(
        d,
        "short_frames.pcap",
        [
            eth() / udp4(18),
            eth() / udp4(0),
            eth() / ARP(hwsrc=SRC, psrc="10.0.0.1", pdst="10.0.0.2"),
            eth(0x88B6) / Raw(b"runt!!"),
            eth(0x88B6),
        ],
    )
    # Shorter than an Ethernet header: 13 bytes, as record 2 of 3.
    write(d, "runt_13.pcap", [eth() / udp4(18), Raw(bytes(eth() / udp4(18))[:13]), eth() / udp4(18, 1)], linktype=1)

    # IPv4 total length larger than the frame (1000 in a 100 B frame), as
    # record 2 of 3.
    write(d, "ipv4_len_long.pcap", [eth() / udp4(58), eth() / IP(len=1000) / UDP() / payload(58, 1), eth() / udp4(58, 2)])
    # IPv4 total length smaller than its own header (10), as record 2 of 3.
    write(d, "ipv4_len_short.pcap", [eth() / udp4(58), eth() / IP(len=10) / UDP() / payload(58, 1), eth() / udp4(58, 2)])
    # IPv4 header length (IHL) 3 words, below the 5 of any IPv4 header, as
    # frame 2 of 3 (its total length is right).
    write(d, "ipv4_ihl.pcap", [eth() / udp4(58), eth() / IP(ihl=3) / UDP() / payload(58, 1), eth() / udp4(58, 2)])
    # IPv6 payload length longer than the frame (500 in a 162 B frame), as
    # record 2 of 3.
    write(d, "ipv6_len_long.pcap", [eth() / udp6(100), eth() / IPv6(plen=500) / UDP() / payload(100, 1), eth() / udp6(100, 2)])
    # IPv6 payload length shorter than the frame: 8 (the UDP header) in a
    # 162 B frame, as frame 2 of 3.
    write(d, "ipv6_len_short.pcap", [eth() / udp6(100), eth() / IPv6(plen=8) / UDP() / payload(100, 1), eth() / udp6(100, 2)])

    # Ethernet padding: ARP (42 B) padded to 60, an 802.3 frame whose
    # length field says 13 (LLC and 10 bytes) padded to 60, and IPv4/UDP
    # of 46 B padded to 60; then a frame without padding.
    write(
        d,
        "padded.pcap",
        [
            eth() / ARP(hwsrc=SRC, psrc="10.0.0.1", pdst="10.0.0.2") / Padding(b"\x00" * 18),
            Dot3(src=SRC, dst=DST, len=13) / LLC() / Raw(b"0123456789") / Padding(b"\x00" * 33),
            eth() / udp4(4) / Padding(b"\x00" * 14),
            eth() / udp4(58),
        ],
    )
    # 802.3 with LLC and SNAP, whose length field states its own length (no
    # padding): 14 + 3 + 5 + 40 = 62 bytes.
    write(d, "dot3_snap.pcap", [Dot3(src=SRC, dst=DST) / LLC() / SNAP() / payload(40, 3)])

    # Cut by a snap length, as tcpdump -s 64 writes: a 242 B IPv4/UDP frame
    # saved as its first 64 bytes (original length 242), then a 60 B frame
    # saved whole.
    w = PcapWriter(os.path.join(d, "snapped.pcap"), linktype=1, snaplen=64, sync=True)
    long, short = eth() / udp4(200), eth() / udp4(18, 1)
    w.write_header(long)
    w.write_packet(bytes(long)[:64], sec=T0, usec=0, caplen=64, wirelen=len(long))
    w.write_packet(bytes(short), sec=T0, usec=10, caplen=len(short), wirelen=len(short))
    w.close()

    # Jumbo: 9000 B of IPv4/UDP (lengths consistent) between two control
    # frames, larger than the port's largest frame (1536 B).
    write(d, "jumbo.pcap", [eth() / udp4(58), eth() / udp4(9000 - 42, 1), eth() / udp4(58, 2)])

    # A pcap whose last record is cut: three 100 B frames, the file cut 30
    # bytes into the third record's data.
    path = os.path.join(d, "truncated_record.pcap")
    write(d, "truncated_record.pcap", [eth() / udp4(58, i) for i in range(3)])
    with open(path, "rb") as f:
        whole = f.read()
    write_raw(d, "truncated_record.pcap", whole[: 24 + 2 * (16 + 100) + 16 + 30])
    # And one cut inside the third record's 16 B header.
    write_raw(d, "truncated_record_header.pcap", whole[: 24 + 2 * (16 + 100) + 7])

    # pcapng (section header, interface description, enhanced packet
    # blocks) holding IPv4/UDP and a VLAN-tagged frame.
    w = PcapNgWriter(os.path.join(d, "frames.pcapng"))
    for p in stamp([eth() / udp4(18), eth() / udp4(458, 1), eth() / Dot1Q(vlan=7) / udp4(100, 2)]):
        w.write(p)
    w.close()
    # The same file cut 30 bytes before its end, inside the third packet's
    # block (180 B).
    with open(os.path.join(d, "frames.pcapng"), "rb") as f:
        write_raw(d, "truncated.pcapng", f.read()[:-30])
    # A pcapng whose interface is raw IPv4 (LINKTYPE_IPV4, 228), as scapy
    # describes IP packets. Set before the first write: scapy 2.5 writes
    # Ethernet (1) into the interface block whatever the packets are.
    w = PcapNgWriter(os.path.join(d, "raw_ip.pcapng"))
    w.linktype = 228
    for p in stamp([udp4(58, i) for i in range(2)]):
        w.write(p)
    w.close()

    # Link types other than Ethernet: raw IPv4 (LINKTYPE_RAW, 101) and
    # Linux cooked capture (LINKTYPE_LINUX_SLL, 113).
    write(d, "raw_ip.pcap", [udp4(58, i) for i in range(2)], linktype=101)
    write(d, "linux_sll.pcap", [CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6) / udp4(58, i) for i in range(2)], linktype=113)

    # Files that are not captures.
    write_raw(d, "text.txt", b"This is a text file, not a capture.\nIt has two lines.\n")
    write_raw(d, "empty.pcap", b"")
    rng = random.Random(20240601)
    noise = bytes(rng.randrange(256) for _ in range(4096))
    assert noise[:4] not in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a")
    write_raw(d, "random.bin", noise)
    # A pcap file header and no records; and a file header cut at 20 B.
    header = whole[:24]
    write_raw(d, "header_only.pcap", header)
    write_raw(d, "header_cut.pcap", header[:20])

    for name in sorted(os.listdir(d)):
        print(name)


if __name__ == "__main__":
    main()
