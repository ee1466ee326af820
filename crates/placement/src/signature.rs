//! Program-context signatures: how a call path becomes one stable 64-bit key.
//!
//! A signature is a hash of the ordered sequence of return addresses that
//! reached an intercepted `write()`, each normalised to
//! `(module identity, offset in the module file)`. The module identity is a
//! hash of the module's GNU build-id, or of its path and size when it has
//! none, so the same call path yields the same signature across runs,
//! processes and ASLR. The paper summed raw addresses; a sum is order-blind
//! and changes with every ASLR layout, so pcstream hashes instead.
//!
//! Everything here is allocation-free and `const`-friendly: the shim calls it
//! on its hot path.

use std::fmt;

/// A program-context signature.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Signature(pub u64);

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature({:016x})", self.0)
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl std::str::FromStr for Signature {
    type Err = std::num::ParseIntError;
    /// Parses the 16-hex-digit form printed by `Display` (an optional `0x` prefix is accepted).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let s = s.strip_prefix("0x").unwrap_or(s);
        u64::from_str_radix(s, 16).map(Signature)
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over bytes, continuing from `h`.
const fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    h
}

/// Final avalanche of SplitMix64: spreads every input bit over the output.
#[inline]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Module identity from a GNU build-id note's descriptor bytes.
pub const fn module_key_from_build_id(build_id: &[u8]) -> u64 {
    mix64(fnv1a(FNV_OFFSET ^ 0x6275_696c_6469_6400, build_id))
}

/// Module identity for a module without build-id: its path and file size.
pub const fn module_key_from_path(path: &[u8], size: u64) -> u64 {
    let h = fnv1a(FNV_OFFSET ^ 0x7061_7468_0000_0000, path);
    mix64(fnv1a(h, &size.to_le_bytes()))
}

/// Incremental signature builder: feed frames innermost first.
#[derive(Debug, Clone, Copy)]
pub struct SignatureBuilder {
    h: u64,
    frames: u32,
}

impl Default for SignatureBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SignatureBuilder {
    /// An empty builder.
    pub const fn new() -> Self {
        SignatureBuilder {
            h: 0x7063_7374_7265_616d, // "pcstream"
            frames: 0,
        }
    }

    /// Adds one normalised frame.
    #[inline]
    pub fn push(&mut self, module_key: u64, offset: u64) {
        let f = mix64(module_key ^ offset.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        self.h = mix64(self.h.rotate_left(23) ^ f).wrapping_add(self.frames as u64);
        self.frames += 1;
    }

    /// Number of frames pushed so far.
    pub fn len(&self) -> u32 {
        self.frames
    }

    /// Whether no frame was pushed.
    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// The signature of the frames pushed so far. Never 0 (0 means "unknown").
    pub fn finish(&self) -> Signature {
        let s = mix64(self.h ^ self.frames as u64);
        Signature(if s == 0 { 1 } else { s })
    }
}

/// Signature of a whole sequence of `(module_key, offset)` frames, innermost first.
pub fn signature_of(frames: impl IntoIterator<Item = (u64, u64)>) -> Signature {
    let mut b = SignatureBuilder::new();
    for (m, o) in frames {
        b.push(m, o);
    }
    b.finish()
}

/// Mixes a refinement into a key (splitmix64 finaliser; never 0).
pub fn refine_key(key: u64, salt: u64) -> u64 {
    let mut z = key ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z.max(1)
}

/// The age class of an in-place write onto a page that held data before
/// the writing process first saw its file (a database restarted on its
/// own files): its age is unknown, longer than the process has run
/// (`WriteEvent.age_class`; the shim's `pageage.rs`). Real classes are
/// 1..=16 (a 32-bit clock in pages, ×4 buckets); the wire carries ≤ 127.
pub const AGE_OLDER: u32 = 127;

/// The key a write of signature `sig` with age class `age_class` is
/// learnt and looked up under: `sig` itself for class 0 (a free page, or
/// no age known), else `sig` refined by the class's bucket as the
/// replay's `prev_lifetime` refinement keys it
/// ([`refine_key`]`(sig, 0x10000 | bucket)`),
/// so that the live keys and the replayed ones are the same function of
/// a page's previous lifetime.
pub fn age_key(sig: u64, age_class: u32) -> u64 {
    if age_class == 0 || sig == 0 {
        sig
    } else {
        refine_key(sig, 0x1_0000 | u64::from(age_class - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn order_matters() {
        let a = signature_of([(1, 10), (2, 20)]);
        let b = signature_of([(2, 20), (1, 10)]);
        assert_ne!(a, b);
    }

    #[test]
    fn module_identity_separates_build_id_and_path() {
        assert_ne!(
            module_key_from_build_id(b"abc"),
            module_key_from_path(b"abc", 0)
        );
        assert_ne!(
            module_key_from_path(b"/lib/x.so", 1),
            module_key_from_path(b"/lib/x.so", 2)
        );
    }

    #[test]
    fn display_parse_round_trip() {
        let s = signature_of([(7, 8)]);
        assert_eq!(s.to_string().parse::<Signature>().unwrap(), s);
        assert_eq!(format!("0x{s}").parse::<Signature>().unwrap(), s);
        assert!("zz".parse::<Signature>().is_err());
    }

    proptest! {
        #[test]
        fn deterministic_and_nonzero(frames in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..8)) {
            let a = signature_of(frames.clone());
            let b = signature_of(frames);
            prop_assert_eq!(a, b);
            prop_assert_ne!(a.0, 0);
        }

        #[test]
        fn one_changed_frame_changes_signature(
            frames in proptest::collection::vec((any::<u64>(), any::<u64>()), 1..6),
            idx in any::<prop::sample::Index>(),
            delta in 1u64..,
        ) {
            let mut other = frames.clone();
            let i = idx.index(other.len());
            other[i].1 = other[i].1.wrapping_add(delta);
            prop_assert_ne!(signature_of(frames), signature_of(other));
        }
    }
}
