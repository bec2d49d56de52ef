//! The crate's dependencies point one way: domain types and rules at the bottom, storage
//! below the service, and the wire layer, the payment page, the HTTP server and the
//! worker above it. This reads the sources and fails when a lower module names a higher
//! one (a `use crate::service` in `payments.rs`, say), so a cycle cannot creep back in.

use std::path::{Path, PathBuf};

/// Each layer, lowest first, with the source files (or folders) that make it up.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "domain",
        &[
            "environment.rs",
            "error.rs",
            "money.rs",
            "time.rs",
            "random.rs",
            "ids.rs",
            "signature.rs",
            "secrets.rs",
            "keys.rs",
            "orders.rs",
            "lifecycle.rs",
            "payments.rs",
            "rates.rs",
            "addresses.rs",
            "config.rs",
            "rate_limit.rs",
            "delivery.rs",
            "http_client.rs",
            "mail.rs",
            "render",
            "wallets.rs",
            // The chains' clients fetch and parse; what a payment means is the service's.
            "chain",
        ],
    ),
    ("storage", &["storage"]),
    ("service", &["service"]),
    ("above the service", &["wire.rs", "page.rs", "worker.rs", "server"]),
];

/// The module names each layer's files declare (`service` for `service/`, `wire` for
/// `wire.rs`).
fn module_name(entry: &str) -> &str {
    entry.strip_suffix(".rs").unwrap_or(entry)
}

/// Every `.rs` file under `path` (itself, if it is a file).
fn sources(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        let entry = entry.expect("directory entry").path();
        files.extend(sources(&entry));
    }
    files.retain(|file| file.extension().is_some_and(|ext| ext == "rs"));
    files
}

/// The source without its comment lines (doc links may name any item).
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

#[test]
fn no_module_names_a_module_of_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (level, (layer, entries)) in LAYERS.iter().enumerate() {
        let higher: Vec<&str> =
            LAYERS[level + 1..].iter().flat_map(|(_, entries)| entries.iter().map(|e| module_name(e))).collect();
        for entry in *entries {
            for file in sources(&src.join(entry)) {
                let code = code_of(&file);
                for module in &higher {
                    if code.contains(&format!("crate::{module}::")) || code.contains(&format!("crate::{module};")) {
                        violations.push(format!("{} ({layer}) names crate::{module}", file.display()));
                    }
                }
            }
        }
    }
    assert!(violations.is_empty(), "dependencies must point down:\n{}", violations.join("\n"));
}

#[test]
fn every_source_file_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let placed: Vec<&str> = LAYERS.iter().flat_map(|(_, entries)| entries.iter().copied()).collect();
    for entry in std::fs::read_dir(&src).expect("src") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        if ["lib.rs", "bin"].contains(&name.as_str()) {
            continue;
        }
        assert!(placed.contains(&name.as_str()), "src/{name} is in no layer of tests/layering.rs");
    }
}
