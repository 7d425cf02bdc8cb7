//! Time as the engines take it.

/// Milliseconds on the host's clock (any epoch; only differences matter). Every input of an
/// engine takes the current one first (`now`); every deadline an engine gives back is one.
pub type Timestamp = u64;
