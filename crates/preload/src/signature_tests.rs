//! Unit tests of `signature.rs` (kept apart to hold each file under ~1,000 lines).

use super::*;
use crate::modules;

#[inline(never)]
fn capture_here(p: Params) -> Captured {
    // A synthetic record like the trampoline's: {rbp, return address}.
    // The return address is one of our own functions' code (an address
    // inside a non-own module is needed for a frame, so use libc's).
    let rec = [0usize, libc::getpid as *const () as usize + 1];
    // SAFETY: `rec` lives on this stack.
    crate::tls::with(|t| unsafe { capture(t, modules::table().unwrap(), rec.as_ptr(), p) })
}

#[test]
fn record_frame_is_first_and_deterministic() {
    init_stack_facts();
    modules::refresh();
    let p = Params {
        frames: 5,
        unwind: Unwind::FramePointer,
        scan_words: 256,
    };
    let a = capture_here(p);
    assert_eq!(a.n, 1, "zero rbp ends the chain after the record's frame");
    assert_eq!(a.method, Method::FramePointer);
    let f = *a.frames().next().unwrap();
    let t = modules::table().unwrap();
    let h = t.lookup(libc::getpid as *const () as usize + 1).unwrap();
    assert_eq!((f.key, f.offset), (h.module.key, h.offset));
    assert_eq!(a.signature, capture_here(p).signature);
}

/// A frame-pointer chain of `depth` records `{next, return address}`
/// in `buf` from its start (return addresses inside libc: code, not
/// the shim's), the last link zero.
fn chain(buf: &mut [usize; 64], depth: usize) {
    let code = libc::getpid as *const () as usize;
    for d in 0..depth {
        buf[4 * d + 1] = code + 16 * (d + 1);
        buf[4 * d] = if d + 1 < depth {
            &buf[4 * (d + 1)] as *const usize as usize
        } else {
            0
        };
    }
}

// The captures read a chain built in a buffer on this thread's stack,
// through a pointer taken after its last change.
fn cap_at(t: &Thread, table: &Table, buf: &[usize; 64], p: Params) -> Captured {
    // SAFETY: buf starts with a frame record and lives on this stack.
    unsafe { capture(t, table, buf.as_ptr(), p) }
}

fn hit_at(t: &Thread, table: &Table, buf: &[usize; 64]) -> Option<(Signature, u32)> {
    let m = &t.paths[t.path_mru.get() as usize % PATHS];
    // SAFETY: as in cap_at.
    unsafe { path_hit(t, m, table, buf.as_ptr(), 5) }
}

fn cached_at(t: &Thread, table: &Table, buf: &[usize; 64], p: Params) -> Option<(Signature, u32)> {
    // SAFETY: as in cap_at.
    unsafe { cached(t, table, buf.as_ptr(), p) }
}

/// The module table and auto-mode parameters for 5 frames, what the path
/// tests capture chains built in a buffer with.
fn auto_five() -> (&'static Table, Params) {
    init_stack_facts();
    modules::refresh();
    let p = Params {
        frames: 5,
        unwind: Unwind::Auto,
        scan_words: 256,
    };
    (modules::table().unwrap(), p)
}

#[test]
fn a_thread_repeats_its_last_path_and_notices_any_change() {
    let (table, p) = auto_five();
    let code = libc::getpid as *const () as usize;
    crate::tls::with(|t| {
        let mut buf = [0usize; 64];
        for depth in [7, 3] {
            chain(&mut buf, depth);
            let full = cap_at(t, table, &buf, p);
            let m = &t.paths[t.path_mru.get() as usize % PATHS];
            assert_eq!(m.n.get() as usize, depth.min(5), "path kept");
            let hit = hit_at(t, table, &buf);
            assert_eq!(hit, Some((full.signature, full.stream)));
            let hit = cached_at(t, table, &buf, p);
            assert_eq!(hit, Some((full.signature, full.stream)));
            // Another return address among the first K: not this path.
            buf[4 * 2 + 1] += 8;
            assert_eq!(hit_at(t, table, &buf), None);
            let other = cap_at(t, table, &buf, p);
            assert_ne!(other.signature, full.signature);
            buf[4 * 2 + 1] -= 8;
            let back = cached_at(t, table, &buf, p);
            assert_eq!(
                back.map(|h| h.0),
                Some(full.signature),
                "back to the first path (shared cache, then the thread's)"
            );
        }
        // A chain that goes on where the cached one ended (zero link):
        // not the same path.
        chain(&mut buf, 3);
        let short = cap_at(t, table, &buf, p);
        assert_eq!(short.n, 3);
        buf[4 * 2] = &buf[4 * 3] as *const usize as usize;
        buf[4 * 3 + 1] = code + 64;
        buf[4 * 3] = 0;
        assert_eq!(hit_at(t, table, &buf), None);
        let longer = cap_at(t, table, &buf, p);
        assert_ne!(longer.signature, short.signature);
        // Cleared (as in a fork child): nothing the thread cached applies.
        clear_cache(t);
        assert_eq!(hit_at(t, table, &buf), None);
    });
}

#[test]
fn a_thread_alternating_two_paths_repeats_both_and_forgets_the_oldest_of_three() {
    let (table, p) = auto_five();
    crate::tls::with(|t| {
        clear_cache(t);
        let (mut a, mut b, mut c) = ([0usize; 64], [0usize; 64], [0usize; 64]);
        chain(&mut a, 6);
        chain(&mut b, 6);
        chain(&mut c, 6);
        b[1] += 8;
        c[4 + 1] += 8;
        let sa = cap_at(t, table, &a, p).signature;
        let sb = cap_at(t, table, &b, p).signature;
        assert_ne!(sa, sb);
        // Without the shared cache, both repeat from the thread's memos,
        // in any order.
        empty_shared_cache();
        for _ in 0..3 {
            assert_eq!(cached_at(t, table, &a, p).map(|h| h.0), Some(sa));
            assert_eq!(cached_at(t, table, &b, p).map(|h| h.0), Some(sb));
        }
        assert_eq!(cached_at(t, table, &b, p).map(|h| h.0), Some(sb));
        // A third path takes the least recently used memo (a's).
        let sc = cap_at(t, table, &c, p).signature;
        assert!(sc != sa && sc != sb);
        empty_shared_cache();
        assert_eq!(cached_at(t, table, &a, p), None, "a was forgotten");
        assert_eq!(cached_at(t, table, &b, p).map(|h| h.0), Some(sb));
        assert_eq!(cached_at(t, table, &c, p).map(|h| h.0), Some(sc));
        // Capturing a remembered path again reuses its memo: b and c stay.
        assert_eq!(cap_at(t, table, &c, p).signature, sc);
        empty_shared_cache();
        assert_eq!(cached_at(t, table, &b, p).map(|h| h.0), Some(sb));
        assert_eq!(cached_at(t, table, &c, p).map(|h| h.0), Some(sc));
        clear_cache(t);
    });
}

#[test]
fn bounds_of_this_thread_contain_sp() {
    init_stack_facts();
    let x = 0u64;
    let sp = &x as *const u64 as usize;
    let (lo, hi) = crate::tls::with(|t| stack_bounds(t, sp));
    assert!(lo <= sp && sp < hi, "{lo:x} {sp:x} {hi:x}");
    let from_maps = crate::stack::maps_lookup(sp).expect("stack is in /proc/self/maps");
    assert!(from_maps.0 <= sp && sp < from_maps.1);
    assert!(
        hi <= from_maps.1 + 4096 * 64,
        "bounds stay near the mapping"
    );
}

/// A remembered CFI path whose first frame takes its CFA from `rbp` (a
/// frame-pointer function) and whose second from `rsp` (code without frame
/// pointers), ending at the outermost frame: a repeat compares the words
/// at the remembered offsets while `rbp` is where it was, unwinds with the
/// rules when `rbp` moved, and misses when a return address differs.
#[test]
fn remembered_offsets_hold_while_rbp_does() {
    use crate::cfi::Rule;
    init_stack_facts();
    modules::refresh();
    let table = modules::table().unwrap();
    let code = libc::getpid as *const () as usize;
    let ra = [code + 1, code + 2, code + 3];
    // Frame 0: CFA = rbp + 16, its caller's rbp saved at CFA - 16; frame
    // 1: CFA = rsp + 24; the rule at ra[2] (not used) ends the path.
    let rules = [
        Rule {
            cfa_rbp: true,
            cfa_off: 16,
            rbp_at: Some(-16),
        },
        Rule {
            cfa_rbp: false,
            cfa_off: 24,
            rbp_at: None,
        },
    ];
    // The record {rbp, ra[0]} at buf[0]; rbp points `at` words up, where
    // frame 0's saved rbp and ra[1] lie; ra[2] 24 bytes above that CFA.
    fn lay_out(buf: &mut [usize; 64], ra: &[usize; 3], at: usize) {
        *buf = [0; 64];
        buf[0] = &buf[at] as *const usize as usize;
        buf[1] = ra[0];
        buf[at] = 0x1234; // the caller's rbp: not a frame pointer
        buf[at + 1] = ra[1];
        buf[at + 4] = ra[2];
    }
    crate::tls::with(|t| {
        let mut buf = [0usize; 64];
        lay_out(&mut buf, &ra, 4);
        let rec = buf.as_ptr();
        stack_bounds(t, rec as usize);
        let m = &t.paths[0];
        for (i, r) in rules.iter().enumerate() {
            m.rules[i].set(r.pack());
        }
        for (i, &a) in ra.iter().enumerate() {
            m.addrs[i].set(a);
        }
        let raw = Raw {
            addrs: [ra[0], ra[1], ra[2], 0, 0, 0, 0, 0],
            n: 3,
            hash: 0,
        };
        // SAFETY: rec points to buf, on this stack.
        assert_eq!(unsafe { fix_slots(t, m, rec, &raw) }, Some(true));
        assert_eq!((m.slots[0].get(), m.slots[1].get()), (40, 64));
        m.sig.set(42);
        m.stream.set(3);
        m.table.set(table as *const Table as usize);
        m.n.set(3 | CFI_PATH | CFI_END | CFI_CHECKS);
        // SAFETY: as above.
        let hit = |buf: &[usize; 64]| unsafe { cfi_path_hit(t, m, table, buf.as_ptr(), 5) };
        assert_eq!(hit(&buf), Some((Signature(42), 3)), "offsets");
        buf[8] += 1;
        assert_eq!(hit(&buf), None, "another return address");
        // rbp two words higher: the offsets do not apply, the rules do.
        lay_out(&mut buf, &ra, 6);
        assert_eq!(hit(&buf), Some((Signature(42), 3)), "rules");
        buf[10] += 1;
        assert_eq!(hit(&buf), None, "another return address, rules");
        // K frames needed and the path is not marked complete: no hit.
        lay_out(&mut buf, &ra, 4);
        m.n.set(3 | CFI_PATH | CFI_CHECKS);
        assert_eq!(hit(&buf), None, "shorter than K");
        m.clear();
    });
}
