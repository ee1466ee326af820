//! The loaded-module table: every executable mapping of the process with the
//! identity of the module (ELF object) it belongs to.
//!
//! Built with `dl_iterate_phdr` in the library constructor and rebuilt after
//! each `dlopen` (the interposed `dlopen` calls [`refresh`]), never from the
//! write path. Readers are lock-free: the table is immutable once published
//! through an atomic pointer, and a replaced table is leaked rather than freed
//! (a signal handler may still be reading it; refreshes are rare). Identity is
//! `module_key_from_build_id` of the GNU build-id note, else
//! `module_key_from_path(path, file size)`.

use libc::{c_int, c_void, dl_phdr_info, size_t};
use pcstream_placement::signature::{module_key_from_build_id, module_key_from_path};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;

/// One loaded ELF object.
#[derive(Debug)]
pub struct Module {
    /// Stable identity (see the module docs).
    pub key: u64,
    /// Load bias (`dlpi_addr`): frame offsets are relative to it.
    pub base: usize,
    /// Path of the file (`/proc/self/exe` resolved for the main program).
    /// Leaked like the tables that hold it.
    pub path: &'static [u8],
    /// GNU build-id descriptor, empty when absent.
    pub build_id: &'static [u8],
    /// File size in bytes (0 when it cannot be stat'ed, e.g. the vDSO).
    pub size: u64,
    /// Whether this process already emitted the module's `ModuleInfo`.
    pub sent: AtomicBool,
    /// Whether this is libpcstream.so itself (its frames are skipped).
    pub own: bool,
    /// Whether this is one of the JDK's I/O natives (`java.rs`).
    pub jdk_io: bool,
    /// Function starts from its `.eh_frame_hdr` (scan validation).
    pub fdes: crate::ehhdr::FdeTable,
    /// The ELF entry point (runtime address) when this module is the
    /// program (`AT_ENTRY`) or the dynamic loader (`AT_BASE` + its
    /// `e_entry`): the first code the process ran, which has no caller (the
    /// CFI walk ends there, see `cfi::rule`); 0 for every other module.
    pub entry: usize,
}

/// An executable address range of a module.
#[derive(Debug, Clone, Copy)]
struct Range {
    start: usize,
    end: usize,
    module: u32,
}

/// An immutable snapshot of the loaded modules.
#[derive(Debug)]
pub struct Table {
    ranges: Box<[Range]>,
    /// The modules, indexed by `Range::module`.
    pub modules: Box<[Module]>,
    lo: usize,
    hi: usize,
    /// Generation: increases with every refresh (signature caches key on it).
    pub gen: u64,
}

/// Where an address lies.
#[derive(Debug, Clone, Copy)]
pub struct Hit<'a> {
    /// Its module.
    pub module: &'a Module,
    /// Address − load bias.
    pub offset: u64,
    /// Start of the executable range holding the address.
    pub range_start: usize,
    /// End of the executable range holding the address.
    pub range_end: usize,
}

impl Table {
    /// The module and module-relative offset of a code address.
    #[inline]
    pub fn lookup(&self, addr: usize) -> Option<Hit<'_>> {
        if addr < self.lo || addr >= self.hi {
            return None;
        }
        // Last range with start <= addr.
        let i = self.ranges.partition_point(|r| r.start <= addr);
        let r = self.ranges.get(i.checked_sub(1)?)?;
        if addr >= r.end {
            return None;
        }
        let module = self.modules.get(r.module as usize)?;
        Some(Hit {
            module,
            offset: (addr - module.base) as u64,
            range_start: r.start,
            range_end: r.end,
        })
    }

    /// Whether `addr` lies between the lowest and highest code address (a
    /// cheap pre-filter; [`Table::lookup`] decides).
    #[inline(always)]
    pub fn maybe_code(&self, addr: usize) -> bool {
        addr >= self.lo && addr < self.hi
    }

    /// Number of modules.
    pub fn len(&self) -> usize {
        self.modules.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }
}

/// The current table: `hot::table_slot()` (in the write path's hot
/// cache line), as a `Table` pointer.
fn table_slot() -> &'static AtomicPtr<Table> {
    // SAFETY: AtomicPtr<()> and AtomicPtr<Table> have the same layout (one
    // pointer); only this module stores to the slot, always a Table.
    unsafe { &*(crate::hot::table_slot() as *const AtomicPtr<()> as *const AtomicPtr<Table>) }
}
static REFRESH: Mutex<()> = Mutex::new(());

/// The current table (`None` before the constructor built it).
#[inline]
pub fn table() -> Option<&'static Table> {
    let p = table_slot().load(Ordering::Acquire);
    // SAFETY: a published table is leaked (never freed) and immutable apart
    // from its atomics, so a shared 'static reference is valid.
    unsafe { p.as_ref() }
}

/// Marks every module as not yet sent (fork child: a new process, new trace).
pub fn reset_sent() {
    if let Some(t) = table() {
        for m in t.modules.iter() {
            m.sent.store(false, Ordering::Relaxed);
        }
    }
}

struct Collect {
    own_addr: usize,
    /// `getauxval(AT_ENTRY)`, `getauxval(AT_BASE)`.
    at_entry: usize,
    at_base: usize,
    modules: Vec<Module>,
    ranges: Vec<Range>,
}

fn exe_path() -> Vec<u8> {
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.into_os_string().into_encoded_bytes())
        .unwrap_or_default()
}

fn file_size(path: &[u8]) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    if path.is_empty() || path[0] != b'/' {
        return 0;
    }
    std::fs::metadata(std::ffi::OsStr::from_bytes(path))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// The GNU build-id of a loaded object, from its PT_NOTE segments in memory.
///
/// # Safety
/// `info` must be a `dl_phdr_info` handed out by `dl_iterate_phdr`.
unsafe fn build_id(info: &dl_phdr_info) -> Vec<u8> {
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type != libc::PT_NOTE {
            continue;
        }
        let mut p = info.dlpi_addr as usize + ph.p_vaddr as usize;
        let end = p + ph.p_memsz as usize;
        while p + 12 <= end {
            // SAFETY: the note segment is mapped (PT_NOTE lies inside a PT_LOAD)
            // and we stay inside [p, end).
            let (namesz, descsz, ty) = unsafe {
                (
                    (p as *const u32).read_unaligned() as usize,
                    ((p + 4) as *const u32).read_unaligned() as usize,
                    ((p + 8) as *const u32).read_unaligned(),
                )
            };
            let name = p + 12;
            let desc = name + namesz.next_multiple_of(4);
            let next = desc + descsz.next_multiple_of(4);
            if next > end {
                break;
            }
            // SAFETY: [name, name+namesz) and [desc, desc+descsz) are inside the segment.
            let (n, d) = unsafe {
                (
                    std::slice::from_raw_parts(name as *const u8, namesz),
                    std::slice::from_raw_parts(desc as *const u8, descsz),
                )
            };
            if ty == 3 && n == b"GNU\0" {
                return d.to_vec();
            }
            p = next;
        }
    }
    Vec::new()
}

/// The entry point of the ELF object whose header is mapped at `base`
/// (0: not an x86-64 ELF header).
///
/// # Safety
/// `[base, base + 64)` must be mapped.
unsafe fn loader_entry(base: usize) -> usize {
    // SAFETY: guaranteed by the caller (64 bytes of ELF header).
    let (magic, e_entry) = unsafe {
        (
            (base as *const [u8; 4]).read_unaligned(),
            ((base + 24) as *const u64).read_unaligned(),
        )
    };
    if magic != *b"\x7fELF" || e_entry == 0 {
        return 0;
    }
    base.wrapping_add(e_entry as usize)
}

unsafe extern "C" fn collect_one(
    info: *mut dl_phdr_info,
    _size: size_t,
    data: *mut c_void,
) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our `Collect` as data.
    let (info, c) = unsafe { (&*info, &mut *(data as *mut Collect)) };
    let raw_name: &[u8] = if info.dlpi_name.is_null() {
        b""
    } else {
        // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
        unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    let path = if raw_name.is_empty() && c.modules.is_empty() {
        exe_path()
    } else {
        raw_name.to_vec()
    };
    // SAFETY: `info` comes from dl_iterate_phdr.
    let bid = unsafe { build_id(info) };
    let size = file_size(&path);
    let key = if bid.is_empty() {
        module_key_from_path(&path, size)
    } else {
        module_key_from_build_id(&bid)
    };
    let idx = c.modules.len() as u32;
    let base = info.dlpi_addr as usize;
    let mut own = false;
    let mut any = false;
    let mut fdes = crate::ehhdr::FdeTable::default();
    let mut header = false;
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_GNU_EH_FRAME && ph.p_memsz >= 12 {
            // SAFETY: PT_GNU_EH_FRAME is the mapped .eh_frame_hdr of this object.
            fdes = unsafe { crate::ehhdr::FdeTable::parse(base + ph.p_vaddr as usize) };
        }
        header |= ph.p_type == libc::PT_LOAD && ph.p_offset == 0 && ph.p_vaddr == 0;
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
            let start = base + ph.p_vaddr as usize;
            let end = start + ph.p_memsz as usize;
            own |= (start..end).contains(&c.own_addr);
            c.ranges.push(Range {
                start,
                end,
                module: idx,
            });
            any = true;
        }
    }
    let first = c.ranges.len()
        - c.ranges
            .iter()
            .rev()
            .take_while(|r| r.module == idx)
            .count();
    let entry = if c.ranges[first..]
        .iter()
        .any(|r| (r.start..r.end).contains(&c.at_entry))
    {
        c.at_entry
    } else if header && base != 0 && base == c.at_base {
        // SAFETY: a PT_LOAD maps file offset 0 at the load bias: the ELF
        // header (64 bytes) is mapped there.
        unsafe { loader_entry(base) }
    } else {
        0
    };
    if any {
        crate::java::note_module(&path);
        c.modules.push(Module {
            jdk_io: crate::java::is_io_native(&path),
            key,
            base,
            path: Box::leak(path.into_boxed_slice()),
            build_id: Box::leak(bid.into_boxed_slice()),
            size,
            sent: AtomicBool::new(false),
            own,
            fdes,
            entry,
        });
    }
    0
}

/// Rebuilds the table from `dl_iterate_phdr` and publishes it. Modules that
/// were already sent keep that state. Not for signal context (takes the
/// loader lock and allocates).
pub fn refresh() {
    let _g = REFRESH.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Collect {
        own_addr: refresh as *const () as usize,
        // SAFETY: getauxval reads the process's auxiliary vector.
        at_entry: unsafe { libc::getauxval(libc::AT_ENTRY) } as usize,
        // SAFETY: as above.
        at_base: unsafe { libc::getauxval(libc::AT_BASE) } as usize,
        modules: Vec::new(),
        ranges: Vec::new(),
    };
    // SAFETY: the callback matches dl_iterate_phdr's contract and `c` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(collect_one), &mut c as *mut Collect as *mut c_void) };
    if let Some(old) = table() {
        for m in c.modules.iter() {
            if old
                .modules
                .iter()
                .any(|o| o.key == m.key && o.base == m.base && o.sent.load(Ordering::Relaxed))
            {
                m.sent.store(true, Ordering::Relaxed);
            }
        }
    }
    c.ranges.sort_by_key(|r| r.start);
    let lo = c.ranges.first().map_or(0, |r| r.start);
    let hi = c.ranges.iter().map(|r| r.end).max().unwrap_or(0);
    let t = Box::new(Table {
        ranges: c.ranges.into_boxed_slice(),
        modules: c.modules.into_boxed_slice(),
        lo,
        hi,
        gen: table().map_or(1, |t| t.gen + 1),
    });
    table_slot().store(Box::into_raw(t), Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_own_code_and_libc() {
        refresh();
        let t = table().unwrap();
        assert!(t.len() >= 2);
        let me = t
            .lookup(finds_own_code_and_libc as *const () as usize)
            .expect("own code is mapped");
        assert!(me.module.own);
        let libc_hit = t
            .lookup(libc::getpid as *const () as usize)
            .expect("libc is mapped");
        assert!(!libc_hit.module.own);
        assert!(
            !libc_hit.module.build_id.is_empty(),
            "Debian's libc has a build-id"
        );
        assert_eq!(
            libc_hit.module.key,
            module_key_from_build_id(libc_hit.module.build_id)
        );
        assert!(t.lookup(0x10).is_none());
        let stack_var = 0u64;
        assert!(t.lookup(&stack_var as *const u64 as usize).is_none());
    }
}
