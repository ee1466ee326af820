//! Compiles proto/pcstream.proto into Rust messages with prost, using protox
//! (a pure-Rust protobuf compiler) so no system `protoc` is needed.
fn main() {
    // The manifest directory as cargo gives it to this run (not baked in at
    // the script's compile time: a moved or shared target directory keeps
    // a script compiled elsewhere).
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let proto_dir = format!("{manifest}/../../proto");
    let proto = format!("{proto_dir}/pcstream.proto");
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([&proto], [&proto_dir]).expect("compile proto/pcstream.proto");
    prost_build::Config::new()
        .compile_fds(fds)
        .expect("generate Rust code for proto/pcstream.proto");
}
