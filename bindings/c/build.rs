//! Generates `coinorder.h` into `OUT_DIR` with the pinned cbindgen (a test compares it
//! with the committed `include/coinorder.h`) and gives the shared library its SONAME.

use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=src");
    println!("cargo::rerun-if-changed=cbindgen.toml");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        // The ABI major version: hosts link against libcoinorder.so.0 and keep working
        // across compatible releases.
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libcoinorder.so.0");
        // Export the coinorder_* functions only. rustc exports every `#[no_mangle]` function
        // of every crate linked in (rust-lang/rust#73958), and secp256k1-sys (under the core's
        // wallets) has four (`rustsecp256k1_v0_10_0_context_create`, ...). Those come from
        // dependency archives, while this crate's functions come from its own object files,
        // which --exclude-libs leaves alone. (A second --version-script is not an option:
        // GNU ld refuses it next to rustc's own.)
        println!("cargo::rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
    }
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("bindings/c/cbindgen.toml reads");
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write_to_file(out_dir.join("coinorder.h"));
}
