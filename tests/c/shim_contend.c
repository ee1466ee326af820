/* Thread contention on the shim's batch slots: 8 threads each pwrite N
 * 64-byte records to their own file at descending offsets (no two writes
 * coalesce: one event each) while a ninth thread forks children that write
 * one record and exec /bin/true, 8 times. Run with a short
 * PCSTREAM_FLUSH_MS so threads keep sweeping each other's idle batches.
 * Usage: shim_contend DIR N */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 8
static const char *dir;
static int n;

static void *worker(void *arg) {
    long t = (long)arg;
    char path[4096], rec[64];
    snprintf(path, sizeof path, "%s/t%ld", dir, t);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); exit(1); }
    memset(rec, 'a' + (int)t, sizeof rec);
    for (int i = n - 1; i >= 0; i--)
        if (pwrite(fd, rec, sizeof rec, (off_t)i * 128) != (ssize_t)sizeof rec) { perror("pwrite"); exit(1); }
    close(fd);
    return NULL;
}

static void *forker(void *arg) {
    (void)arg;
    for (int k = 0; k < 8; k++) {
        pid_t p = fork();
        if (p < 0) { perror("fork"); exit(1); }
        if (p == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/c%d", dir, k);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || write(fd, "child\n", 6) != 6) _exit(1);
            close(fd);
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int st;
        if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) { fprintf(stderr, "child failed\n"); exit(1); }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: shim_contend DIR N\n"); return 2; }
    dir = argv[1];
    n = atoi(argv[2]);
    pthread_t th[THREADS + 1];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    pthread_create(&th[THREADS], NULL, forker, NULL);
    for (int t = 0; t <= THREADS; t++) pthread_join(th[t], NULL);
    printf("ok\n");
    return 0;
}
