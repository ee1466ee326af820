/* pcstream.h — the opt-in C API of libpcstream.so, for programs whose
 * writes the shim cannot see (io_uring) and that want pcstream's stream for
 * each write, e.g. for io_uring's per-I/O `sqe->write_stream` (Linux ≥ 6.16,
 * a block device with write streams: an NVMe FDP namespace).
 *
 * Safe without the shim. Both functions are declared weak: a program that
 * uses them links and runs without libpcstream.so (no -l flag is needed);
 * when the shim is not loaded (no LD_PRELOAD) the function's address is
 * null, and PCSTREAM_STREAM_FOR_WRITE / PCSTREAM_STREAM_FOR_CALLER below
 * then give 0 (no stream) without calling anything. Under
 * `LD_PRELOAD=libpcstream.so` (or `pcstreamctl run`) the dynamic loader
 * binds them to the shim's definitions. A PIE program built with a linker
 * that resolves undefined weak symbols to 0 at link time (GNU ld with
 * `-z nodynamic-undefined-weak`) would never see the shim: keep the
 * default, or pass `-Wl,-z,dynamic-undefined-weak`.
 *
 * Which call path. The stream is that of the call path that reached the
 * call: the return address into the caller and up to PCSTREAM_FRAMES - 1
 * frames above it, as for a write() the shim intercepts at that place. A
 * call site is one program context: call the function where the write is
 * prepared (the code path that decides what the data is), not from a
 * shared submission helper that every kind of write goes through (that
 * would be one context for all of them — unless that helper is inlined
 * into its callers, or the context reaches deep enough: PCSTREAM_FRAMES).
 * The macros below expand at the call site.
 *
 * Never fails the caller: no errno change, no allocation, no lock, nothing
 * blocks; safe from any thread and from signal handlers. When the shim is
 * loaded but inactive (no daemon, no mapping, no recording) or re-entered,
 * the result is 0.
 */
#ifndef PCSTREAM_H
#define PCSTREAM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The stream of the caller's call path in the default delivery domain:
 * what a write() from here to a regular file would be given (1..4 map to
 * the write-lifetime hints SHORT..EXTREME; 0 = no stream known). Nothing
 * is reported to the daemon. */
int pcstream_stream_for_caller(void) __attribute__((weak));

/* The stream for a write of `len` bytes at byte `offset` of `fd`, from the
 * caller's call path, in `fd`'s delivery domain, and (len > 0) the write
 * reported to the daemon / the recording as a WriteEvent of call kind
 * URING, so that pcstream learns this call path's lifetimes from the
 * program's overwrites and deallocations:
 *  - `fd` a block device with write streams (queue/max_write_streams = N
 *    > 0): a stream 1..N to put in sqe->write_stream; 0 when none is known
 *    or the learnt stream is above N. The device node's write hint is not
 *    touched (io_uring carries the stream per I/O).
 *  - `fd` a regular file: the default domain's stream, as for
 *    pcstream_stream_for_caller(); its write-lifetime hint is also set on
 *    the file's inode (once per change), as a write() from here would.
 *  - anything else: 0.
 * Call it once per write, before submitting it (one per SQE). */
int pcstream_stream_for_write(int fd, uint64_t offset, uint64_t len) __attribute__((weak));

/* Call-site forms that are 0 when the shim is not loaded. */
#define PCSTREAM_STREAM_FOR_CALLER() \
    (pcstream_stream_for_caller ? pcstream_stream_for_caller() : 0)
#define PCSTREAM_STREAM_FOR_WRITE(fd, offset, len) \
    (pcstream_stream_for_write ? pcstream_stream_for_write((fd), (offset), (len)) : 0)

#ifdef __cplusplus
}
#endif

#endif /* PCSTREAM_H */
