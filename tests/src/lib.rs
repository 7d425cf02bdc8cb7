//! Test support for ccwire: the transcript corpus, a scripted fake Anthropic Messages API server,
//! and helpers shared by the differential and end-to-end tests.
