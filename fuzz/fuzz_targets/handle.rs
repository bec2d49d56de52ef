//! `Service::handle` on structured requests (see `coinorder_fuzz::FuzzRequest`): every
//! answer must keep the invariants of `coinorder_fuzz::harness::check_response`.

#![no_main]

use coinorder_fuzz::{escaped, export, fixture, harness, FuzzRequest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|request: FuzzRequest| {
    let input = request.encode();
    export("handle", &input);
    if let Err(failure) = harness::run_handle(fixture(), &input) {
        panic!("handle: {failure}\ninput (text format): \"{}\"", escaped(&input));
    }
});
