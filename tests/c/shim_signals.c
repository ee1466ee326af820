/* A signal interrupts a blocked write(): the application must see -1/EINTR
 * exactly as without the shim, and the handler's own write() (to a regular
 * file, from signal context) must work. Usage: shim_signals DIR */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int logfd;
static volatile sig_atomic_t fired;

static void on_alarm(int sig) {
    (void)sig;
    fired++;
    int saved = errno;
    write(logfd, "signal\n", 7);
    errno = saved;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/log", argv[1]);
    logfd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: the write returns EINTR */
    sigaction(SIGALRM, &sa, NULL);

    int p[2];
    pipe(p);
    /* Fill the pipe so the next write blocks. */
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    char buf[65536];
    memset(buf, 'p', sizeof buf);
    while (write(p[1], buf, sizeof buf) > 0) {}
    fcntl(p[1], F_SETFL, 0);

    struct itimerval it = {{0, 0}, {0, 50000}};
    setitimer(ITIMER_REAL, &it, NULL);
    errno = 0;
    ssize_t r = write(p[1], buf, sizeof buf);
    printf("blocked write rc=%zd errno=%s fired=%d\n", r, errno == EINTR ? "EINTR" : strerror(errno), (int)fired);

    /* Many signals landing while the main thread writes to a regular file. */
    struct itimerval fast = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &fast, NULL);
    int ok = 0;
    for (int i = 0; i < 20000; i++) {
        ssize_t w = write(logfd, "main\n", 5);
        if (w == 5) ok++;
        else if (!(w < 0 && errno == EINTR)) printf("unexpected rc=%zd errno=%d\n", w, errno);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("main writes ok=%d signals>0=%d\n", ok, fired > 1);
    return 0;
}
