//! Tests of the online engine: clock, usage, per-user learners, persistence, program names.

use super::*;

#[test]
fn a_file_that_goes_kills_every_page_a_punch_only_whole_ones() {
    let inv = |kind: wire::InvalidateKind, offset, len| {
        invalidated_pages(&wire::InvalidateEvent {
            kind: kind as i32,
            offset,
            len,
            ..Default::default()
        })
    };
    use wire::InvalidateKind as K;
    for k in [K::Unlink, K::RenameReplace, K::CloseUnlinked] {
        assert_eq!(inv(k, 0, 100), (0, u64::MAX), "{k:?}");
    }
    assert_eq!(inv(K::Truncate, 5000, 100), (2, u64::MAX));
    assert_eq!(inv(K::PunchHole, 100, 3 * PAGE), (1, 2));
}

fn cfg(share: bool) -> OnlineConfig {
    OnlineConfig {
        streams: 3,
        // The policy tests' small learner, with every refinement off.
        policy: PcStreamConfig {
            key_by_lba: false,
            refine: crate::pcstream::RefineConfig::none(),
            gc_by_age: false,
            gc_streams: None,
            gc_age_only: false,
            learn_unattributed: false,
            ..crate::pcstream::tests::cfg()
        },
        share_between_users: share,
        max_signatures: 1000,
        refine_by_age: false,
    }
}

fn write(ino: u64, page: u64, pages: u64, sig: u64) -> wire::Event {
    wire::Event {
        kind: Some(Kind::Write(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino }),
            offset: page * PAGE,
            len: pages * PAGE,
            signature: sig,
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn unlink(ino: u64) -> wire::Event {
    wire::Event {
        kind: Some(Kind::Invalidate(wire::InvalidateEvent {
            file: Some(wire::FileId { dev: 1, ino }),
            kind: wire::InvalidateKind::Unlink as i32,
            offset: 0,
            len: 8 * PAGE,
        })),
        ..Default::default()
    }
}

/// sig 1: short-lived temp files; sig 2: a long-lived rewritten file.
fn workload(e: &mut Engine, uid: u32, sig_short: u64, sig_long: u64) {
    for round in 0..100u64 {
        let ino = 1000 * u64::from(uid) + 100 + round;
        e.apply(uid, 1, &write(ino, 0, 8, sig_short));
        e.apply(uid, 1, &unlink(ino));
        e.apply(uid, 1, &write(7 + u64::from(uid), round % 2, 1, sig_long));
    }
}

#[test]
fn a_fork_child_writes_for_its_parents_program() {
    let mut e = Engine::new(cfg(false));
    let proc_ev = |kind: wire::ProcessEventKind, ppid, exe: &str| wire::Event {
        kind: Some(Kind::Process(wire::ProcessEvent {
            kind: kind as i32,
            ppid,
            exe: exe.into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    let sig = |s| wire::Event {
        kind: Some(Kind::Signature(wire::SignatureInfo {
            signature: s,
            ..Default::default()
        })),
        ..Default::default()
    };
    use wire::ProcessEventKind as P;
    // A server (pid 10) forks a worker (11) that writes; an orphan
    // child (21, parent never seen) writes too.
    e.apply(
        0,
        10,
        &proc_ev(P::Start, 1, "/usr/lib/postgresql/15/bin/postgres"),
    );
    e.apply(0, 11, &proc_ev(P::ForkChild, 10, ""));
    e.apply(0, 21, &proc_ev(P::ForkChild, 20, ""));
    e.apply(0, 11, &sig(5));
    e.apply(0, 11, &write(1, 0, 1, 5));
    e.apply(0, 21, &sig(6));
    e.apply(0, 21, &write(2, 0, 1, 6));
    let programs = |e: &Engine, s| {
        e.sig_info(s)
            .unwrap()
            .programs
            .clone()
            .into_iter()
            .collect::<Vec<_>>()
    };
    assert_eq!(programs(&e, 5), ["postgres"]);
    assert!(programs(&e, 6).is_empty());
    // The worker's exit forgets it, not its parent.
    e.apply(0, 11, &proc_ev(P::Exit, 0, ""));
    e.apply(0, 12, &proc_ev(P::ForkChild, 10, ""));
    e.apply(0, 12, &sig(7));
    e.apply(0, 12, &write(3, 0, 1, 7));
    assert_eq!(programs(&e, 7), ["postgres"]);
}

#[test]
fn the_clock_counts_bytes_and_each_signature_its_calls_and_bytes() {
    let mut e = Engine::new(cfg(false));
    let w = |offset, len, calls| wire::Event {
        kind: Some(Kind::Write(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino: 5 }),
            offset,
            len,
            signature: 3,
            calls,
            ..Default::default()
        })),
        ..Default::default()
    };
    // 100-byte appends: one page touched three times, 300 bytes.
    for i in 0..3 {
        e.apply(0, 1, &w(i * 100, 100, 0));
    }
    assert_eq!((e.clock_bytes(), e.clock()), (300, 0));
    // A run of 7 calls over two pages and a bit, from mid-page.
    e.apply(0, 1, &w(300, 2 * PAGE + 10, 7));
    assert_eq!(e.clock_bytes(), 300 + 2 * PAGE + 10);
    assert_eq!(e.clock(), 2);
    assert_eq!(
        e.usage(0, 3),
        Some(Usage {
            calls: 10,
            bytes: 2 * PAGE + 310
        })
    );
    // Saved and reloaded: the clock in bytes and the usage survive.
    let mut f = Engine::new(cfg(false));
    f.import(e.export()).unwrap();
    assert_eq!(f.clock_bytes(), e.clock_bytes());
    assert_eq!(f.usage(0, 3), e.usage(0, 3));
    // A state saved before the byte clock: its pages.
    let mut old = e.export();
    old.clock_bytes = 0;
    let mut g = Engine::new(cfg(false));
    g.import(old).unwrap();
    assert_eq!(g.clock_bytes(), 2 * PAGE);
}

#[test]
fn matches_the_policy_fed_page_by_page_and_persists() {
    let mut e = Engine::new(cfg(false));
    workload(&mut e, 0, 1, 2);
    assert_eq!(e.clock(), 900);
    assert_eq!(e.stream(0, 1), 1);
    assert_eq!(e.stream(0, 2), 2);
    // The policy itself, fed as the replay feeds it.
    let mut p = PcStream::new(3, cfg(false).policy);
    let mut t = 0;
    for round in 0..100u64 {
        for pg in 0..8 {
            p.place(&WriteCtx {
                time: t,
                lpn: pg,
                pages: 1,
                file: Some((1, 100 + round)),
                file_page: pg,
                signature: Some(1),
                ..Default::default()
            });
            t += 1;
        }
        p.invalidate_file((1, 100 + round), 0, u64::MAX, t);
        p.place(&WriteCtx {
            time: t,
            lpn: round % 2,
            pages: 1,
            file: Some((1, 7)),
            file_page: round % 2,
            signature: Some(2),
            ..Default::default()
        });
        t += 1;
    }
    let m: Vec<_> = e
        .mapping()
        .into_iter()
        .map(|(_, s, st, _)| (s, st))
        .collect();
    assert_eq!(m, p.mapper().table());
    let saved = e.export();
    let mut f = Engine::new(cfg(false));
    assert_eq!(f.import(saved.clone()).unwrap(), 2);
    assert_eq!(f.stream(0, 1), 1);
    assert_eq!(f.stream(0, 2), 2);
    assert_eq!(f.clock(), 900);
    let mut bad = saved;
    bad.version = 99;
    assert!(f.import(bad).unwrap_err().contains("version 99"));
}

/// An imported table with one absurd value is refused whole, naming the
/// learner, signature and field, and the engine is left as it was; the
/// value that crashed k-means (`ewma_log2 = -1e300`) among ten good
/// signatures is the one a user's file had.
#[test]
fn an_import_with_an_absurd_value_is_refused_whole() {
    let mut e = Engine::new(cfg(false));
    workload(&mut e, 0, 1, 2);
    let before = e.export();
    let mut other = Engine::new(cfg(false));
    workload(&mut other, 0, 10, 20);
    workload(&mut other, 7, 30, 40);
    let mut bad = other.export();
    bad.clock_bytes = 1 << 40;
    let (_, s) = bad.learners[1]
        .sigs
        .iter_mut()
        .find(|(k, _)| *k == 40)
        .unwrap();
    s.ewma_log2 = -1e300;
    let err = e.import(bad.clone()).unwrap_err();
    assert_eq!(
        err,
        "learner uid 7 (hints), signature 0000000000000028: \
         ewma_log2 is -1e300, not a log2 lifetime (0 to 64)"
    );
    assert_eq!(
        e.export(),
        before,
        "nothing of the refused table was applied"
    );
    let mut shared = bad.clone();
    shared.learners[1].key = SHARED;
    assert!(shared
        .validate()
        .unwrap_err()
        .starts_with("learner shared (hints)"));
    // Without the bad value the same table loads.
    bad.learners[1].sigs.retain(|(k, _)| *k != 40);
    assert_eq!(e.import(bad).unwrap(), 3);
    assert_eq!(e.clock_bytes(), 1 << 40);
}

#[test]
fn users_learn_apart_unless_shared() {
    let mut e = Engine::new(cfg(false));
    workload(&mut e, 0, 1, 2);
    // uid 1000 uses the same signatures with the lifetimes swapped.
    workload(&mut e, 1000, 2, 1);
    assert_eq!((e.stream(0, 1), e.stream(0, 2)), (1, 2));
    assert_eq!((e.stream(1000, 1), e.stream(1000, 2)), (2, 1));
    assert_eq!(e.learners().len(), 2);
    let mut s = Engine::new(cfg(true));
    workload(&mut s, 0, 1, 2);
    workload(&mut s, 1000, 3, 4);
    assert_eq!(s.learners().len(), 1);
    assert_eq!(s.stream(0, 3), s.stream(1000, 3));
    assert_eq!(s.stream(1000, 1), 1);
}

fn on_dev(mut e: wire::Event, dev: u64) -> wire::Event {
    match &mut e.kind {
        Some(Kind::Write(w)) => w.file.as_mut().unwrap().dev = dev,
        Some(Kind::Invalidate(i)) => i.file.as_mut().unwrap().dev = dev,
        _ => {}
    }
    e
}

/// The same two call paths write files on device 1 (the `hints`
/// domain) and device 2 (routed to `f2fs`): two learners, the f2fs
/// one publishing its two classes as MEDIUM / EXTREME streams
/// under salted keys, and the saved state brings both back.
#[test]
fn domains_learn_apart_and_publish_their_own_classes() {
    use crate::delivery::{table_key, Domain};
    let mut e = Engine::new(cfg(false));
    let mut route = |f: &wire::FileId| {
        if f.dev == 2 {
            DomainSpec {
                domain: Domain::F2fs,
                device_streams: 8,
                erase_unit_pages: 16,
            }
        } else {
            DomainSpec::HINTS
        }
    };
    for round in 0..100u64 {
        for dev in [1, 2] {
            let ino = 100 + round;
            e.apply_in(0, 1, &on_dev(write(ino, 0, 8, 1), dev), &mut route);
            e.apply_in(0, 1, &on_dev(unlink(ino), dev), &mut route);
            e.apply_in(0, 1, &on_dev(write(7, round % 2, 1, 2), dev), &mut route);
        }
    }
    assert_eq!(e.learners().len(), 2);
    let f2 = LearnerKey {
        uid: 0,
        domain: Domain::F2fs,
    };
    assert_eq!(e.learner_streams(Domain::F2fs), 3);
    assert_eq!(e.learner_streams(Domain::Hints), 3);
    assert_eq!((e.stream(0, 1), e.stream(0, 2)), (1, 2));
    // Short → MEDIUM (stream 2, F2FS's warm), long → EXTREME (stream 4,
    // cold): F2FS's hot log is left to F2FS.
    let (s1, s2) = (e.stream_in(f2, 1), e.stream_in(f2, 2));
    assert_eq!((s1, s2), (2, 4));
    let m = e.mapping();
    let f2m: Vec<_> = m.iter().filter(|x| x.0 == f2).collect();
    assert_eq!(f2m.len(), 2);
    for &&(_, sig, s, h) in &f2m {
        assert_eq!(h, RwHint::for_stream(s).raw() as u8, "sig {sig}");
        assert_ne!(table_key(sig, Domain::F2fs), sig);
    }
    assert_eq!(
        e.domain_spec(Domain::F2fs).unwrap().erase_unit_pages,
        16,
        "the device's unit"
    );
    let mut f = Engine::new(cfg(false));
    f.import(e.export()).unwrap();
    assert_eq!(f.stream_in(f2, 1), s1);
    assert_eq!(f.stream_in(f2, 2), s2);
    assert_eq!(f.domain_spec(Domain::F2fs), e.domain_spec(Domain::F2fs));
    assert_eq!(e.learners_of(0).count(), 2);
}

#[test]
fn a_forged_huge_write_is_ignored_and_counted() {
    let mut e = Engine::new(cfg(false));
    let mut ev = write(1, 0, 1, 9);
    if let Some(Kind::Write(w)) = &mut ev.kind {
        w.len = u64::MAX;
    }
    e.apply(0, 1, &ev);
    assert_eq!(e.clock(), 0);
    assert_eq!(e.counters().oversized_writes, 1);
}

/// One call path writing two kinds of page: tables written once onto
/// free pages (no age class) that live ~1000 pages, and a hot set it
/// rewrites every 16 pages (the shim saw each page written a few pages before: class
/// 2). Refined by age, the hot rewrites get a key of their own, shown
/// with the call path's frames, in a shorter-lived stream than the bare
/// call path's; without, one key.
#[test]
fn in_place_rewrites_refined_by_age_learn_apart_from_the_first_writes() {
    fn run(refine: bool) -> (Engine, u64) {
        let mut c = cfg(false);
        c.refine_by_age = refine;
        let mut e = Engine::new(c);
        let sig = 7;
        e.apply(
            0,
            1,
            &wire::Event {
                kind: Some(Kind::Signature(wire::SignatureInfo {
                    signature: sig,
                    frames: vec![wire::Frame {
                        module_key: 9,
                        offset: 0x40,
                    }],
                    ..Default::default()
                })),
                ..Default::default()
            },
        );
        let hot = age_key(sig, 2);
        for round in 0..400u64 {
            // 8 pages of a table file (one per 4 rounds, dropped 60 rounds
            // later), then the hot set's 8 pages rewritten.
            e.apply(0, 1, &write(100 + round / 4, (round % 4) * 8, 8, sig));
            if round >= 60 && round % 4 == 0 {
                e.apply(0, 1, &unlink(100 + (round - 60) / 4));
            }
            for p in 0..8 {
                let mut w = write(2, p, 1, sig);
                if let Some(Kind::Write(ref mut we)) = w.kind {
                    we.age_class = if round == 0 { 0 } else { 2 };
                }
                e.apply(0, 1, &w);
            }
        }
        e.recluster();
        (e, hot)
    }
    let (e, hot) = run(true);
    assert_ne!(hot, 7);
    let (s_hot, s_bare) = (e.stream(0, hot), e.stream(0, 7));
    assert!(s_hot != 0 && s_bare != 0, "both placed: {s_hot} {s_bare}");
    assert_ne!(s_hot, s_bare, "rewrites apart from the first writes");
    let info = e.sig_info(hot).expect("the refined key is described");
    assert_eq!(info.refines, Some((7, 2)));
    assert_eq!(info.frames, vec![(9, 0x40)]);
    let (e, hot) = run(false);
    assert_eq!(e.stream(0, hot), 0, "no refined key without refine_by_age");
    assert!(e.sig_info(hot).is_none());
}
