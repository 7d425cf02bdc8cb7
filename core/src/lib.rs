//! ccwire-core (work in progress).
