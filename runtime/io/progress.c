/* progress.c — what a person watching sees: on a terminal one line redrawn
 * in place (at most 10 times a second), otherwise a plain line each time the
 * trainer logs. */
#include "rt_io.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double clock_seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double trc_now(void) { return clock_seconds(CLOCK_MONOTONIC); }

/* When the runtime was loaded: the start, where /proc cannot say. */
static double loaded_at;
__attribute__((constructor)) static void note_load_time(void) { loaded_at = trc_now(); }

/* The process's start in seconds after boot (/proc/self/stat's 22nd field,
 * in clock ticks: 10 ms here), or -1. The 2nd field, the command's name in
 * parentheses, may hold spaces: the fields are counted after its last ')'. */
static double process_start_after_boot(void) {
  char line[1024];
  FILE *f = fopen("/proc/self/stat", "r");
  size_t len = f ? fread(line, 1, sizeof line - 1, f) : 0;
  if (f) fclose(f);
  line[len] = 0;
  char *p = strrchr(line, ')');
  unsigned long long ticks;
  for (int field = 3; p && field <= 22; field++) p = strchr(p + 1, ' ');
  long hz = sysconf(_SC_CLK_TCK);
  if (!p || hz <= 0 || sscanf(p, "%llu", &ticks) != 1) return -1;
  return (double)ticks / (double)hz;
}

double trc_process_seconds(void) {
  double start = process_start_after_boot();
  if (start < 0) return trc_now() - loaded_at;
  return clock_seconds(CLOCK_BOOTTIME) - start;
}

void trc_progress_init(trc_progress *p, int64_t total, int quiet) {
  p->total = total;
  p->quiet = quiet;
  p->tty = isatty(fileno(stderr));
  p->last_draw = 0.0;
  p->drawn = 0;
}

static void format_rate(char *out, size_t cap, double per_s) {
  if (per_s >= 1e6)
    snprintf(out, cap, "%.1fM", per_s / 1e6);
  else if (per_s >= 1e3)
    snprintf(out, cap, "%.1fk", per_s / 1e3);
  else
    snprintf(out, cap, "%.0f", per_s);
}

static void format_duration(char *out, size_t cap, double seconds) {
  long s = seconds > 0 && seconds < 1e9 ? (long)(seconds + 0.5) : 0;
  if (s >= 3600)
    snprintf(out, cap, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    snprintf(out, cap, "%ld:%02ld", s / 60, s % 60);
}

static void draw(const trc_progress *p, int64_t done, double loss, double per_s, double eta,
                 const char *terminator) {
  char rate[32], left[32];
  format_rate(rate, sizeof rate, per_s);
  format_duration(left, sizeof left, eta);
  int pct = p->total > 0 ? (int)(100 * done / p->total) : 100;
  fprintf(stderr, "%sstep %lld/%lld [%3d%%] loss %.4g %s ex/s ETA %s%s", p->tty ? "\r" : "",
          (long long)done, (long long)p->total, pct, loss, rate, left, terminator);
  fflush(stderr);
}

void trc_progress_update(trc_progress *p, int64_t done, double loss, double per_s, double eta,
                         int log_point) {
  if (p->quiet) return;
  if (!p->tty) {
    if (log_point) draw(p, done, loss, per_s, eta, "\n");
    return;
  }
  double now = trc_now();
  if (now - p->last_draw < 0.1 && done != p->total) return;
  p->last_draw = now;
  p->drawn = 1;
  draw(p, done, loss, per_s, eta, "\033[K"); /* clear what a longer line left */
}

void trc_progress_break(trc_progress *p) {
  if (p->drawn) fputc('\n', stderr);
  p->drawn = 0;
}
