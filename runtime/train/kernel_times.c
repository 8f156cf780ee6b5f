/* kernel_times.c — --kernel-times FILE: every kernel of the training step
 * timed and set beside the cost model's prediction, which the compiler put
 * in the trainer (trc_model.kernel_sites).
 *
 * While a timed step runs, trc_kernel_done(site) adds the time since the
 * last mark (the previous kernel's end, or the start of forward() or
 * backward()) to the site. The first optimizer step is left out (pages
 * touched for the first time, caches cold). A kernel's time is split among
 * forward, backward and recompute as its predicted seconds are (a kernel
 * with values fused into it may recompute some of them); what the step
 * spends outside the kernels (zeroing the gradients, the norm, the
 * optimizer, loading the micro-batches) is "the rest", set against the
 * predicted update. The predictions are those for the run's precision
 * (--precision may differ from the model file's). */
#include "io/rt_io.h"

#include <stdlib.h>
#include <string.h>

static trc_kernel_times *timing; /* the run's, while a timed step runs */
static double last_mark;

void trc_kernel_start(void) {
  if (timing) last_mark = trc_now();
}

void trc_kernel_done(int site) {
  if (!timing) return;
  double now = trc_now();
  timing->seconds[site] += now - last_mark;
  timing->calls[site]++;
  last_mark = now;
}

int trc_kernel_times_init(trc_kernel_times *k, const trc_model *m, trc_error *err) {
  memset(k, 0, sizeof *k);
  if (m->device)
    return trc_fail(err, "--kernel-times: a CUDA trainer's kernels run asynchronously on the device; "
                         "they are timed in C and LLVM trainers only");
  k->seconds = calloc((size_t)m->n_kernel_sites + 1, sizeof *k->seconds);
  k->calls = calloc((size_t)m->n_kernel_sites + 1, sizeof *k->calls);
  if (!k->seconds || !k->calls) return trc_fail(err, "--kernel-times: out of memory");
  return 0;
}

void trc_kernel_times_free(trc_kernel_times *k) {
  free(k->seconds);
  free(k->calls);
  memset(k, 0, sizeof *k);
}

void trc_kernel_times_begin(trc_kernel_times *k) {
  timing = k;
  k->started = trc_now();
}

void trc_kernel_times_end(trc_kernel_times *k, int64_t micro_batches) {
  k->step_seconds += trc_now() - k->started;
  k->steps++;
  k->micro_batches += micro_batches;
  timing = NULL;
}

/* Seconds per micro-batch, measured and predicted, by phase; `rest` and
 * `update` are what the step spends outside the kernels. */
typedef struct {
  double forward, backward, recompute, rest;
} phases;

static double step_of(const phases *p) { return p->forward + p->backward + p->recompute + p->rest; }
static double overhead_of(const phases *p) {
  double base = step_of(p) - p->recompute;
  return base > 0 ? p->recompute / base : 0;
}

/* A site's predicted seconds for one call under the run's precision. */
static const double *predicted_of(const trc_kernel_site *s) { return s->predicted[trc_get_precision()]; }
static double predicted_call(const trc_kernel_site *s) {
  const double *p = predicted_of(s);
  return p[0] + p[1] + p[2];
}

static void add_site(phases *measured, phases *predicted, const trc_kernel_site *s, double seconds,
                     double calls) {
  const double *p = predicted_of(s), each = predicted_call(s);
  predicted->forward += calls * p[0];
  predicted->backward += calls * p[1];
  predicted->recompute += calls * p[2];
  if (each <= 0) return; /* every kernel is predicted some time: kernel_overhead at least */
  measured->forward += seconds * p[0] / each;
  measured->backward += seconds * p[1] / each;
  measured->recompute += seconds * p[2] / each;
}

typedef struct {
  const trc_kernel_times *k;
  const trc_model *m;
  phases measured, predicted;
} report;


static void write_phases(FILE *f, const char *name, const phases *p, const char *rest) {
  fprintf(f, "\"%s\": {\"forward\": ", name);
  trc_json_write_number(f, p->forward);
  fputs(", \"backward\": ", f);
  trc_json_write_number(f, p->backward);
  fputs(", \"recompute\": ", f);
  trc_json_write_number(f, p->recompute);
  fprintf(f, ", \"%s\": ", rest);
  trc_json_write_number(f, p->rest);
  fputs(", \"step\": ", f);
  trc_json_write_number(f, step_of(p));
  fputs(", \"overhead\": ", f);
  trc_json_write_number(f, overhead_of(p));
  fputc('}', f);
}

/* The file: a first line with the run and its phases, then one line a site. */
static int write_report(FILE *f, const void *ctx, trc_error *err) {
  (void)err;
  const report *r = ctx;
  const trc_model *m = r->m;
  double mb = (double)r->k->micro_batches;
  fputs("{\"model\": ", f);
  trc_json_write_string(f, m->name);
  fputs(", \"checkpoint\": ", f);
  trc_json_write_string(f, m->checkpoint);
  fputs(", \"precision\": ", f);
  trc_json_write_string(f, trc_precision_name(trc_get_precision()));
  fprintf(f, ", \"arena_bytes\": %llu, \"sites\": %d, \"steps\": %lld, \"micro_batches\": %lld, "
          "\"calibrated\": %s, ",
          (unsigned long long)m->arena_bytes, m->n_kernel_sites, (long long)r->k->steps,
          (long long)r->k->micro_batches, m->predicted_calibrated ? "true" : "false");
  write_phases(f, "measured", &r->measured, "rest");
  fputs(", ", f);
  write_phases(f, "predicted", &r->predicted, "update");
  fputs("}\n", f);
  for (int i = 0; i < m->n_kernel_sites; i++) {
    const trc_kernel_site *s = &m->kernel_sites[i];
    fprintf(f, "{\"site\": %d, \"op\": ", i);
    trc_json_write_string(f, s->op);
    fputs(", \"value\": ", f);
    if (s->value) trc_json_write_string(f, s->value);
    else fputs("null", f);
    fprintf(f, ", \"line\": %d, \"calls\": ", s->line);
    trc_json_write_number(f, (double)r->k->calls[i] / mb);
    fputs(", \"seconds\": ", f);
    trc_json_write_number(f, r->k->seconds[i] / mb);
    fputs(", \"predicted\": ", f);
    trc_json_write_number(f, (double)r->k->calls[i] / mb * predicted_call(s));
    fputs(", \"predicted_recompute\": ", f); /* the part of it that recomputes */
    trc_json_write_number(f, (double)r->k->calls[i] / mb * predicted_of(s)[2]);
    fputs("}\n", f);
  }
  return ferror(f) ? -1 : 0;
}

static void print_phases(const char *what, const phases *p, const char *rest) {
  fprintf(stderr, "  %-9s forward %.3f ms, backward %.3f, recompute %.3f, %s %.3f: step %.3f, "
          "recompute +%.1f%%\n", what, 1e3 * p->forward, 1e3 * p->backward, 1e3 * p->recompute, rest,
          1e3 * p->rest, 1e3 * step_of(p), 100 * overhead_of(p));
}

/* The SLOWEST sites by measured time, each beside its prediction. */
enum { SLOWEST = 5 };

static void print_slowest(const trc_kernel_times *k, const trc_model *m) {
  int shown[SLOWEST], n = 0;
  double mb = (double)k->micro_batches;
  for (; n < SLOWEST && n < m->n_kernel_sites; n++) {
    int best = -1;
    for (int i = 0; i < m->n_kernel_sites; i++) {
      int taken = 0;
      for (int j = 0; j < n; j++) taken |= shown[j] == i;
      if (!taken && (best < 0 || k->seconds[i] > k->seconds[best])) best = i;
    }
    shown[n] = best;
  }
  fputs("  slowest kernels:", stderr);
  for (int j = 0; j < n; j++) {
    const trc_kernel_site *s = &m->kernel_sites[shown[j]];
    double calls = (double)k->calls[shown[j]] / mb;
    fprintf(stderr, "%s site %d %s%s%s (line %d) %.3f ms, predicted %.3f", j ? ";" : "", shown[j], s->op,
            s->value ? " " : "", s->value ? s->value : "", s->line, 1e3 * k->seconds[shown[j]] / mb,
            1e3 * calls * predicted_call(s));
  }
  fputc('\n', stderr);
}

int trc_kernel_times_report(const trc_kernel_times *k, const trc_model *m, const char *path,
                            trc_error *err) {
  if (k->micro_batches == 0) {
    fprintf(stderr, "kernel times: no step after the first was run; %s not written\n", path);
    return 0;
  }
  report r = {.k = k, .m = m};
  double mb = (double)k->micro_batches, kernels = 0;
  for (int i = 0; i < m->n_kernel_sites; i++) {
    add_site(&r.measured, &r.predicted, &m->kernel_sites[i], k->seconds[i] / mb, (double)k->calls[i] / mb);
    kernels += k->seconds[i] / mb;
  }
  r.measured.rest = k->step_seconds / mb - kernels;
  r.predicted.rest = m->predicted_update[trc_get_precision()];
  if (trc_write_atomic(path, write_report, &r, err)) return -1;
  fprintf(stderr, "kernel times (%s): %lld steps after the first, %lld micro-batches, precision %s; per "
          "micro-batch:\n", path, (long long)k->steps, (long long)k->micro_batches,
          trc_precision_name(trc_get_precision()));
  print_phases("measured", &r.measured, "the rest");
  print_phases("predicted", &r.predicted, "update");
  if (!m->predicted_calibrated)
    fputs("  (predicted with trainc's built-in machine profile, another machine's: `trainc calibrate -o FILE`\n"
          "   measures this one, and a trainer built with --profile FILE predicts with it)\n",
          stderr);
  print_slowest(k, m);
  return 0;
}
