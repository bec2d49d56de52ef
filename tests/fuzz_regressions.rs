//! Replays the kept fuzz inputs (`fuzz/regressions/handle/` and
//! `fuzz/regressions/parse_json/`) through the same checks the fuzz targets apply, so
//! an input the fuzzers once found interesting stays covered by the normal test suite.
//! The harness is the fuzz crate's own file (the root crate cannot depend on the fuzz
//! crate); scripts/fuzz runs the fuzzers themselves.

#[path = "../fuzz/src/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

/// The files of `fuzz/regressions/<target>/`, sorted, with their contents.
fn regressions(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions").join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> =
        entries.filter_map(|entry| entry.ok().map(|entry| entry.path())).filter(|path| path.is_file()).collect();
    paths.sort();
    assert!(!paths.is_empty(), "{} holds no regression input", dir.display());
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            (path, bytes)
        })
        .collect()
}

fn assert_all_pass(target: &str, mut check: impl FnMut(&[u8]) -> Result<(), String>) {
    let inputs = regressions(target);
    let failures: Vec<String> = inputs
        .iter()
        .filter_map(|(path, bytes)| check(bytes).err().map(|failure| format!("{}: {failure}", path.display())))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} {target} regressions fail:\n{}",
        failures.len(),
        inputs.len(),
        failures.join("\n")
    );
}

#[test]
fn handle_regressions_keep_the_response_invariants() {
    let fixture = harness::Fixture::new().unwrap_or_else(|e| panic!("fixture: {e}"));
    assert_all_pass("handle", |input| harness::run_handle(&fixture, input));
}

#[test]
fn parse_json_regressions_keep_the_parser_invariants() {
    assert_all_pass("parse_json", harness::check_parse_json);
}

#[test]
fn the_text_format_decodes_method_path_headers_and_body() {
    let fixture = harness::Fixture::new().unwrap_or_else(|e| panic!("fixture: {e}"));
    let request = harness::decode_request(
        &fixture,
        b"POST\r\n/v1/orders/{ORDER}/simulate?x=1\nx-api-key: {KEY}\nx-empty:\nodd line\n\n{\"action\":\"pay\"}\n\n\t",
    );
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, format!("/v1/orders/{}/simulate?x=1", fixture.order_id));
    let headers: Vec<(&str, &str)> = request.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(headers, [("x-api-key", fixture.key.as_str()), ("x-empty", ""), ("odd line", "")]);
    assert_eq!(request.body, b"{\"action\":\"pay\"}\n\n\t");
    let response = fixture.service.handle(&request);
    harness::check_response(&fixture, &request, &response).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.status, 200, "the fixture's order can be paid in the sandbox");
}
