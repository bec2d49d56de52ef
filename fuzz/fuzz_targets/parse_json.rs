//! The JSON request parsers on arbitrary bytes: `parse_create_order`, `parse_simulate`,
//! `parse_list_query` and `Config::from_options` (see
//! `coinorder_fuzz::harness::check_parse_json`).

#![no_main]

use coinorder_fuzz::{escaped, export, harness};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    export("parse_json", input);
    if let Err(failure) = harness::check_parse_json(input) {
        panic!("parse_json: {failure}\ninput: \"{}\"", escaped(input));
    }
});
