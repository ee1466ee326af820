//! Linux write-lifetime hints (`F_SET_RW_HINT`) and their relation to streams.
//!
//! The kernel knows five hint values besides "not set"; pcstream uses the four
//! lifetime classes SHORT..EXTREME as four streams (stream 1 = shortest), and
//! leaves stream 0 (unknown) without a hint.

/// `fcntl` command to set a file's write-lifetime hint (`F_LINUX_SPECIFIC_BASE + 12`).
pub const F_SET_RW_HINT: i32 = 1024 + 12;
/// `fcntl` command to read a file's write-lifetime hint (`F_LINUX_SPECIFIC_BASE + 11`).
pub const F_GET_RW_HINT: i32 = 1024 + 11;

/// The write-lifetime hint the kernel holds for the file at `path`
/// (`F_GET_RW_HINT`: the raw `RWH_WRITE_LIFE_*` value, 0 = not set).
pub fn read_file_hint(path: &std::path::Path) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path)?;
    let mut v = 0u64;
    // SAFETY: F_GET_RW_HINT writes one u64, which `v` is.
    let rc = unsafe { libc::fcntl(f.as_raw_fd(), F_GET_RW_HINT, &mut v as *mut u64) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(v)
}

/// `RWH_WRITE_LIFE_*` values as the kernel defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u64)]
pub enum RwHint {
    /// `RWH_WRITE_LIFE_NOT_SET`
    NotSet = 0,
    /// `RWH_WRITE_LIFE_NONE`
    None = 1,
    /// `RWH_WRITE_LIFE_SHORT`
    Short = 2,
    /// `RWH_WRITE_LIFE_MEDIUM`
    Medium = 3,
    /// `RWH_WRITE_LIFE_LONG`
    Long = 4,
    /// `RWH_WRITE_LIFE_EXTREME`
    Extreme = 5,
}

/// Number of lifetime classes the kernel hints can express (SHORT..EXTREME).
pub const HINT_STREAMS: u32 = 4;

impl RwHint {
    /// The hint for a raw value, or `None` when the kernel would reject it (EINVAL).
    pub fn from_raw(v: u64) -> Option<RwHint> {
        Some(match v {
            0 => RwHint::NotSet,
            1 => RwHint::None,
            2 => RwHint::Short,
            3 => RwHint::Medium,
            4 => RwHint::Long,
            5 => RwHint::Extreme,
            _ => return None,
        })
    }

    /// The raw `u64` the kernel expects.
    pub fn raw(self) -> u64 {
        self as u64
    }

    /// Hint for a pcstream stream id when only the kernel's four lifetime
    /// classes are available: 0 → not set, 1 → SHORT, 2 → MEDIUM, 3 → LONG,
    /// 4 and above → EXTREME.
    pub fn for_stream(stream: u32) -> RwHint {
        match stream {
            0 => RwHint::NotSet,
            1 => RwHint::Short,
            2 => RwHint::Medium,
            3 => RwHint::Long,
            _ => RwHint::Extreme,
        }
    }

    /// Stream id a hint stands for (inverse of [`RwHint::for_stream`]; NONE → 0).
    pub fn stream(self) -> u32 {
        match self {
            RwHint::NotSet | RwHint::None => 0,
            RwHint::Short => 1,
            RwHint::Medium => 2,
            RwHint::Long => 3,
            RwHint::Extreme => 4,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip_and_rejects_out_of_range() {
        for v in 0..=5 {
            assert_eq!(RwHint::from_raw(v).unwrap().raw(), v);
        }
        assert_eq!(RwHint::from_raw(6), None);
        assert_eq!(RwHint::from_raw(u64::MAX), None);
    }

    #[test]
    fn stream_mapping_is_monotone_and_invertible() {
        for s in 0..=4 {
            assert_eq!(RwHint::for_stream(s).stream(), s);
        }
        assert_eq!(RwHint::for_stream(9), RwHint::Extreme);
        assert!(RwHint::for_stream(1) < RwHint::for_stream(2));
    }
}
