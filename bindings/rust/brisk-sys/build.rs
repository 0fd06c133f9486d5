// Links libbrisk: from $BRISK_LIB_DIR when set (the meson test sets it to the
// build folder), else the checkout's build/, else the system's library path.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=BRISK_LIB_DIR");
    let dir = std::env::var_os("BRISK_LIB_DIR").map(PathBuf::from).or_else(|| {
        let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
        let build = manifest.join("../../../build");
        build.join("libbrisk.so").exists().then_some(build)
    });
    if let Some(dir) = dir {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=brisk");
}
