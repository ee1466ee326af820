//! Compiles `src/stdio.c` (the variadic stdio entry points) with frame
//! pointers, so its frame address is a valid frame record, and
//! `src/thread.c` (the per-thread state's initial-exec TLS block).
//!
//! The write path's functions are in sections named `.text.hot.*`; the
//! linker is told to keep them together (one output `.text.hot`), so a
//! write's code spans few pages and lines.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,keep-text-section-prefix");
    println!("cargo:rerun-if-changed=src/stdio.c");
    println!("cargo:rerun-if-changed=src/thread.c");
    println!("cargo:rerun-if-changed=src/exec.c");
    cc::Build::new()
        .file("src/stdio.c")
        .file("src/thread.c")
        .file("src/exec.c")
        .flag("-fno-omit-frame-pointer")
        .flag("-fno-optimize-sibling-calls")
        .flag("-fno-builtin")
        .flag("-U_FORTIFY_SOURCE")
        .opt_level(2)
        .compile("pcstream_stdio");
}
