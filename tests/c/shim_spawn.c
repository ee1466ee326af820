/* Process life cycle under the shim: fork, exec, vfork and posix_spawn.
 *   shim_spawn DIR        parent: writes DIR/parent, forks a child that
 *                         writes DIR/child and then execs "shim_spawn DIR
 *                         exec" (writes DIR/exec), then vfork+exec
 *                         ("vfork") and posix_spawn ("spawn") children.
 *   shim_spawn DIR WHAT   writes DIR/WHAT and exits.
 * Every process prints "<name> pid=<pid> rc=<rc>" lines to stdout. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int write_file(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int rc = (int)write(fd, name, strlen(name));
    close(fd);
    return rc;
}

static int wait_ok(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int main(int argc, char **argv) {
    if (argc == 3) {
        int rc = write_file(argv[1], argv[2]);
        return rc > 0 ? 0 : 1;
    }
    if (argc != 2) return 2;
    const char *dir = argv[1];
    printf("parent write rc=%d\n", write_file(dir, "parent"));
    fflush(stdout);

    pid_t pid = fork();
    if (pid == 0) {
        int rc = write_file(dir, "child");
        if (rc <= 0) _exit(3);
        execl(argv[0], argv[0], dir, "exec", (char *)NULL);
        _exit(4);
    }
    printf("fork child status=%d\n", wait_ok(pid));

    pid = vfork();
    if (pid == 0) {
        char *args[] = {argv[0], (char *)dir, "vfork", NULL};
        execve(argv[0], args, environ);
        _exit(5);
    }
    printf("vfork child status=%d\n", wait_ok(pid));

    char *args[] = {argv[0], (char *)dir, "spawn", NULL};
    int rc = posix_spawn(&pid, argv[0], NULL, NULL, args, environ);
    printf("posix_spawn rc=%d status=%d\n", rc, rc == 0 ? wait_ok(pid) : -1);
    printf("system status=%d\n", system("true") );
    return 0;
}
