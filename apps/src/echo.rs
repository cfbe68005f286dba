//! The echo server of the paper's microbenchmarks: receive a frame,
//! increment one payload byte, send it back.
//!
//! The byte is the *echo byte* of the test payload that traffic generators
//! send (`nic_emu::testframe`: magic, sequence number, flow, echo byte), so
//! the generator can check that every frame came back exactly once and was
//! processed. Other frames are forwarded unchanged.

use enso::app::{PacketHandler, Verdict};
use nic_emu::testframe::TestFrames;

/// Echo server logic (one per core).
#[derive(Debug, Default, Clone)]
pub struct Echo {
    /// Frames whose echo byte was incremented.
    pub echoed: u64,
    /// Frames forwarded unchanged (not test frames).
    pub other: u64,
}

impl Echo {
    /// A server that has echoed nothing yet.
    pub fn new() -> Self {
        Self::default()
    }
}

impl PacketHandler for Echo {
    #[inline]
    fn handle(&mut self, frame: &mut [u8]) -> Verdict {
        match TestFrames::peek(frame) {
            Some(v) => {
                let e = v.kind.echo_offset();
                frame[e] = frame[e].wrapping_add(1);
                self.echoed += 1;
            }
            None => self.other += 1,
        }
        Verdict::Forward
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nic_emu::testframe::FrameKind;

    #[test]
    fn increments_the_echo_byte_of_every_kind() {
        let tf = TestFrames::new(2, 0);
        let mut f = [0u8; 1536];
        let mut s = [0u8; 1536];
        let mut echo = Echo::new();
        for kind in [FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw] {
            let n = tf.build(kind, 41, 1, 200, &mut f);
            assert_eq!(echo.handle(&mut f[..n]), Verdict::Forward);
            tf.verify(&f[..n], 1, None, &mut s).unwrap();
        }
        let mut junk = [7u8; 60];
        assert_eq!(echo.handle(&mut junk), Verdict::Forward);
        assert_eq!(junk, [7u8; 60]);
        assert_eq!((echo.echoed, echo.other), (3, 1));
    }
}
