//! The health endpoint's request parsing, as a connection feeds it: the input arrives in reads
//! of up to 255 bytes (the first byte sets the size), each followed by the check for a complete
//! head, the answer once it is, and 431 past the size limit (health.rs, `Conn::read_and_answer`).
//!
//! Checked: no panic; only the answers the endpoint has; an answer only for a complete head or
//! a request at the size limit; /ready follows the status and /live does not.
#![no_main]

use lastcall::health::{answer, head_complete, Status, MAX_REQUEST};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, data)) = data.split_first() else { return };
    let chunk = usize::from(chunk).max(1);
    let mut request = Vec::new();
    for piece in data.chunks(chunk) {
        request.extend_from_slice(piece);
        if head_complete(&request) {
            let (ready, _, _) = answer(&request, Status { ready: true });
            let (draining, _, _) = answer(&request, Status { ready: false });
            assert!([200, 404, 405].contains(&ready), "{ready} for {request:?}");
            assert!([404, 405, 503, 200].contains(&draining), "{draining} for {request:?}");
            // Only /ready changes with the status, from 200 to 503.
            assert!(ready == draining || (ready, draining) == (200, 503), "{ready}/{draining} for {request:?}");
            return;
        }
        if request.len() >= MAX_REQUEST {
            return; // 431
        }
    }
    assert!(request.len() < MAX_REQUEST && !head_complete(&request));
});
