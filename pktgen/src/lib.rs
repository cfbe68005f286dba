//! Packet generator. (Being written.)
