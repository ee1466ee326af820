/* Variadic stdio entry points of libpcstream.so. Rust cannot define C
 * variadic functions, so these wrappers turn `...` into a va_list and call
 * the Rust impls (interpose.rs) with their own frame address: compiled with
 * frame pointers, it points at {caller's rbp, return address into the
 * caller}, the same frame record the Rust trampolines build. */
#include <stdarg.h>
#include <stdio.h>

int pcstream_vfprintf_impl(FILE *f, const char *fmt, va_list ap, long a4, long a5, void *rec);
int pcstream_vfprintf_chk_impl(FILE *f, int flag, const char *fmt, va_list ap, long a5, void *rec);

/* Reached by a `jmp` from the exported Rust trampolines of the same name
 * without the prefix (a cdylib exports only Rust symbols). */
#define EXPORT __attribute__((noinline))

EXPORT int pcstream_c_fprintf(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = pcstream_vfprintf_impl(f, fmt, ap, 0, 0, __builtin_frame_address(0));
    va_end(ap);
    return r;
}

EXPORT int pcstream_c_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = pcstream_vfprintf_impl(stdout, fmt, ap, 0, 0, __builtin_frame_address(0));
    va_end(ap);
    return r;
}

EXPORT int pcstream_c__fprintf_chk(FILE *f, int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = pcstream_vfprintf_chk_impl(f, flag, fmt, ap, 0, __builtin_frame_address(0));
    va_end(ap);
    return r;
}

EXPORT int pcstream_c__printf_chk(int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = pcstream_vfprintf_chk_impl(stdout, flag, fmt, ap, 0, __builtin_frame_address(0));
    va_end(ap);
    return r;
}
