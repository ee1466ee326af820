/* Unusual stacks under the shim:
 *   - a signal handler running on an alternate signal stack (sigaltstack,
 *     mmap'd) writes to a file: the shim must find that stack's bounds
 *     (never read outside mapped memory);
 *   - a thread with a small (64 KiB) custom stack writes;
 *   - 300 short-lived threads each write once (more threads over the
 *     process's life than the shim has batch slots).
 * Usage: shim_stacks DIR; prints the number of bytes in each file. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fd_sig, fd_small, fd_many;

static void on_usr1(int sig) {
    (void)sig;
    write(fd_sig, "from the alternate stack\n", 25);
}

static void *small(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) write(fd_small, "small stack\n", 12);
    return NULL;
}

static void *once(void *arg) {
    (void)arg;
    write(fd_many, "t\n", 2);
    return NULL;
}

static long size(int fd) {
    struct stat st;
    fstat(fd, &st);
    return (long)st.st_size;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char p[4096];
    snprintf(p, sizeof p, "%s/sig", argv[1]);
    fd_sig = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    snprintf(p, sizeof p, "%s/small", argv[1]);
    fd_small = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    snprintf(p, sizeof p, "%s/many", argv[1]);
    fd_many = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);

    stack_t ss;
    ss.ss_size = 64 * 1024;
    ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ss.ss_flags = 0;
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    for (int i = 0; i < 50; i++) raise(SIGUSR1);

    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 * 1024);
    pthread_t t;
    pthread_create(&t, &at, small, NULL);
    pthread_join(t, NULL);

    for (int i = 0; i < 300; i++) {
        pthread_create(&t, NULL, once, NULL);
        pthread_join(t, NULL);
    }
    printf("sig %ld small %ld many %ld\n", size(fd_sig), size(fd_small), size(fd_many));
    return 0;
}
