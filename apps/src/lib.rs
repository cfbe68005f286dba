//! Applications. (Being written.)
