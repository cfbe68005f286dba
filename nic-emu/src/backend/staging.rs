//! Frames a ring backend gathers during a step, to hand to its ring in one
//! batch (one system call or one doorbell) when the step ends.

use crate::wire::MAX_FRAME;

/// Frames gathered at most before they must be handed over.
pub const STAGED_FRAMES: usize = 64;

/// A batch of frames in fixed slots, allocated once.
#[derive(Debug)]
pub struct Staging {
    buf: Box<[u8]>,
    lens: [usize; STAGED_FRAMES],
    n: usize,
}

impl Default for Staging {
    fn default() -> Self {
        Self {
            buf: vec![0u8; STAGED_FRAMES * MAX_FRAME].into_boxed_slice(),
            lens: [0; STAGED_FRAMES],
            n: 0,
        }
    }
}

impl Staging {
    /// Appends a frame (at most [`MAX_FRAME`] bytes); false when full.
    pub fn push(&mut self, frame: &[u8]) -> bool {
        if self.n == STAGED_FRAMES || frame.len() > MAX_FRAME {
            return false;
        }
        let at = self.n * MAX_FRAME;
        self.buf[at..at + frame.len()].copy_from_slice(frame);
        self.lens[self.n] = frame.len();
        self.n += 1;
        true
    }

    /// Whether it holds no frame.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Hands the frames to `send`, which returns how many it took from the
    /// front; returns (taken, left over). Empties the batch either way: the
    /// caller counts what was left over as a drop.
    pub fn drain<'a, F>(&'a mut self, send: F) -> (usize, usize)
    where
        F: FnOnce(&mut dyn Iterator<Item = &'a [u8]>) -> usize,
    {
        let n = std::mem::take(&mut self.n);
        let (buf, lens) = (&self.buf, &self.lens);
        let mut it = (0..n).map(move |i| &buf[i * MAX_FRAME..i * MAX_FRAME + lens[i]]);
        let taken = send(&mut it).min(n);
        (taken, n - taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_leave_in_order_and_what_is_not_taken_is_reported() {
        let mut s = Staging::default();
        for i in 0..STAGED_FRAMES {
            assert!(s.push(&vec![i as u8; 14 + i]));
        }
        assert!(!s.push(&[0; 60]), "a full batch took a frame");
        let (taken, left) = s.drain(|it| {
            let mut n = 0;
            for (i, f) in it.take(10).enumerate() {
                assert_eq!(f, &vec![i as u8; 14 + i][..]);
                n += 1;
            }
            n
        });
        assert_eq!((taken, left), (10, STAGED_FRAMES - 10));
        assert!(s.is_empty());
        assert!(!s.push(&[0; MAX_FRAME + 1]));
    }
}
