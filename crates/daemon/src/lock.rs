//! One daemon per directory: before it touches anything in its runtime
//! directory (sockets, mapping tables) or its state directory
//! (`state.json`), pcstreamd takes an advisory lock (`flock`, exclusive,
//! non-blocking) on a lock file in each, [`RUNTIME_LOCK`] and
//! [`STATE_LOCK`], and holds it for its life. A second daemon on either
//! directory is refused naming the first one's pid (written into the lock
//! file) and leaves the first one's files alone; before, it unlinked and
//! rebound the first one's sockets and both saved to the same `state.json`.
//!
//! The kernel releases a `flock` when its holder dies, so a lock file left
//! by a killed daemon does not block a restart: the file stays (removing it
//! at exit would let a third daemon lock a new file while a second still
//! holds the old one), only its lock goes.

use anyhow::Context as _;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Lock file in the runtime directory.
pub const RUNTIME_LOCK: &str = "pcstreamd.lock";

/// Lock file in the state directory (another name than [`RUNTIME_LOCK`]:
/// both directories may be one, and a second `flock` of the same file
/// through another open file would fail in the same process).
pub const STATE_LOCK: &str = "state.lock";

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Locks `dir/name` for this process, writing its pid into the file.
/// `what` names the directory in the refusal ("is running on DIR", "uses
/// the state directory DIR").
pub fn acquire(dir: &Path, name: &str, what: &str) -> anyhow::Result<DirLock> {
    let path = dir.join(name);
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(&path)
        .with_context(|| format!("cannot open lock file {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => {
            let pid = format!("{}\n", std::process::id());
            f.set_len(0)
                .and_then(|_| f.rewind())
                .and_then(|_| f.write_all(pid.as_bytes()))
                .with_context(|| format!("cannot write lock file {}", path.display()))?;
            Ok(DirLock { _file: f })
        }
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = f.read_to_string(&mut text);
            let who = match text.trim().parse::<u32>() {
                Ok(pid) => format!("another pcstreamd (pid {pid})"),
                Err(_) => "another pcstreamd".to_string(),
            };
            anyhow::bail!("{who} {what} {}", dir.display())
        }
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_naming_the_first_and_a_released_lock_is_taken() {
        let d = tempfile::tempdir().unwrap();
        let first = acquire(d.path(), RUNTIME_LOCK, "is running on").unwrap();
        let text = std::fs::read_to_string(d.path().join(RUNTIME_LOCK)).unwrap();
        assert_eq!(text, format!("{}\n", std::process::id()));
        let e = acquire(d.path(), RUNTIME_LOCK, "is running on").unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            format!(
                "another pcstreamd (pid {}) is running on {}",
                std::process::id(),
                d.path().display()
            )
        );
        // The state lock is another file: one directory may be both.
        let state = acquire(d.path(), STATE_LOCK, "uses the state directory").unwrap();
        drop(first);
        // A stale file (its holder gone) does not block.
        let again = acquire(d.path(), RUNTIME_LOCK, "is running on").unwrap();
        drop((again, state));
    }
}
