//! TCP and UDP headers: the views of `netview`, gathered here.

pub use netview::tcp::*;
pub use netview::udp::{UdpPacket, UDP_HEADER_LEN};
