/* measured.c — `trainc plan --measured FILE`: the first line of a trainer's
 * --kernel-times file (docs/trainer.md, *Kernel times*), read back to be
 * shown beside the plan's prediction. The trainer writes that line itself
 * (keys in a fixed order, numbers as %.9g, names without escapes), so a
 * reader of those keys is enough; anything else is an error naming the
 * file. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Where the value of "key" starts in text (after `"key": `), else NULL. */
static const char *value_of(const char *text, const char *key) {
  char *quoted = xsprintf("\"%s\": ", key);
  const char *at = strstr(text, quoted);
  if (at) at += strlen(quoted);
  free(quoted);
  return at;
}

static bool number_at(const char *text, const char *key, double *out) {
  const char *at = value_of(text, key);
  if (!at) return false;
  char *end;
  *out = strtod(at, &end);
  return end != at;
}

/* A string value without escapes, copied; NULL when absent or escaped. */
static char *string_at(const char *text, const char *key) {
  const char *at = value_of(text, key);
  if (!at || *at != '"') return NULL;
  size_t len = strcspn(at + 1, "\"\\\n");
  return at[1 + len] == '"' ? xstrndup(at + 1, len) : NULL;
}

/* The phases object "key": {...} of the first line into p. */
static bool phases_at(const char *line, const char *key, const char *rest, MeasuredPhases *p) {
  const char *at = value_of(line, key);
  if (!at || *at != '{') return false;
  char *object = xstrndup(at, strcspn(at, "}"));
  bool ok = number_at(object, "forward", &p->forward) && number_at(object, "backward", &p->backward) &&
            number_at(object, "recompute", &p->recompute) && number_at(object, rest, &p->rest) &&
            number_at(object, "step", &p->step) && number_at(object, "overhead", &p->overhead);
  free(object);
  return ok;
}

bool measured_parse(const SourceFile *f, MeasuredTimes *m, Diag *diag) {
  memset(m, 0, sizeof *m);
  m->path = f->path;
  char *line = xstrndup(f->text, strcspn(f->text, "\n"));
  double arena = -1, steps = 0;
  m->model = string_at(line, "model");
  m->checkpoint = string_at(line, "checkpoint");
  m->precision = string_at(line, "precision");
  bool ok = m->model && m->checkpoint && number_at(line, "arena_bytes", &arena) &&
            number_at(line, "steps", &steps) && phases_at(line, "measured", "rest", &m->measured) &&
            phases_at(line, "predicted", "update", &m->predicted);
  m->arena_bytes = arena >= 0 ? (uint64_t)arena : 0;
  m->steps = (int64_t)steps;
  free(line);
  if (!ok) diag_file_error(diag, f->path, "not a trainer's --kernel-times file (its first line names the model, "
                                          "checkpoint, arena_bytes, steps, measured and predicted times)");
  return ok;
}

bool measured_matches(const MeasuredTimes *m, const Plan *pl, Diag *diag) {
  char spec[64];
  const char *checkpoint = checkpoint_spec_str(&pl->graph->train.checkpoint, spec);
  if (!strcmp(m->model, pl->graph->model_name) && !strcmp(m->checkpoint, checkpoint) &&
      m->arena_bytes == pl->program->arena_bytes)
    return true;
  diag_file_error(diag, m->path, "measured another plan: model %s, checkpoint %s, arena %llu bytes; this plan is "
                  "model %s, checkpoint %s, arena %llu bytes (plan with the options the trainer was built with)",
                  m->model, m->checkpoint, (unsigned long long)m->arena_bytes, pl->graph->model_name, checkpoint,
                  (unsigned long long)pl->program->arena_bytes);
  return false;
}

void measured_free(MeasuredTimes *m) {
  free(m->model);
  free(m->checkpoint);
  free(m->precision);
  memset(m, 0, sizeof *m);
}
