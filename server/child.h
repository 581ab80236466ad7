/* child.h - what server/smoke.c, client_test.c and many_test.c share: the
   built per-server as a child process (started with its arguments, its
   exit status within 10 s, its ready file waited for), a file's text,
   little-endian bytes. Include after t.h, in one test program. */
#ifndef PER_SERVER_CHILD_H
#define PER_SERVER_CHILD_H

static const char *server; /* the per-server binary */
static char dir[64];       /* this run's temporary directory */
static pid_t child = -1;   /* a running per-server, killed at exit */

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* ---- bytes ---- */

static void put(unsigned char *p, uint64_t v, unsigned n) {
  unsigned k;
  for (k = 0; k < n; ++k, v >>= 8) p[k] = (unsigned char)(v & 0xFFu);
}

static uint64_t get(const unsigned char *p, unsigned n) {
  uint64_t v = 0;
  while (n--) v = (v << 8) | p[n];
  return v;
}

/* ---- processes ---- */

/* Start per-server with args (NULL-terminated after argv[0]), stdout and
   stderr to the files given (NULL: inherited). */
static pid_t start(const char *const *args, const char *out, const char *err) {
  pid_t pid;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    char *argv[64];
    int k;
    argv[0] = (char *)(uintptr_t)server;
    for (k = 0; args[k] && k < 62; ++k)
      argv[k + 1] = (char *)(uintptr_t)args[k];
    argv[k + 1] = NULL;
    if (out) {
      int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || dup2(fd, 1) < 0) _exit(127);
      close(fd);
    }
    if (err) {
      int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || dup2(fd, 2) < 0) _exit(127);
      close(fd);
    }
    execv(server, argv);
    _exit(127);
  }
  return pid;
}

/* The exit status of pid within 10 s (killed and -1 after, or when it
   died of a signal). */
static int finish(pid_t pid) {
  int k, status;
  for (k = 0; k < 1000; ++k) {
    pid_t got = waitpid(pid, &status, WNOHANG);
    REQUIRE(got >= 0);
    if (got == pid) {
      if (pid == child) child = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      T_FAIL_AT("per-server died of signal %d",
                WIFSIGNALED(status) ? WTERMSIG(status) : -1);
      return -1;
    }
    sleep_ms(10);
  }
  T_FAIL_AT("per-server did not exit within 10 s");
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  if (pid == child) child = -1;
  return -1;
}

/* A file's text (at most 64 KiB), or "" when it cannot be read. */
static char *slurp(const char *path) {
  static char buf[65536];
  FILE *f = fopen(path, "rb");
  size_t n = 0;
  buf[0] = 0;
  if (!f) return buf;
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* The ready file's lines once it appears (10 s at most; fail at once if
   the server exits first, with its stderr when it went to the file log):
   the endpoints, one a line. */
static char *wait_ready(const char *path, const char *log) {
  int k;
  for (k = 0; k < 1000; ++k) {
    int status;
    struct stat st;
    if (stat(path, &st) == 0) {
      char *text = slurp(path);
      if (*text && text[strlen(text) - 1] == '\n') return text;
    }
    if (waitpid(child, &status, WNOHANG) == child) {
      child = -1;
      T_FAIL_AT("per-server exited (status %d) before it was ready%s%s",
                WIFEXITED(status) ? WEXITSTATUS(status) : -1, log ? ": " : "",
                log ? slurp(log) : "");
      exit(1);
    }
    sleep_ms(10);
  }
  T_FAIL_AT("no ready file %s within 10 s", path);
  exit(1);
}

/* The n-th line (from 0) of text, into out. */
static void line_of(const char *text, int n, char *out, size_t cap) {
  size_t len;
  while (n-- > 0) {
    text = strchr(text, '\n');
    REQUIRE(text != NULL);
    ++text;
  }
  len = strcspn(text, "\n");
  REQUIRE(len > 0 && len < cap);
  memcpy(out, text, len);
  out[len] = 0;
}

#endif
