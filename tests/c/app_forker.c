/* A small command tree for `pcstreamctl record`: two threads append to their
 * own log files, two fork children write a data file and a scratch file they
 * then unlink, one child execs `sh -c true`. Exits with status argv[2].
 * Usage: app_forker DIR STATUS */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;

static void path_of(char *buf, size_t n, const char *name, int i) {
    snprintf(buf, n, "%s/%s-%d", dir, name, i);
}

__attribute__((noinline)) void write_log_record(int fd, const char *buf, size_t n) {
    if (write(fd, buf, n) != (ssize_t)n) exit(90);
}

__attribute__((noinline)) void write_data_block(int fd, const char *buf, size_t n, off_t off) {
    if (pwrite(fd, buf, n, off) != (ssize_t)n) exit(91);
}

static void *logger(void *arg) {
    int i = (int)(long)arg;
    char p[4096], line[100];
    path_of(p, sizeof p, "thread.log", i);
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) exit(92);
    for (int k = 0; k < 200; k++) {
        int n = snprintf(line, sizeof line, "thread %d record %d\n", i, k);
        write_log_record(fd, line, (size_t)n);
        if (k % 50 == 0) usleep(1000);
    }
    close(fd);
    return NULL;
}

static void child(int i) {
    char p[4096], block[4096];
    memset(block, 'a' + i, sizeof block);
    path_of(p, sizeof p, "child.dat", i);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) exit(93);
    for (int k = 0; k < 16; k++) write_data_block(fd, block, sizeof block, (off_t)k * 4096);
    close(fd);
    path_of(p, sizeof p, "scratch", i);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) exit(94);
    write_data_block(fd, block, 1000, 0);
    close(fd);
    if (unlink(p) != 0) exit(95);
}

int main(int argc, char **argv) {
    if (argc != 3) return 64;
    dir = argv[1];
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, logger, (void *)i);
    pid_t kids[3];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            child(i);
            exit(0); /* not _exit: the shim flushes its last batch at exit() */
        }
    }
    kids[2] = fork();
    if (kids[2] == 0) {
        execlp("sh", "sh", "-c", "true", (char *)NULL);
        _exit(96);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 3; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 97;
    }
    return atoi(argv[2]);
}
