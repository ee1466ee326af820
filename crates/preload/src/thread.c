/* Storage of the shim's per-thread state (`tls.rs`): one zero-initialised
 * block in initial-exec TLS, so a thread reaches it with one %fs-relative
 * address computation instead of a call to __tls_get_addr (what a Rust
 * thread-local in a shared object costs). Initial-exec is right for a
 * library loaded with LD_PRELOAD (its TLS is part of the static block);
 * a dlopen'ed copy uses glibc's static-TLS surplus. */
__attribute__((tls_model("initial-exec"), aligned(64), visibility("hidden")))
__thread unsigned char pcstream_thread_state[576];
