//! Compiles `src/stdio.c` (the variadic stdio entry points) with frame
//! pointers, so its frame address is a valid frame record.
fn main() {
    println!("cargo:rerun-if-changed=src/stdio.c");
    cc::Build::new()
        .file("src/stdio.c")
        .flag("-fno-omit-frame-pointer")
        .flag("-fno-optimize-sibling-calls")
        .flag("-fno-builtin")
        .flag("-U_FORTIFY_SOURCE")
        .opt_level(2)
        .compile("pcstream_stdio");
}
