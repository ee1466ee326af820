//! Java frames in signatures: how a Java method is carried by the wire
//! format, what keeps its identity stable across runs, which JDK classes the
//! shim looks through, and the one-line form the tools print.
//!
//! A Java method is a *module* of the wire format: its `ModuleInfo` path is
//! `java:<class>.<method><descriptor>` (`java:org.h2.mvstore.FileStore.writeFully(JLjava/nio/ByteBuffer;)V`),
//! its key is [`method_key`] of that text, and a frame's offset is the
//! bytecode index (bci) of the call in it (`NATIVE_BCI` in a native
//! method). Signatures are then built from `(key, bci)` like native ones
//! (`signature::SignatureBuilder`), and every tool that already resolves
//! `(module, offset)` frames shows Java frames through [`display`].
//!
//! Class names are normalised so that a run's generated classes get the
//! same name in every run ([`method_path`]): hidden classes lose their
//! address suffix (`Foo$$Lambda$14/0x0000000800c0b0a8`), lambda, proxy and
//! reflection-accessor classes lose their sequence numbers. jmethodIDs are
//! never part of a key.
//!
//! Plain byte-slice code with no allocation except in [`display`]: the shim
//! names methods inside an intercepted `write`.

use crate::signature::module_key_from_path;

/// Prefix of a Java method's module path.
pub const PREFIX: &str = "java:";

/// The frame offset of a native method (JVMTI location −1).
pub const NATIVE_BCI: u64 = u64::MAX;

/// Bounded writer into a caller's buffer (long names are cut, never
/// overflow).
struct Out<'a> {
    buf: &'a mut [u8],
    n: usize,
}

impl Out<'_> {
    fn push(&mut self, b: u8) {
        if self.n < self.buf.len() {
            self.buf[self.n] = b;
            self.n += 1;
        }
    }
    fn extend(&mut self, s: &[u8]) {
        for &b in s {
            self.push(b);
        }
    }
    fn ends_with(&self, s: &[u8]) -> bool {
        self.buf[..self.n].ends_with(s)
    }
}

/// Class-name parts after which a generated class has a per-run sequence
/// number (dropped): lambda forms, dynamic proxies, reflection accessors.
const NUMBERED: [&[u8]; 5] = [
    b"$$Lambda$",
    b"$Proxy",
    b"GeneratedMethodAccessor",
    b"GeneratedConstructorAccessor",
    b"GeneratedSerializationConstructorAccessor",
];

/// Writes the normalised, dotted name of the class with JVM signature
/// `sig` (`Lpkg/Cls;`, or an array signature, kept as it is).
fn class_name(sig: &[u8], out: &mut Out<'_>) {
    let mut s = sig;
    if let [b'L', rest @ .., b';'] = s {
        s = rest;
    }
    // A hidden class's name ends in its address: `/0x…` (also printed
    // `.0x…` or `+0x…` by some JDKs).
    let end = s
        .windows(3)
        .position(|w| matches!(w[0], b'/' | b'.' | b'+') && w[1] == b'0' && w[2] == b'x')
        .unwrap_or(s.len());
    let mut skipping_digits = false;
    for &b in &s[..end] {
        if skipping_digits && b.is_ascii_digit() {
            continue;
        }
        skipping_digits = false;
        out.push(if b == b'/' { b'.' } else { b });
        if NUMBERED.iter().any(|m| out.ends_with(m)) {
            skipping_digits = true;
        }
    }
    // `Foo$$Lambda$` without its number reads better as `Foo$$Lambda`.
    if out.ends_with(b"$$Lambda$") {
        out.n -= 1;
    }
}

/// Writes the module path of a method into `out`: `java:`, the normalised
/// dotted class name, `.`, the method's name and its descriptor, cut at
/// `out.len()` bytes. Returns the length written.
pub fn method_path(class_sig: &[u8], name: &[u8], descriptor: &[u8], out: &mut [u8]) -> usize {
    let mut o = Out { buf: out, n: 0 };
    o.extend(PREFIX.as_bytes());
    class_name(class_sig, &mut o);
    o.push(b'.');
    o.extend(name);
    o.extend(descriptor);
    o.n
}

/// The module key of a method from its [`method_path`].
pub fn method_key(path: &[u8]) -> u64 {
    module_key_from_path(path, 0)
}

/// Whether a class (by its JVM signature) is part of the JDK's I/O
/// plumbing: the streams, channels, encoders and compressors between an
/// application's call and the native write. The shim starts a Java path
/// at the first frame outside them, so `FileOutputStream.write` under a
/// `BufferedOutputStream` and the one called directly give the call sites
/// in the application.
pub fn is_io_plumbing(class_sig: &[u8]) -> bool {
    let s = class_sig.strip_prefix(b"L").unwrap_or(class_sig);
    [
        &b"java/io/"[..],
        b"java/nio/",
        b"sun/nio/",
        b"jdk/internal/",
        b"java/util/zip/",
        b"java/util/jar/",
    ]
    .iter()
    .any(|p| s.starts_with(p))
}

/// Java's name for a field type of a descriptor, shortened to its simple
/// name (`Ljava/io/File;` → `File`), and the rest of the descriptor.
fn type_name(d: &str) -> Option<(String, &str)> {
    let dims = d.bytes().take_while(|&b| b == b'[').count();
    let d = &d[dims..];
    let (base, rest) = match d.as_bytes().first()? {
        b'L' => {
            let end = d.find(';')?;
            let full = &d[1..end];
            let simple = full.rsplit('/').next().unwrap_or(full);
            (simple.replace('$', "."), &d[end + 1..])
        }
        c => {
            let n = match c {
                b'B' => "byte",
                b'C' => "char",
                b'D' => "double",
                b'F' => "float",
                b'I' => "int",
                b'J' => "long",
                b'S' => "short",
                b'Z' => "boolean",
                b'V' => "void",
                _ => return None,
            };
            (n.to_string(), &d[1..])
        }
    };
    Some((format!("{base}{}", "[]".repeat(dims)), rest))
}

/// The one-line form of a Java frame, `pkg.Cls.method(File, int) bci 12`
/// (`native` for a native method), from its module path and offset; `None`
/// when `path` is not a Java method's.
pub fn display(path: &str, bci: u64) -> Option<String> {
    let m = path.strip_prefix(PREFIX)?;
    let at = |s: String| {
        if bci == NATIVE_BCI {
            format!("{s} native")
        } else {
            format!("{s} bci {bci}")
        }
    };
    let Some(open) = m.find('(') else {
        return Some(at(m.to_string()));
    };
    let (name, desc) = m.split_at(open);
    let mut params = Vec::new();
    let mut d = &desc[1..];
    while !d.starts_with(')') {
        match type_name(d) {
            Some((t, rest)) => {
                params.push(t);
                d = rest;
            }
            // A cut or malformed descriptor: shown as it is.
            None => return Some(at(m.to_string())),
        }
    }
    Some(at(format!("{name}({})", params.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(class: &str, name: &str, desc: &str) -> String {
        let mut b = [0u8; 256];
        let n = method_path(class.as_bytes(), name.as_bytes(), desc.as_bytes(), &mut b);
        String::from_utf8(b[..n].to_vec()).unwrap()
    }

    #[test]
    fn method_paths_are_dotted_and_keep_the_descriptor() {
        assert_eq!(
            path(
                "Lorg/h2/mvstore/FileStore;",
                "writeFully",
                "(JLjava/nio/ByteBuffer;)V"
            ),
            "java:org.h2.mvstore.FileStore.writeFully(JLjava/nio/ByteBuffer;)V"
        );
        assert_eq!(
            path("LThree;", "main", "([Ljava/lang/String;)V"),
            "java:Three.main([Ljava/lang/String;)V"
        );
    }

    #[test]
    fn generated_classes_get_the_same_name_in_every_run() {
        let a = path("LApp$$Lambda$14.0x0000000800c0b0a8;", "run", "()V");
        let b = path("LApp$$Lambda$97/0x0000000801234000;", "run", "()V");
        assert_eq!(a, "java:App$$Lambda.run()V");
        assert_eq!(a, b);
        // JDK 21+: no sequence number, only the address.
        assert_eq!(path("LApp$$Lambda/0x00007f0001000a00;", "run", "()V"), a);
        assert_eq!(
            path("Ljdk/proxy1/$Proxy12;", "write", "([B)V"),
            "java:jdk.proxy1.$Proxy.write([B)V"
        );
        assert_eq!(
            path(
                "Ljdk/internal/reflect/GeneratedMethodAccessor3;",
                "invoke",
                "()V"
            ),
            path(
                "Ljdk/internal/reflect/GeneratedMethodAccessor41;",
                "invoke",
                "()V"
            )
        );
        // An ordinary class with digits keeps them.
        assert_eq!(path("Lcom/x/Log4j2;", "a", "()V"), "java:com.x.Log4j2.a()V");
        assert_ne!(path("LA$1;", "run", "()V"), path("LA$2;", "run", "()V"));
    }

    #[test]
    fn long_names_are_cut_not_overflowed() {
        let long = format!("L{};", "a/".repeat(300));
        let mut b = [0u8; 64];
        let n = method_path(long.as_bytes(), b"m", b"()V", &mut b);
        assert_eq!(n, 64);
        assert!(b.starts_with(b"java:a.a."));
    }

    #[test]
    fn keys_follow_the_text_only() {
        let a = path("LA;", "m", "()V");
        let b = path("LA;", "m", "(I)V");
        assert_ne!(method_key(a.as_bytes()), method_key(b.as_bytes()));
        assert_eq!(
            method_key(a.as_bytes()),
            method_key(path("LA;", "m", "()V").as_bytes())
        );
    }

    #[test]
    fn jdk_io_plumbing_is_recognised() {
        for c in [
            "Ljava/io/FileOutputStream;",
            "Ljava/io/BufferedOutputStream;",
            "Lsun/nio/ch/FileChannelImpl;",
            "Lsun/nio/cs/StreamEncoder;",
            "Ljava/nio/channels/Channels;",
            "Ljava/util/zip/GZIPOutputStream;",
        ] {
            assert!(is_io_plumbing(c.as_bytes()), "{c}");
        }
        for c in [
            "Lorg/apache/lucene/store/FSDirectory;",
            "Ljava/util/logging/FileHandler;",
            "LThree;",
        ] {
            assert!(!is_io_plumbing(c.as_bytes()), "{c}");
        }
    }

    #[test]
    fn frames_display_as_java() {
        assert_eq!(
            display("java:Three.journal(Ljava/io/File;I)V", 12).as_deref(),
            Some("Three.journal(File, int) bci 12")
        );
        assert_eq!(
            display("java:a.B.w([B[[JLjava/util/Map$Entry;)V", 0).as_deref(),
            Some("a.B.w(byte[], long[][], Map.Entry) bci 0")
        );
        assert_eq!(
            display(
                "java:java.io.FileOutputStream.writeBytes([BIIZ)V",
                NATIVE_BCI
            )
            .as_deref(),
            Some("java.io.FileOutputStream.writeBytes(byte[], int, int, boolean) native")
        );
        // Cut descriptors stay readable.
        assert_eq!(
            display("java:a.B.w(Ljava/ut", 3).as_deref(),
            Some("a.B.w(Ljava/ut bci 3")
        );
        assert_eq!(display("/usr/lib/libc.so.6", 3), None);
    }
}
