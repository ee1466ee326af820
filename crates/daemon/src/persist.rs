//! The learned table on disk: `state.json` in the state directory, written
//! atomically (temp file, fsync, rename, fsync of the directory) and
//! reloaded at start. A file that cannot be read back (corrupt, truncated,
//! another format version) is moved aside as `state.json.bad-<unix time>`
//! with a log line, and the daemon starts fresh.

use anyhow::Context as _;
use pcstream_placement::online::{EngineState, STATE_VERSION};
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

/// Parses a state file's bytes.
pub fn parse(data: &[u8]) -> Result<EngineState, String> {
    let st: EngineState = serde_json::from_slice(data).map_err(|e| e.to_string())?;
    if st.version != STATE_VERSION {
        return Err(format!(
            "format version {} (this daemon reads {STATE_VERSION})",
            st.version
        ));
    }
    Ok(st)
}

/// Loads `dir/state.json`: `None` when absent; when unreadable, the file is
/// moved aside (logged) and `None` returned.
pub fn load(dir: &Path) -> Option<EngineState> {
    let path = state_path(dir);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "cannot read state; starting fresh");
            return None;
        }
    };
    match parse(&data) {
        Ok(st) => Some(st),
        Err(why) => {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let aside = dir.join(format!("{STATE_FILE}.bad-{secs}"));
            let moved = std::fs::rename(&path, &aside);
            tracing::error!(
                path = %path.display(),
                moved_to = %aside.display(),
                moved = moved.is_ok(),
                error = %why,
                "state file is unusable: moved aside, starting fresh"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
