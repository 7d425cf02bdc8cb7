//! Framing + observer session: arbitrary bytes, split at positions taken from the input, fed as
//! both directions; every chunk must serialize.
#![no_main]

use ccwire_core::{Output, Session, SessionConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let mut session = Session::observer(SessionConfig {
        line_limit: 4096,
        ..SessionConfig::default()
    });
    let step = usize::from(shape % 31) + 1;
    let mut now = 0;
    for (i, piece) in rest.chunks(step).enumerate() {
        now += u64::from(shape);
        if i % 7 == 6 {
            session.handle_stdin(now, piece);
        } else {
            session.handle_stdout(now, piece);
        }
        drain(&mut session);
        if shape & 0x80 != 0 && i % 5 == 4 {
            session.handle_timeout(now);
        }
    }
    session.handle_stdout_eof(now);
    if shape & 1 == 1 {
        session.handle_process_exit(now, Some(1), None);
    }
    drain(&mut session);
    let _ = serde_json::to_string(session.tool_wait()).unwrap();
});

fn drain(session: &mut Session) {
    while let Some(output) = session.poll_output() {
        if let Output::Chunk(chunk) = output {
            let json = chunk.to_json();
            serde_json::from_str::<serde_json::Value>(&json).expect("chunk JSON parses");
        }
    }
}
