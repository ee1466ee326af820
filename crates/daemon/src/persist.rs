//! The learned table on disk: `state.json` in the state directory, written
//! atomically (temp file, fsync, rename, fsync of the directory) and
//! reloaded at start. A file that cannot be read back (corrupt, truncated,
//! another format version, or statistics no learner can have made: see
//! `EngineState::validate`) is moved aside as `state.json.bad-<unix time>`
//! with a log line, and the daemon starts fresh. `pcstreamctl import`
//! goes through the same [`parse`].

use anyhow::Context as _;
use pcstream_placement::online::EngineState;
use std::io::Write;
use std::path::{Path, PathBuf};

/// File name of the state in the state directory.
pub const STATE_FILE: &str = "state.json";

/// Path of the state file.
pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// Saves `st` atomically to `dir/state.json`.
pub fn save(dir: &Path, st: &EngineState) -> anyhow::Result<()> {
    let path = state_path(dir);
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    let data = serde_json::to_vec(st)?;
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    f.write_all(&data)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("write {}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, &path).with_context(|| format!("rename to {}", path.display()))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("fsync {}", dir.display()))?;
    Ok(())
}

/// Parses a state file's bytes and checks every value in it
/// (`EngineState::validate`), so that a state is used whole or not at all.
pub fn parse(data: &[u8]) -> Result<EngineState, String> {
    let st: EngineState = serde_json::from_slice(data).map_err(|e| e.to_string())?;
    st.validate()?;
    Ok(st)
}

/// Largest state file loaded (1 GiB: ten times what `max_signatures`
/// lets the daemon save; anything larger is not its own).
pub const MAX_STATE_BYTES: u64 = 1 << 30;

/// Loads `dir/state.json` (a regular file of at most [`MAX_STATE_BYTES`]):
/// `None` when absent; when unreadable, the file is moved aside (logged)
/// and `None` returned.
pub fn load(dir: &Path) -> Option<EngineState> {
    let path = state_path(dir);
    let data = match pcstream_placement::readfile::read_bounded(&path, MAX_STATE_BYTES) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        // There, but not a state this daemon could have written (a FIFO,
        // a device, a file past the size it ever saves).
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
            ) =>
        {
            return move_aside(dir, &path, &e.to_string());
        }
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "cannot read state; starting fresh");
            return None;
        }
    };
    match parse(&data) {
        Ok(st) => Some(st),
        Err(why) => move_aside(dir, &path, &why),
    }
}

/// Renames an unusable state file to `state.json.bad-SECS` (logged, so
/// that nothing is lost and the next save does not overwrite it): `None`.
fn move_aside(dir: &Path, path: &Path, why: &str) -> Option<EngineState> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let aside = dir.join(format!("{STATE_FILE}.bad-{secs}"));
    let moved = std::fs::rename(path, &aside);
    tracing::error!(
        path = %path.display(),
        moved_to = %aside.display(),
        moved = moved.is_ok(),
        error = %why,
        "state file is unusable: moved aside, starting fresh"
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcstream_placement::online::STATE_VERSION;

    #[test]
    fn round_trip_and_corrupt_files_moved_aside() {
        let d = tempfile::tempdir().unwrap();
        assert!(load(d.path()).is_none());
        let st = EngineState {
            version: STATE_VERSION,
            clock: 42,
            ..Default::default()
        };
        save(d.path(), &st).unwrap();
        assert_eq!(load(d.path()).unwrap(), st);
        let data = std::fs::read(state_path(d.path())).unwrap();
        std::fs::write(state_path(d.path()), &data[..data.len() / 2]).unwrap();
        assert!(load(d.path()).is_none());
        assert!(!state_path(d.path()).exists());
        let aside: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            aside.iter().any(|n| n.starts_with("state.json.bad-")),
            "{aside:?}"
        );
        let mut v = st.clone();
        v.version = 7;
        std::fs::write(state_path(d.path()), serde_json::to_vec(&v).unwrap()).unwrap();
        assert!(parse(&serde_json::to_vec(&v).unwrap())
            .unwrap_err()
            .contains("version 7"));
    }

    /// A saved state with a value no learner can have made (the one an
    /// import used to let through and then crash every start with) is
    /// treated like a corrupt file: moved aside, and the daemon starts
    /// fresh.
    #[test]
    fn a_state_with_an_absurd_value_is_moved_aside() {
        let d = tempfile::tempdir().unwrap();
        let mut sig = serde_json::json!({
            "written_pages": 10, "first_write": 1, "last_write": 10, "deaths": 2,
            "dead_pages": 2, "ewma_log2": 3.0, "ewma_weight": 0.5, "mean_log2": 3.0,
            "m2_log2": 1.0, "hist": [0, 2],
        });
        let state = |sig: &serde_json::Value| {
            serde_json::to_vec(&serde_json::json!({
                "version": STATE_VERSION, "clock": 1000, "signatures": [], "modules": [],
                "learners": [{"key": 0, "domain": "hints", "sigs": [[5, sig]]}],
            }))
            .unwrap()
        };
        assert_eq!(parse(&state(&sig)).unwrap().learners[0].sigs.len(), 1);
        sig["ewma_log2"] = serde_json::json!(-1e300);
        let bad = state(&sig);
        assert_eq!(
            parse(&bad).unwrap_err(),
            "learner uid 0 (hints), signature 0000000000000005: \
             ewma_log2 is -1e300, not a log2 lifetime (0 to 64)"
        );
        std::fs::write(state_path(d.path()), &bad).unwrap();
        assert!(load(d.path()).is_none());
        assert!(!state_path(d.path()).exists());
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("state.json.bad-")),
            "{names:?}"
        );
    }
}
