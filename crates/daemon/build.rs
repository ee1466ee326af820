//! Generates the gRPC server of `proto/pcstream.proto` with tonic, using
//! protox (no system `protoc`); the messages are pcstream-placement's
//! (`pcstream_placement::wire`), not generated again.
fn main() {
    // The manifest directory as cargo gives it to this run (not baked in at
    // the script's compile time: a moved or shared target directory keeps
    // a script compiled elsewhere).
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let proto_dir = format!("{manifest}/../../proto");
    let proto = format!("{proto_dir}/pcstream.proto");
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([&proto], [&proto_dir]).expect("compile proto/pcstream.proto");
    tonic_prost_build::configure()
        .build_client(false)
        .extern_path(".pcstream.v1", "::pcstream_placement::wire")
        .compile_fds(fds)
        .expect("generate the gRPC server for proto/pcstream.proto");
}
