//! A C-ABI entry point over `ccwire-core` for `wasm32-unknown-unknown`, with no wasm-bindgen:
//! the host allocates input in the module's memory, calls [`ccwire_replay`], and reads the chunk
//! lines back. The module must import nothing: that is the portability gate.
//!
//! Protocol: `ccwire_alloc(len) -> ptr`; write the transcript at `ptr`; `ccwire_replay(ptr, len)`
//! returns `(out_ptr << 32) | out_len` of one JSON chunk per line; free both with
//! `ccwire_free(ptr, len)`.
#![allow(unsafe_code)]

/// Replays a transcript and returns its chunks, one JSON object per line.
pub fn replay_jsonl(transcript: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(transcript.len());
    for chunk in ccwire_core::replay(transcript) {
        serde_json::to_writer(&mut out, &chunk).expect("chunks serialize");
        out.push(b'\n');
    }
    out
}

/// Allocates `len` bytes in the module's memory for the host to fill.
#[no_mangle]
pub extern "C" fn ccwire_alloc(len: u32) -> *mut u8 {
    let mut buf = Vec::<u8>::with_capacity(len as usize);
    let ptr = buf.as_mut_ptr();
    std::mem::forget(buf);
    ptr
}

/// Frees memory from [`ccwire_alloc`] or returned by [`ccwire_replay`].
///
/// # Safety
/// `ptr` and `len` must come from one of those calls, freed once.
#[no_mangle]
pub unsafe extern "C" fn ccwire_free(ptr: *mut u8, len: u32) {
    drop(Vec::from_raw_parts(ptr, 0, len as usize));
}

/// Replays the transcript at `ptr..ptr+len`; returns `(out_ptr << 32) | out_len`.
///
/// # Safety
/// `ptr` must point to `len` initialized bytes from [`ccwire_alloc`].
#[no_mangle]
pub unsafe extern "C" fn ccwire_replay(ptr: *const u8, len: u32) -> u64 {
    let input = std::slice::from_raw_parts(ptr, len as usize);
    let mut out = replay_jsonl(input);
    out.shrink_to_fit();
    let (out_ptr, out_len) = (out.as_mut_ptr(), out.len());
    std::mem::forget(out);
    ((out_ptr as u64) << 32) | out_len as u64
}
