//! `docs/api.md` keeps up with the API it describes. This reads `openapi.yaml` (as text:
//! the crate has no YAML parser among its dependencies), `src/error.rs` and the doc, and
//! fails when a path of the contract or an error code (of the contract's `error_code`
//! lists or of `ErrorCode`) is missing from the doc, or when the doc links outside the
//! repository.

use std::collections::BTreeSet;
use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// A YAML scalar without its quotes.
fn unquoted(text: &str) -> &str {
    let text = text.trim();
    text.strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|t| t.strip_suffix('"')))
        .unwrap_or(text)
}

/// The keys of the top-level `paths:` mapping: the lines indented by two spaces that start
/// with `/`, up to the next top-level key.
fn openapi_paths(yaml: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut inside = false;
    for line in yaml.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if indent_of(line) == 0 {
            inside = line.trim_end() == "paths:";
            continue;
        }
        if inside && indent_of(line) == 2 {
            if let Some(path) = line.trim().strip_suffix(':').filter(|key| key.starts_with('/')) {
                paths.push(unquoted(path).to_string());
            }
        }
    }
    paths
}

/// Every code listed under an `error_code:` key: `enum: [A, B]`, an `enum:` followed by
/// `- A` items, or `const: A`.
fn openapi_error_codes(yaml: &str) -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    let mut block: Option<usize> = None;
    let mut in_enum_list = false;
    for line in yaml.lines() {
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        if let Some(indent) = block {
            if indent_of(line) <= indent {
                block = None;
            }
        }
        if block.is_none() {
            if text == "error_code:" {
                block = Some(indent_of(line));
                in_enum_list = false;
            }
            continue;
        }
        if let Some(value) = text.strip_prefix("enum:").map(str::trim) {
            in_enum_list = value.is_empty();
            if let Some(items) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                codes.extend(items.split(',').map(|item| unquoted(item).to_string()));
            }
        } else if let Some(value) = text.strip_prefix("const:") {
            in_enum_list = false;
            codes.insert(unquoted(value).to_string());
        } else if let Some(item) = text.strip_prefix("- ").filter(|_| in_enum_list) {
            codes.insert(unquoted(item).to_string());
        } else {
            in_enum_list = false;
        }
    }
    codes.retain(|code| !code.is_empty());
    codes
}

/// The strings `ErrorCode::as_str` returns: the `ErrorCode::X => "CODE"` arms of that
/// function's body (other functions map the same variants to messages).
fn error_code_strings(source: &str) -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    let mut body_indent: Option<usize> = None;
    for line in source.lines() {
        match body_indent {
            None if line.contains("fn as_str(self) -> &'static str") => body_indent = Some(indent_of(line)),
            None => {}
            Some(indent) if indent_of(line) == indent && line.trim() == "}" => break,
            Some(_) => {
                let arm = line.trim();
                if let Some((_, code)) = arm.strip_prefix("ErrorCode::").and_then(|arm| arm.split_once("=>")) {
                    codes.insert(code.trim().trim_end_matches(',').trim_matches('"').to_string());
                }
            }
        }
    }
    codes
}

#[test]
fn every_path_of_openapi_yaml_is_documented() {
    let doc = read("docs/api.md");
    let paths = openapi_paths(&read("openapi.yaml"));
    for expected in ["/v1/orders", "/v1/orders/{order_id}", "/pay", "/openapi.yaml"] {
        assert!(paths.iter().any(|path| path == expected), "the scan of openapi.yaml missed {expected}: {paths:?}");
    }
    let missing: Vec<&String> = paths.iter().filter(|path| !doc.contains(&format!("`{path}`"))).collect();
    assert!(missing.is_empty(), "docs/api.md does not name these paths of openapi.yaml (as `code`): {missing:?}");
}

#[test]
fn every_error_code_is_documented() {
    let doc = read("docs/api.md");
    let from_openapi = openapi_error_codes(&read("openapi.yaml"));
    let from_source = error_code_strings(&read("src/error.rs"));
    for (what, codes) in [("openapi.yaml", &from_openapi), ("src/error.rs", &from_source)] {
        for expected in ["PARAMETERS_MISSING", "ORDER_NOT_VALID", "Not Found"] {
            assert!(codes.contains(expected), "the scan of {what} missed {expected}: {codes:?}");
        }
    }
    let missing: Vec<&String> =
        from_openapi.union(&from_source).filter(|code| !doc.contains(&format!("`{code}`"))).collect();
    assert!(missing.is_empty(), "docs/api.md does not name these error codes (as `code`): {missing:?}");
}

/// Hosts a doc may point at: the local server and names reserved for examples.
fn allowed_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    ["127.0.0.1", "localhost", "[::1]"].contains(&host.as_str())
        || host == "example"
        || host.ends_with(".example")
        || ["example.com", "example.net", "example.org"]
            .iter()
            .any(|domain| host == *domain || host.ends_with(&format!(".{domain}")))
}

#[test]
fn the_api_doc_links_nowhere_outside_the_repository() {
    let doc = read("docs/api.md");
    let mut outside = Vec::new();
    for scheme in ["http://", "https://"] {
        for (at, _) in doc.match_indices(scheme) {
            let rest = &doc[at + scheme.len()..];
            let authority = rest.split(['/', '?', '#', ')', '`', '"', '\'', ' ', '\n', '<', '>']).next().unwrap_or("");
            let authority = authority.rsplit('@').next().unwrap_or(authority);
            // A port (`127.0.0.1:8080`, `127.0.0.1:$PORT`) is not part of the host.
            let host = match authority.rsplit_once(':') {
                Some((host, _)) if !authority.starts_with('[') || host.ends_with(']') => host,
                _ => authority,
            };
            if !allowed_host(host) {
                outside.push(format!("{scheme}{authority}"));
            }
        }
    }
    assert!(outside.is_empty(), "docs/api.md must not link outside the repository: {outside:?}");
}
