//! Shared by the raw-block-device tests (`shim_rawdev`, `daemon_rawdev`):
//! a loop device (root; detached on drop, panics included) and a sysfs
//! tree in which it has write streams (`PCSTREAM_SYSFS`: no device on this
//! host has any).
#![allow(dead_code)]

use pcstream_placement::env as var;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A loop device over a sparse file, detached on drop (panics included).
pub struct LoopDev {
    pub path: PathBuf,
    pub rdev: u64,
    _dir: tempfile::TempDir,
}

impl LoopDev {
    pub fn new(mib: u64) -> LoopDev {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(unsafe { libc::geteuid() }, 0, "loop devices need root");
        pcstream_tests::require_tool("losetup", "mount");
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("dev.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        let o = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&img)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let path = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim());
        let mut d = LoopDev {
            rdev: 0,
            path,
            _dir: dir,
        };
        // Attached: from here `d` detaches it if anything fails.
        d.rdev = std::fs::metadata(&d.path).unwrap().rdev();
        // The node's hint outlives its openers (and the loop device that
        // had the node before): start from none.
        let node = std::fs::File::open(&d.path).unwrap();
        let mut none = 0u64;
        // SAFETY: F_SET_RW_HINT reads the u64 we pass.
        let rc = unsafe {
            libc::fcntl(
                std::os::fd::AsRawFd::as_raw_fd(&node),
                pcstream_placement::hint::F_SET_RW_HINT,
                &mut none as *mut u64,
            )
        };
        assert_eq!(rc, 0, "F_SET_RW_HINT on {}", d.path.display());
        d
    }

    pub fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }

    pub fn id(&self) -> (u64, u64) {
        (self.rdev, 0)
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}

/// A sysfs tree in which `dev` has `streams` write streams.
pub fn sysfs_with_streams(dev: &LoopDev, streams: u32) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let q = root.path().join(format!(
        "dev/block/{}:{}/queue",
        libc::major(dev.rdev),
        libc::minor(dev.rdev)
    ));
    std::fs::create_dir_all(&q).unwrap();
    std::fs::write(q.join("max_write_streams"), format!("{streams}\n")).unwrap();
    root
}

/// The shim, told that `dev` has write streams (the tree in `sys`).
pub fn with_streams<R: WithEnv>(run: R, sys: &Path) -> R {
    run.with_env(var::SYSFS, sys.to_str().unwrap())
}

/// Something that takes environment variables (the shim tests' `Run`, a
/// `Command`).
pub trait WithEnv {
    /// Adds `k=v`.
    fn with_env(self, k: &str, v: &str) -> Self;
}

impl WithEnv for Command {
    fn with_env(mut self, k: &str, v: &str) -> Self {
        self.env(k, v);
        self
    }
}
