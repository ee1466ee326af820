//! Reading an input file a user named (the daemon's configuration and
//! saved state, `pcstreamctl import`'s table, the shim's `PCSTREAM_MAP`)
//! so that a wrong path cannot hang or swell the reader: opened
//! non-blocking (a FIFO under that name is refused, not waited on), only a
//! regular file, and at most a given size (`/dev/zero` named by mistake
//! is refused, not read until memory runs out). And, once read, pointing
//! a parse error at the line it is on ([`toml_error`]).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Reads `path` whole if it is a regular file of at most `max` bytes.
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut data = Vec::new();
    f.take(max + 1).read_to_end(&mut data)?;
    if data.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} MiB", max >> 20),
        ));
    }
    Ok(data)
}

/// [`read_bounded`], as UTF-8 text.
pub fn read_bounded_text(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, max)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Where byte offset `at` of `text` is, to point a parse error at it:
/// the 1-based line number and that line, trimmed and cut to 80
/// characters (a type error's message names no key; its line does).
fn line_at(text: &str, at: usize) -> (usize, String) {
    let at = at.min(text.len());
    let before = &text.as_bytes()[..at];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let shown = text[start..].lines().next().unwrap_or("").trim();
    (line, shown.chars().take(80).collect())
}

/// A TOML parse error as one line: `PATH:LINE: message (`the line`)`.
pub fn toml_error(
    path: &str,
    text: &str,
    message: &str,
    span: Option<std::ops::Range<usize>>,
) -> String {
    // toml's syntax messages run over two lines.
    let m = message.trim().replace('\n', "; ");
    match span {
        Some(s) => {
            let (line, shown) = line_at(text, s.start);
            format!("{path}:{line}: {m} (`{shown}`)")
        }
        None => format!("{path}: {m}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parse_error_points_at_its_line() {
        let text = "# c\nstreams = \"x\"\n";
        assert_eq!(line_at(text, 14), (2, "streams = \"x\"".to_string()));
        assert_eq!(line_at(text, 0), (1, "# c".to_string()));
        assert_eq!(line_at(text, 999).0, 3);
        assert_eq!(
            toml_error("f", text, "bad\nvalue", Some(14..17)),
            "f:2: bad; value (`streams = \"x\"`)"
        );
        assert_eq!(toml_error("f", text, "bad", None), "f: bad");
    }

    #[test]
    fn only_small_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"streams = 5\n").unwrap();
        assert_eq!(read_bounded(&f, 1 << 20).unwrap(), b"streams = 5\n");
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(
            &fifo,
            nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
        )
        .unwrap();
        let e = read_bounded(&fifo, 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        std::fs::File::create(&f).unwrap().set_len(3 << 20).unwrap();
        let e = read_bounded(&f, 2 << 20).unwrap_err();
        assert_eq!(e.to_string(), "larger than 2 MiB");
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        let e = read_bounded_text(&f, 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "not UTF-8 text");
    }
}
