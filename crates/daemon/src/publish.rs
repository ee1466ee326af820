//! Publishes the engine's mapping into the runtime directory: one table
//! file per uid, `mapping.<uid>` (or `mapping.all` when users share a
//! learner), holding every learning domain of that uid: the `hints`
//! domain's signatures as themselves, another domain's under
//! `delivery::table_key` (a shim looks a write up under its file's domain's
//! key), in the layout of `pcstream_placement::table`, mode 0644 (clients
//! map it read-only). Changes are written in place into the shared mapping
//! (atomic slot stores, then the generation bump); when a table must grow, a
//! new file is written beside it and renamed over the name, and the old one
//! is flagged replaced so running readers reopen. At start any file left by
//! a previous daemon is flagged replaced the same way.

use memmap2::MmapMut;
use pcstream_placement::delivery::{device_key, table_key};
use pcstream_placement::online::{Mapping, SHARED};
use pcstream_placement::table::{self, TableWriter};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

/// File name of a learner's table.
pub fn table_name(key: u32) -> String {
    if key == SHARED {
        "mapping.all".into()
    } else {
        format!("mapping.{key}")
    }
}

struct Published {
    map: MmapMut,
    /// What the file holds: signature → (stream, hint).
    entries: BTreeMap<u64, (u32, u8)>,
}

impl Published {
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page-aligned, its length a multiple of 8,
        // and it lives as long as `self`; other processes only read it.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), self.map.len() / 8)
        }
    }
}

/// The table files of every learner.
pub struct Publisher {
    dir: PathBuf,
    streams: u32,
    tables: BTreeMap<u32, Published>,
    generation: u64,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("dir", &self.dir)
            .field("tables", &self.tables.len())
            .finish()
    }
}

fn create(path: &Path, slots: usize, streams: u32, generation: u64) -> anyhow::Result<MmapMut> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .map_err(|e| anyhow::anyhow!("create {}: {e}", tmp.display()))?;
    f.set_len((table::table_words(slots) * 8) as u64)?;
    // SAFETY: a fresh file only this daemon writes; readers map it read-only.
    let map = unsafe { MmapMut::map_mut(&f)? };
    {
        // SAFETY: page-aligned mapping of table_words(slots) words.
        let words =
            unsafe { std::slice::from_raw_parts(map.as_ptr().cast::<AtomicU64>(), map.len() / 8) };
        let mut w = TableWriter::init(words, slots, streams)?;
        w.set_generation(generation);
    }
    Ok(map)
}

/// Flags an existing table file replaced (a previous daemon's, or the one
/// being swapped out).
fn flag_replaced(path: &Path) {
    let Ok(f) = OpenOptions::new().read(true).write(true).open(path) else {
        return;
    };
    // SAFETY: a table file of ours; only its flags word is changed, atomically.
    let Ok(map) = (unsafe { MmapMut::map_mut(&f) }) else {
        return;
    };
    // SAFETY: page-aligned mapping, length rounded down to words.
    let words =
        unsafe { std::slice::from_raw_parts(map.as_ptr().cast::<AtomicU64>(), map.len() / 8) };
    if let Ok(mut w) = TableWriter::attach(words) {
        w.mark_replaced();
    }
}

impl Publisher {
    /// A publisher writing into `dir`; old table files there are flagged
    /// replaced (and will be renamed over at the first publish).
    pub fn new(dir: &Path, streams: u32) -> Self {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("mapping.") && !name.ends_with(".tmp") {
                    flag_replaced(&e.path());
                }
            }
        }
        Publisher {
            dir: dir.to_path_buf(),
            streams,
            tables: BTreeMap::new(),
            generation: 0,
        }
    }

    /// Publications so far (the tables' generation word).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Path of a learner's table.
    pub fn path(&self, key: u32) -> PathBuf {
        self.dir.join(table_name(key))
    }

    /// Writes `mapping` (all learners) and the device entries `devices`
    /// ((device, class), `delivery::device_key`; in every uid's table) into
    /// the tables; returns how many entries changed.
    pub fn publish(&mut self, mapping: &Mapping, devices: &[(u64, u32)]) -> anyhow::Result<usize> {
        self.generation += 1;
        let mut by_key: BTreeMap<u32, BTreeMap<u64, (u32, u8)>> = BTreeMap::new();
        for &(k, sig, s, h) in mapping {
            by_key
                .entry(k.uid)
                .or_default()
                .insert(table_key(sig, k.domain), (s, h));
        }
        for t in by_key.values_mut() {
            for &(dev, class) in devices {
                t.insert(device_key(dev), (class, 0));
            }
        }
        let mut changed = 0;
        for (key, want) in by_key {
            changed += self.publish_one(key, &want)?;
        }
        Ok(changed)
    }

    fn publish_one(&mut self, key: u32, want: &BTreeMap<u64, (u32, u8)>) -> anyhow::Result<usize> {
        let path = self.path(key);
        let have: BTreeSet<u64> = self
            .tables
            .get(&key)
            .map(|p| p.entries.keys().copied().collect())
            .unwrap_or_default();
        let new_keys = want.keys().filter(|s| !have.contains(s)).count();
        let fits = self
            .tables
            .get(&key)
            .is_some_and(|p| TableWriter::attach(p.words()).is_ok_and(|w| w.has_room(new_keys)));
        if !fits {
            // A new, larger file renamed over the name.
            let slots = table::slots_for(want.len() + have.len());
            let map = create(&path, slots, self.streams, self.generation)?;
            let mut p = Published {
                map,
                entries: BTreeMap::new(),
            };
            {
                let mut w = TableWriter::attach(p.words())?;
                for (&sig, &v) in want {
                    w.set(sig, Some(v))?;
                }
                w.set_generation(self.generation);
            }
            p.entries = want.clone();
            std::fs::rename(path.with_extension("tmp"), &path)
                .map_err(|e| anyhow::anyhow!("rename to {}: {e}", path.display()))?;
            if let Some(old) = self.tables.insert(key, p) {
                if let Ok(mut w) = TableWriter::attach(old.words()) {
                    w.mark_replaced();
                }
                let _ = old.map.flush_async();
            } else {
                // Nothing of ours was there: a stale file, already flagged.
            }
            return Ok(want.len());
        }
        let p = self.tables.get_mut(&key).expect("checked above");
        let mut changed = 0;
        let words: &[AtomicU64] = {
            // SAFETY: as in Published::words; the borrow of `p.map` lasts
            // only through this function while `p` stays in `self.tables`.
            unsafe {
                std::slice::from_raw_parts(p.map.as_ptr().cast::<AtomicU64>(), p.map.len() / 8)
            }
        };
        let mut w = TableWriter::attach(words)?;
        for (&sig, &v) in want {
            if p.entries.get(&sig) != Some(&v) {
                w.set(sig, Some(v))?;
                changed += 1;
            }
        }
        let gone: Vec<u64> = p
            .entries
            .keys()
            .filter(|s| !want.contains_key(s))
            .copied()
            .collect();
        for sig in gone {
            w.set(sig, None)?;
            changed += 1;
        }
        p.entries = want.clone();
        w.set_generation(self.generation);
        Ok(changed)
    }
}
