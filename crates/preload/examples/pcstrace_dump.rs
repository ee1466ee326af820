//! Prints every record of shim trace files (debugging aid):
//! `cargo run -p pcstream-preload --example pcstrace_dump -- FILE...`
use pcstream_placement::trace::TraceReader;

fn main() {
    for path in std::env::args().skip(1) {
        println!("== {path}");
        match TraceReader::open(&path) {
            Ok(r) => {
                for rec in r.tolerate_torn_tail(true) {
                    match rec {
                        Ok(rec) => println!("{rec:?}"),
                        Err(e) => {
                            println!("error: {e}");
                            break;
                        }
                    }
                }
            }
            Err(e) => println!("error: {e}"),
        }
    }
}
