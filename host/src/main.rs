//! The `ccwire` command line.
fn main() {}
