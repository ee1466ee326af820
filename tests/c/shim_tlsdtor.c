/* A preload library that reports every registration of a thread-local
 * destructor (C++ thread_local / Rust thread_local! with Drop use
 * __cxa_thread_atexit_impl; pthread keys use pthread_key_create) on stderr
 * and forwards it. Preloaded in front of libpcstream.so by
 * tests/tests/shim_events.rs to show the shim registers none. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

static void say(const char *m) {
    int n = 0;
    while (m[n]) n++;
    (void)!write(2, m, n);
}

int __cxa_thread_atexit_impl(void (*f)(void *), void *obj, void *dso) {
    say("TLSDTOR __cxa_thread_atexit_impl\n");
    int (*real)(void (*)(void *), void *, void *) = dlsym(RTLD_NEXT, "__cxa_thread_atexit_impl");
    return real ? real(f, obj, dso) : 0;
}

int pthread_key_create(pthread_key_t *key, void (*d)(void *)) {
    say("TLSDTOR pthread_key_create\n");
    int (*real)(pthread_key_t *, void (*)(void *)) = dlsym(RTLD_NEXT, "pthread_key_create");
    return real(key, d);
}

#ifdef PROBE_MAIN
/* Positive control: a program that does register one. */
static void drop(void *p) { (void)p; }
int main(void) {
    pthread_key_t k;
    return pthread_key_create(&k, drop);
}
#endif
