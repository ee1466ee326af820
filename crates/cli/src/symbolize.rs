//! Turning recorded frames `(module, offset)` into function names and source
//! lines. `offset` is the module-relative virtual address the shim recorded
//! (a return address), so it is looked up as `offset - 1` (inside the call
//! instruction) directly in the module file:
//!
//! 1. DWARF via `addr2line` (inlined frames included), from the module itself
//!    or from its detached debug file `/usr/lib/debug/.build-id/xx/yyyy.debug`;
//! 2. otherwise the ELF symbol table (`.symtab`, else `.dynsym`): the
//!    enclosing symbol when the address lies within its size;
//! 3. otherwise just `module+0xoffset`.
//!
//! Names are demangled (Rust legacy/v0, C++ Itanium without parameter lists).
//! Modules are loaded once and every address is resolved once.

use object::{Object, ObjectSymbol, SymbolKind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One function of a resolved frame (several when calls were inlined).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Function {
    /// Demangled name, when known.
    pub name: Option<String>,
    /// Source file and line, when DWARF has them.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Whether this function was inlined into the next one.
    pub inlined: bool,
}

/// A resolved frame.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Resolved {
    /// File name of the module (`libc.so.6`), or `?` when unknown.
    pub module: String,
    pub offset: u64,
    /// Innermost first; empty when nothing was found.
    pub functions: Vec<Function>,
}

impl Resolved {
    /// One-line form: `outer_fn (file:line) [inlined: f, g] module+0xoff`.
    pub fn display(&self) -> String {
        if self.module == "java" {
            if let Some(f) = self.functions.first().and_then(|f| f.name.clone()) {
                return f;
            }
        }
        let loc = format!("{}+{:#x}", self.module, self.offset);
        let Some(outer) = self.functions.last() else {
            return loc;
        };
        let mut s = outer.name.clone().unwrap_or_else(|| "??".into());
        if let (Some(f), Some(l)) = (&outer.file, outer.line) {
            s.push_str(&format!(" ({f}:{l})"));
        }
        if self.functions.len() > 1 {
            let inl: Vec<String> = self.functions[..self.functions.len() - 1]
                .iter()
                .rev()
                .map(|f| {
                    let mut n = f.name.clone().unwrap_or_else(|| "??".into());
                    if let (Some(file), Some(l)) = (&f.file, f.line) {
                        let base = Path::new(file)
                            .file_name()
                            .map_or(file.as_str(), |b| b.to_str().unwrap_or(file));
                        n.push_str(&format!(" ({base}:{l})"));
                    }
                    n
                })
                .collect();
            s.push_str(&format!(" [inlined: {}]", inl.join(" → ")));
        }
        format!("{s}  {loc}")
    }

    /// Whether any function name of the frame contains `needle`.
    #[allow(dead_code)]
    pub fn mentions(&self, needle: &str) -> bool {
        self.functions
            .iter()
            .any(|f| f.name.as_deref().is_some_and(|n| n.contains(needle)))
    }
}

/// Demangles a Rust or C++ symbol; other names come back unchanged.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        let opts = cpp_demangle::DemangleOptions::new()
            .no_params()
            .no_return_type();
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = s.demangle(&opts) {
                return d;
            }
        }
    }
    name.to_string()
}

/// Function symbols of an ELF file, sorted by address: (address, size, name).
fn symbol_table(obj: &object::File<'_>) -> Vec<(u64, u64, String)> {
    fn take<'d: 'f, 'f>(
        syms: impl Iterator<Item = object::Symbol<'d, 'f>>,
    ) -> Vec<(u64, u64, String)> {
        syms.filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
            .filter_map(|s| {
                let n = s.name().ok().filter(|n| !n.is_empty())?;
                Some((s.address(), s.size(), n.to_string()))
            })
            .collect()
    }
    let mut v = take(obj.symbols());
    if v.is_empty() {
        v = take(obj.dynamic_symbols());
    }
    // Prefer the sized, then the shorter-named (non-versioned alias) symbol per address.
    v.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(b.1.cmp(&a.1))
            .then(a.2.len().cmp(&b.2.len()))
    });
    v.dedup_by_key(|s| s.0);
    v
}

fn lookup_symbol(table: &[(u64, u64, String)], addr: u64) -> Option<&str> {
    let i = table.partition_point(|s| s.0 <= addr);
    let (start, size, name) = table.get(i.checked_sub(1)?)?;
    (*size == 0 || addr < start + size).then_some(name.as_str())
}

struct Loaded {
    dwarf: Option<addr2line::Loader>,
    symbols: Vec<(u64, u64, String)>,
}

/// Why a module cannot be symbolized (kept for the report).
#[derive(Debug, Clone)]
enum Unavailable {
    Unreadable(String),
    Changed,
}

/// Detached debug file for a build-id, if installed.
fn debug_file_for(build_id: &[u8]) -> Option<PathBuf> {
    if build_id.len() < 2 {
        return None;
    }
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let p = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    p.is_file().then_some(p)
}

fn load(path: &str, build_id: &[u8]) -> Result<Loaded, Unavailable> {
    let data = std::fs::read(path).map_err(|e| Unavailable::Unreadable(format!("{path}: {e}")))?;
    let obj = object::File::parse(data.as_slice())
        .map_err(|e| Unavailable::Unreadable(format!("{path}: {e}")))?;
    if !build_id.is_empty() {
        if let Ok(Some(id)) = obj.build_id() {
            if id != build_id {
                return Err(Unavailable::Changed);
            }
        }
    }
    let mut symbols = symbol_table(&obj);
    let mut dwarf = None;
    let has_dwarf = |o: &object::File<'_>| o.section_by_name(".debug_info").is_some();
    if let Some(dbg) = debug_file_for(build_id) {
        if let Ok(d) = std::fs::read(&dbg) {
            if let Ok(dobj) = object::File::parse(d.as_slice()) {
                let dsyms = symbol_table(&dobj);
                if dsyms.len() > symbols.len() {
                    symbols = dsyms;
                }
                if has_dwarf(&dobj) {
                    dwarf = addr2line::Loader::new(&dbg).ok();
                }
            }
        }
    }
    if dwarf.is_none() && has_dwarf(&obj) {
        dwarf = addr2line::Loader::new(path).ok();
    }
    Ok(Loaded { dwarf, symbols })
}

/// Resolves frames, caching modules and addresses.
#[derive(Default)]
pub struct Symbolizer {
    modules: HashMap<u64, Result<Loaded, Unavailable>>,
    cache: HashMap<(u64, u64), Resolved>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("modules", &self.modules.len())
            .field("cached", &self.cache.len())
            .finish()
    }
}

impl Symbolizer {
    /// A symbolizer with nothing loaded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Resolves `offset` in the module `module_key` found at `path` with
    /// GNU build-id `build_id` (empty when unknown or absent).
    pub fn resolve(
        &mut self,
        module_key: u64,
        path: &str,
        build_id: &[u8],
        offset: u64,
    ) -> Resolved {
        if let Some(r) = self.cache.get(&(module_key, offset)) {
            return r.clone();
        }
        if let Some(name) = pcstream_placement::java::display(path, offset) {
            // A Java method (`java.rs` in the placement crate): named by
            // the shim, nothing to load.
            return Resolved {
                module: "java".into(),
                offset,
                functions: vec![Function {
                    name: Some(name),
                    file: None,
                    line: None,
                    inlined: false,
                }],
            };
        }
        let module = Path::new(path)
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .unwrap_or(if path.is_empty() { "?" } else { path })
            .to_string();
        let loaded = self.modules.entry(module_key).or_insert_with(|| {
            if path.is_empty() || path.starts_with('[') {
                Err(Unavailable::Unreadable(format!("{path}: not a file")))
            } else {
                load(path, build_id)
            }
        });
        let probe = offset.saturating_sub(1);
        let mut functions = Vec::new();
        if let Ok(l) = loaded {
            if let Some(d) = &l.dwarf {
                if let Ok(mut it) = d.find_frames(probe) {
                    while let Ok(Some(f)) = it.next() {
                        let name = f
                            .function
                            .as_ref()
                            .and_then(|n| n.raw_name().ok())
                            .map(|n| demangle(&n));
                        let (file, line) = f
                            .location
                            .map(|loc| (loc.file.map(str::to_string), loc.line))
                            .unwrap_or((None, None));
                        functions.push(Function {
                            name,
                            file,
                            line,
                            inlined: true,
                        });
                    }
                }
            }
            if let Some(last) = functions.last_mut() {
                last.inlined = false;
                if last.name.is_none() {
                    last.name = lookup_symbol(&l.symbols, probe).map(demangle);
                }
            } else if let Some(n) = lookup_symbol(&l.symbols, probe) {
                functions.push(Function {
                    name: Some(demangle(n)),
                    file: None,
                    line: None,
                    inlined: false,
                });
            }
        }
        let r = Resolved {
            module,
            offset,
            functions,
        };
        self.cache.insert((module_key, offset), r.clone());
        r
    }

    /// Modules that could not be used, with the reason, for a footnote.
    pub fn problems(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .modules
            .values()
            .filter_map(|m| match m {
                Err(Unavailable::Unreadable(why)) => Some(why.clone()),
                Err(Unavailable::Changed) => None,
                Ok(_) => None,
            })
            .collect();
        let changed = self
            .modules
            .values()
            .filter(|m| matches!(m, Err(Unavailable::Changed)))
            .count();
        if changed > 0 {
            v.push(format!(
                "{changed} module(s) changed on disk since recording (build-id differs)"
            ));
        }
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn marker_function_for_symbolize_test() -> u64 {
        std::hint::black_box(42)
    }

    /// The test executable and the ELF address of the marker function.
    fn marker_vaddr() -> (PathBuf, u64) {
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let obj = object::File::parse(data.as_slice()).unwrap();
        let sym = obj
            .symbols()
            .find(|s| {
                s.name()
                    .is_ok_and(|n| n.contains("marker_function_for_symbolize_test"))
            })
            .expect("test binary has a symbol table");
        (exe, sym.address())
    }

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(
            demangle("_ZN7rocksdb18WritableFileWriter6AppendERKNS_5SliceEjNS_3Env10IOPriorityE"),
            "rocksdb::WritableFileWriter::Append"
        );
        assert_eq!(demangle("_ZN3foo3bar17h0123456789abcdefE"), "foo::bar");
        assert_eq!(demangle("write"), "write");
    }

    #[test]
    fn resolves_own_function_with_dwarf_or_symbols() {
        assert_eq!(marker_function_for_symbolize_test(), 42);
        let (exe, vaddr) = marker_vaddr();
        let mut s = Symbolizer::new();
        // A return address a few bytes into the function.
        let r = s.resolve(1, exe.to_str().unwrap(), &[], vaddr + 4);
        assert!(r.mentions("marker_function_for_symbolize_test"), "{r:?}");
        let outer = r.functions.last().unwrap();
        if outer.file.is_some() {
            assert!(
                outer.file.as_deref().unwrap().ends_with("symbolize.rs"),
                "{r:?}"
            );
        }
        assert!(r.display().contains("+0x"), "{}", r.display());
    }

    #[test]
    fn unknown_module_or_address_falls_back_to_module_offset() {
        let mut s = Symbolizer::new();
        let r = s.resolve(2, "/nonexistent/libfoo.so", &[], 0x1234);
        assert!(r.functions.is_empty());
        assert_eq!(r.display(), "libfoo.so+0x1234");
        assert!(s
            .problems()
            .iter()
            .any(|p| p.contains("/nonexistent/libfoo.so")));
    }

    #[test]
    fn dynsym_only_library_is_named_from_its_exported_symbols() {
        // libc is stripped of DWARF on Debian but exports `write`.
        let libc = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("glibc is installed");
        let data = std::fs::read(libc).unwrap();
        let obj = object::File::parse(data.as_slice()).unwrap();
        let w = obj
            .dynamic_symbols()
            .find(|s| s.name() == Ok("__write") || s.name() == Ok("write"))
            .expect("libc exports write");
        let mut s = Symbolizer::new();
        let r = s.resolve(3, libc, &[], w.address() + 2);
        assert!(r.mentions("write"), "{r:?}");
    }
}
