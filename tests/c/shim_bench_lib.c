/* The shared library of shim_bench_shapes's "lib" shape: the program's
 * write goes through a function of a .so it links (call path: lib_write in
 * this library, then the program's main). */
#include <unistd.h>

__attribute__((noinline)) ssize_t lib_write(int fd, const void *buf, size_t size) {
    ssize_t n = write(fd, buf, size);
    __asm__ volatile("" ::: "memory");
    return n;
}
