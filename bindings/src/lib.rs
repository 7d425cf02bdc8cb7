//! WebAssembly bindings of `ccwire-core`, built into the npm package `ccwire`.
