/* train_block.c — the train block given meaning (docs/ops.md, "The train
 * block"): batch, optimizer, schedule, evaluation, checkpoint policy and
 * distribution settings, checked and folded into the graph's TrainConfig. */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static TrainConfig default_train(void) {
  return (TrainConfig){
      .batch = 32,
      .run = {.accumulate = 1, .epochs = 1, .optimizer = TRC_ADAMW, .lr = 1e-3, .momentum = 0,
              .weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
              .schedule = TRC_SCHED_CONSTANT, .seed = 42, .metrics = TRC_METRIC_LOSS | TRC_METRIC_ACCURACY,
              .log_every = 50, .local_sgd = 1, .outer_lr = 1, .outer_momentum = 0},
  };
}

static bool setting_arity(Lower *L, const Setting *st, int n) {
  if (st->nitems == n && !st->has_colon) return true;
  diag_error(L->diag, st->loc, "'%s' takes %d value%s", st->key, n, n == 1 ? "" : "s");
  return false;
}

static bool setting_int(Lower *L, const Setting *st, int64_t min, int64_t max, int64_t *out) {
  if (!setting_arity(L, st, 1)) return false;
  return want_int_value(L, eval(L, &L->globals, st->items[0]), st->items[0]->loc, st->key, min, max, out);
}

static bool number_in(Lower *L, Value v, SrcLoc loc, const char *what, double min, double max, double *out) {
  if (!want_number(L, v, loc, what)) return false;
  if (!(v.num >= min && v.num <= max)) {
    diag_error(L->diag, loc, "%s must be between %g and %g", what, min, max);
    return false;
  }
  *out = v.num;
  return true;
}

static bool setting_number(Lower *L, const Setting *st, double min, double max, double *out) {
  if (!setting_arity(L, st, 1)) return false;
  return number_in(L, eval(L, &L->globals, st->items[0]), st->items[0]->loc, st->key, min, max, out);
}

static bool is_word(const Expr *e, const char *word) {
  return e->kind == EX_IDENT && strcmp(e->name, word) == 0;
}

/* `optimizer sgd(lr = 0.1, momentum = 0.9)` or `optimizer adamw(...)`. */
static void lower_optimizer(Lower *L, const Setting *st, trc_train_config *t) {
  static const Signature sgd = {{"lr", "momentum", "weight_decay", "nesterov"}, 4, 0, {0.01, 0, 0, 0}};
  static const Signature adamw = {{"lr", "beta1", "beta2", "eps", "weight_decay"}, 5, 0, {1e-3, 0.9, 0.999, 1e-8, 0.01}};
  const Expr *c = st->nitems == 1 ? st->items[0] : NULL;
  bool is_sgd = c && (is_word(c, "sgd") || (c->kind == EX_CALL && strcmp(c->name, "sgd") == 0));
  bool is_adamw = c && (is_word(c, "adamw") || (c->kind == EX_CALL && strcmp(c->name, "adamw") == 0));
  if (!setting_arity(L, st, 1) || (!is_sgd && !is_adamw)) {
    if (st->nitems == 1) diag_error(L->diag, st->loc, "optimizer is sgd(...) or adamw(...)");
    return;
  }
  const Signature *sig = is_sgd ? &sgd : &adamw;
  Value v[MAX_PARAMS];
  SrcLoc locs[MAX_PARAMS];
  Expr none = {.kind = EX_CALL, .name = c->name, .loc = c->loc};
  if (!bind_args(L, &L->globals, c->kind == EX_CALL ? c : &none, sig, v, locs)) return;
  double x[MAX_PARAMS];
  for (int i = 0; i < sig->count; i++) /* lr up to 1000, the rest are fractions */
    if (!number_in(L, v[i], locs[i], sig->names[i], 0, i == 0 ? 1e3 : 1, &x[i])) return;
  for (int i = 1; is_adamw && i <= 2; i++) /* AdamW's bias correction divides by 1 - beta^t */
    if (x[i] == 1) {
      diag_error(L->diag, locs[i], "%s must be below 1 (AdamW divides by 1 - %s^t)", sig->names[i],
                 sig->names[i]);
      return;
    }
  if (is_adamw && x[3] == 0) {
    diag_error(L->diag, locs[3], "eps must be above 0 (AdamW divides by sqrt(v) + eps)");
    return;
  }
  if (is_sgd) {
    t->optimizer = TRC_SGD, t->lr = x[0], t->momentum = x[1], t->weight_decay = x[2], t->nesterov = x[3] != 0;
  } else {
    t->optimizer = TRC_ADAMW, t->lr = x[0], t->beta1 = x[1], t->beta2 = x[2], t->eps = x[3], t->weight_decay = x[4];
  }
}

/* `schedule constant`, `schedule linear(warmup = 100, min_lr = 0)`, `schedule cosine(...)`. */
static void lower_schedule(Lower *L, const Setting *st, trc_train_config *t) {
  static const char *const names[] = {TRC_SCHEDULES(TRC_ENUM_WORD)};
  static const Signature sig = {{"warmup", "min_lr"}, 2, 0, {0, 0}};
  if (!setting_arity(L, st, 1)) return;
  const Expr *c = st->items[0];
  int kind = -1;
  for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
    if ((c->kind == EX_IDENT || c->kind == EX_CALL) && strcmp(c->name, names[i]) == 0) kind = i;
  if (kind < 0) {
    diag_error(L->diag, c->loc, "schedule is constant, linear(...) or cosine(...)");
    return;
  }
  t->schedule = (trc_schedule_kind)kind;
  if (c->kind != EX_CALL) return;
  Value v[MAX_PARAMS];
  SrcLoc locs[MAX_PARAMS];
  double min_lr;
  if (!bind_args(L, &L->globals, c, &sig, v, locs) ||
      !want_int_value(L, v[0], locs[0], "warmup", 0, INT64_C(1) << 40, &t->warmup) ||
      !number_in(L, v[1], locs[1], "min_lr", 0, 1e3, &min_lr))
    return;
  t->min_lr = min_lr;
}

/* `eval every epoch: accuracy, f1` or `eval every 500 steps: loss`. */
static void lower_eval(Lower *L, const Setting *st, trc_train_config *t) {
  bool epoch = st->nitems == 2 && is_word(st->items[0], "every") && is_word(st->items[1], "epoch");
  bool steps = st->nitems == 3 && is_word(st->items[0], "every") && is_word(st->items[2], "steps");
  if (!epoch && !steps) {
    diag_error(L->diag, st->loc, "expected `eval every epoch` or `eval every N steps`");
    return;
  }
  if (epoch) t->eval_every_epoch = true;
  else if (!want_int_value(L, eval(L, &L->globals, st->items[1]), st->items[1]->loc, "the eval period", 1,
                           INT64_C(1) << 40, &t->eval_every_steps))
    return;
  if (!st->has_colon) return;
  static const char *const words[] = {TRC_METRIC_WORDS}; /* bit i is words[i] */
  t->metrics = TRC_METRIC_LOSS;
  for (int i = 0; i < st->nafter; i++) {
    const Expr *m = st->after_colon[i];
    unsigned bit = 0;
    for (unsigned j = 0; j < sizeof words / sizeof words[0]; j++)
      if (m->kind == EX_IDENT && strcmp(m->name, words[j]) == 0) bit = 1u << j;
    if (!bit)
      diag_error(L->diag, m->loc, "unknown metric (expected loss, accuracy, f1, f1_macro or f1_binary)");
    t->metrics |= bit;
  }
}

/* ------------------------------------------------------- checkpoint policy */

static const char *const policy_words[] = {
    [CKPT_OFF] = "off", [CKPT_ALL] = "all", [CKPT_SQRT] = "sqrt",
    [CKPT_EVERY] = "every", [CKPT_BUDGET] = "budget", [CKPT_AUTO] = "auto",
};

bool checkpoint_policy_parse(const char *word, CheckpointPolicy *policy) {
  for (size_t i = 0; i < sizeof policy_words / sizeof policy_words[0]; i++)
    if (strcmp(word, policy_words[i]) == 0) {
      *policy = (CheckpointPolicy)i;
      return true;
    }
  return false;
}

bool checkpoint_policy_takes_number(CheckpointPolicy policy) {
  return policy == CKPT_EVERY || policy == CKPT_BUDGET;
}

/* A policy and its number (if it takes one) as a spec. */
static CheckpointSpec checkpoint_spec(CheckpointPolicy policy, uint64_t n) {
  CheckpointSpec c = {.policy = policy};
  if (policy == CKPT_EVERY) c.every = (int64_t)n;
  if (policy == CKPT_BUDGET) c.budget = n;
  return c;
}

bool checkpoint_spec_parse(const char *text, CheckpointSpec *spec) {
  const char *space = strchr(text, ' ');
  size_t len = space ? (size_t)(space - text) : strlen(text);
  char word[16];
  CheckpointPolicy policy;
  if (len >= sizeof word) return false;
  memcpy(word, text, len), word[len] = 0;
  if (!checkpoint_policy_parse(word, &policy) || !space != !checkpoint_policy_takes_number(policy)) return false;
  uint64_t n = 0;
  if (space) {
    const char *number = space + 1;
    if (!parse_size(number, &n) || n < 1) return false;
    if (policy == CKPT_EVERY && strspn(number, "0123456789") != strlen(number)) return false; /* a count, no unit */
  }
  *spec = checkpoint_spec(policy, n);
  return true;
}

const char *checkpoint_spec_str(const CheckpointSpec *spec, char buf[64]) {
  if (spec->policy == CKPT_EVERY) snprintf(buf, 64, "every %lld", (long long)spec->every);
  else if (spec->policy == CKPT_BUDGET) snprintf(buf, 64, "budget %lluB", (unsigned long long)spec->budget);
  else snprintf(buf, 64, "%s", policy_words[spec->policy]);
  return buf;
}

/* `checkpoint off | all | sqrt | auto | every N | budget SIZE`. */
static void lower_checkpoint(Lower *L, const Setting *st, CheckpointSpec *c) {
  const Expr *e = st->nitems >= 1 ? st->items[0] : NULL;
  CheckpointPolicy policy;
  if (!e || e->kind != EX_IDENT || st->has_colon || !checkpoint_policy_parse(e->name, &policy) ||
      st->nitems != 1 + checkpoint_policy_takes_number(policy)) {
    diag_error(L->diag, st->loc, "checkpoint is " CHECKPOINT_FORMS);
    return;
  }
  int64_t n = 0;
  if (st->nitems == 2 &&
      !want_int_value(L, eval(L, &L->globals, st->items[1]), st->items[1]->loc,
                      policy == CKPT_EVERY ? "the period" : "the budget", 1, INT64_C(1) << 53, &n))
    return;
  bool compress = c->compress; /* `compress` may come first */
  *c = checkpoint_spec(policy, (uint64_t)n);
  c->compress = compress;
}

/* `compress bf16` or `compress none` (docs/planner.md, *Storing in bf16*). */
static void lower_compress(Lower *L, const Setting *st, CheckpointSpec *c) {
  if (!setting_arity(L, st, 1)) return;
  const Expr *e = st->items[0];
  if (is_word(e, "bf16") || is_word(e, "none")) c->compress = is_word(e, "bf16");
  else diag_error(L->diag, e->loc, "compress is bf16 or none");
}

/* `sync parameters`, `sync parameters optimizer_state` or `sync gradients`. */
static void lower_sync(Lower *L, const Setting *st, trc_train_config *t) {
  const Expr *const *it = (const Expr *const *)st->items;
  bool params = st->nitems >= 1 && is_word(it[0], "parameters");
  bool grads = st->nitems == 1 && is_word(it[0], "gradients");
  bool state = params && st->nitems == 2 && is_word(it[1], "optimizer_state");
  if (st->has_colon || !(grads || (params && st->nitems == 1) || state)) {
    diag_error(L->diag, st->loc, "expected `sync parameters`, `sync parameters optimizer_state` or `sync gradients`");
    return;
  }
  t->sync_gradients = grads;
  t->sync_optimizer_state = state;
}

/* `outer_optimizer none` or `outer_optimizer nesterov(lr = 0.7, momentum = 0.9)`. */
static void lower_outer_optimizer(Lower *L, const Setting *st, trc_train_config *t) {
  static const Signature sig = {{"lr", "momentum"}, 2, 0, {0.7, 0.9}};
  if (!setting_arity(L, st, 1)) return;
  const Expr *c = st->items[0];
  if (is_word(c, "none")) {
    t->outer_optimizer = false, t->outer_lr = 1, t->outer_momentum = 0;
    return;
  }
  if (!((c->kind == EX_IDENT || c->kind == EX_CALL) && strcmp(c->name, "nesterov") == 0)) {
    diag_error(L->diag, c->loc, "outer_optimizer is none or nesterov(lr, momentum)");
    return;
  }
  Value v[MAX_PARAMS];
  SrcLoc locs[MAX_PARAMS];
  Expr none = {.kind = EX_CALL, .name = c->name, .loc = c->loc};
  double lr, momentum;
  if (!bind_args(L, &L->globals, c->kind == EX_CALL ? c : &none, &sig, v, locs) ||
      !number_in(L, v[0], locs[0], "the outer lr", 0, 10, &lr) ||
      !number_in(L, v[1], locs[1], "the outer momentum", 0, 0.999, &momentum))
    return;
  t->outer_optimizer = true, t->outer_lr = lr, t->outer_momentum = momentum;
}

/* `precision bf16` or `precision fp32`. */
static void lower_precision(Lower *L, const Setting *st, trc_train_config *t) {
  static const char *const names[] = {TRC_PRECISIONS(TRC_ENUM_WORD)};
  if (!setting_arity(L, st, 1)) return;
  const Expr *c = st->items[0];
  for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
    if (c->kind == EX_IDENT && strcmp(c->name, names[i]) == 0) {
      t->precision = (trc_precision)i;
      return;
    }
  diag_error(L->diag, c->loc, "precision is fp32 or bf16");
}

static const Setting *find_setting(const TrainBlock *tb, const char *key) {
  const Setting *found = NULL;
  for (const Setting *st = tb->settings; st; st = st->next)
    if (!strcmp(st->key, key)) found = st;
  return found;
}

/* Combinations that mean nothing: gradient averaging keeps every rank's
 * parameters and optimizer state equal, so it has no rounds to shape. */
static void check_distribution(Lower *L, const TrainBlock *tb, const trc_train_config *t) {
  if (!t->sync_gradients) return;
  const Setting *sync = find_setting(tb, "sync");
  if (t->local_sgd > 1)
    diag_error(L->diag, sync->loc, "`sync gradients` averages every step: it needs `local_sgd 1` (LocalSGD averages parameters: `sync parameters`)");
  static const char *const local_only[] = {"outer_optimizer", "local_sgd_warmup"};
  for (int i = 0; i < 2; i++) {
    const Setting *st = find_setting(tb, local_only[i]);
    if (st) diag_error(L->diag, st->loc, "'%s' shapes parameter averaging; it does not apply with `sync gradients`", local_only[i]);
  }
}

bool train_is_distributed(const TrainConfig *train) {
  const trc_train_config *t = &train->run;
  return t->local_sgd > 1 || t->sync_gradients || t->local_sgd_warmup > 0 || t->outer_optimizer;
}

static void lower_setting(Lower *L, const Setting *st, TrainConfig *train) {
  const char *k = st->key;
  int64_t big = INT64_C(1) << 40;
  trc_train_config *t = &train->run;
  if (!strcmp(k, "batch")) setting_int(L, st, 1, 1 << 20, &train->batch);
  else if (!strcmp(k, "accumulate")) setting_int(L, st, 1, 1 << 20, &t->accumulate);
  else if (!strcmp(k, "epochs")) setting_int(L, st, 1, big, &t->epochs);
  else if (!strcmp(k, "steps")) setting_int(L, st, 1, big, &t->steps);
  else if (!strcmp(k, "log_every")) setting_int(L, st, 1, big, &t->log_every);
  else if (!strcmp(k, "seed")) {
    int64_t seed;
    if (setting_int(L, st, 0, big, &seed)) t->seed = (uint64_t)seed;
  } else if (!strcmp(k, "clip")) setting_number(L, st, 0, 1e9, &t->clip_norm);
  else if (!strcmp(k, "validation")) setting_number(L, st, 0, 0.9, &t->validation);
  else if (!strcmp(k, "optimizer")) lower_optimizer(L, st, t);
  else if (!strcmp(k, "schedule")) lower_schedule(L, st, t);
  else if (!strcmp(k, "eval")) lower_eval(L, st, t);
  else if (!strcmp(k, "checkpoint")) lower_checkpoint(L, st, &train->checkpoint);
  else if (!strcmp(k, "compress")) lower_compress(L, st, &train->checkpoint);
  else if (!strcmp(k, "local_sgd")) setting_int(L, st, 1, big, &t->local_sgd);
  else if (!strcmp(k, "local_sgd_warmup")) setting_int(L, st, 0, big, &t->local_sgd_warmup);
  else if (!strcmp(k, "sync")) lower_sync(L, st, t);
  else if (!strcmp(k, "outer_optimizer")) lower_outer_optimizer(L, st, t);
  else if (!strcmp(k, "precision")) lower_precision(L, st, t);
  else if (!strcmp(k, "freeze")) return; /* weights.c, once the parameters exist */
  else diag_error(L->diag, st->loc, "unknown train setting '%s'", k);
}

void check_train_metrics(Lower *L, const TrainBlock *tb) {
  const Graph *g = L->g;
  const Setting *st = tb ? find_setting(tb, "eval") : NULL;
  if (!st || !(g->train.run.metrics & TRC_METRIC_F1_BINARY) || g->predict < 0) return;
  const Shape *p = &g->nodes[g->predict].shape;
  if (p->dim[p->rank - 1] != 2)
    diag_error(L->diag, st->loc,
               "f1_binary is the F1 of class 1 of two; this model predicts %lld classes (f1_macro: their mean)",
               (long long)p->dim[p->rank - 1]);
}

/* A decaying schedule ends at min_lr: above the optimizer's lr it would
 * climb instead. */
static void check_schedule(Lower *L, const TrainBlock *tb, const trc_train_config *t) {
  if (t->schedule == TRC_SCHED_CONSTANT || t->min_lr <= t->lr) return;
  diag_error(L->diag, find_setting(tb, "schedule")->loc,
             "min_lr %g is above the optimizer's lr %g%s", t->min_lr, t->lr,
             find_setting(tb, "optimizer") ? "" : " (the default)");
}

void lower_train(Lower *L, const TrainBlock *tb) {
  L->g->train = default_train();
  if (!tb) return;
  if (tb->next) diag_error(L->diag, tb->next->loc, "a file has at most one train block");
  NameMap seen = {0}; /* key -> its setting's index in firsts */
  const Setting **firsts = NULL;
  int n = 0, cap = 0;
  for (const Setting *st = tb->settings; st; st = st->next) {
    int first;
    if (namemap_get(&seen, st->key, &first)) { /* a second one would silently win */
      diag_error(L->diag, st->loc, "'%s' is set twice in the train block (first on line %d)",
                 st->key, firsts[first]->loc.line);
      diag_note(L->diag, firsts[first]->loc, "first set here");
      continue;
    }
    namemap_put(&seen, st->key, n);
    VEC_PUSH(firsts, n, cap, st);
    lower_setting(L, st, &L->g->train);
  }
  free(firsts);
  namemap_free(&seen);
  check_distribution(L, tb, &L->g->train.run);
  check_schedule(L, tb, &L->g->train.run);
}
