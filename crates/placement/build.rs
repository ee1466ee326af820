//! Compiles proto/pcstream.proto into Rust messages with prost, using protox
//! (a pure-Rust protobuf compiler) so no system `protoc` is needed.
fn main() {
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
    let proto = format!("{proto_dir}/pcstream.proto");
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([&proto], [proto_dir]).expect("compile proto/pcstream.proto");
    prost_build::Config::new()
        .compile_fds(fds)
        .expect("generate Rust code for proto/pcstream.proto");
}
