/* test_args.c — the trainer's flags: both spellings, defaults from the
 * model, --epochs/--steps precedence, one flag per train setting that
 * overrides it alone, the save strategy's flags, and every kind of bad
 * value; the usage text lists the inputs and every setting's default. */
#include "core/rt_core.h" /* the config table, field by field */
#include "test_util.h"

#include <stdarg.h>
#include <stdlib.h>

static const trc_input inputs[] = {
    {"image", TRC_U8, 2, {128, 784}, 0, 784, 0},
    {"label", TRC_I32, 1, {128}, 128 * 784, 4, 10},
};
static trc_model model = {.name = "fashion_mlp",
                          .source = "examples/fashion_mlp.nn",
                          .batch = 128,
                          .n_inputs = 2,
                          .inputs = inputs,
                          .token_input = -1};

/* parse(o, err, "--flag", ..., NULL) */
static int parse(trc_options *o, trc_error *err, ...) {
  char *argv[32] = {"trainer"};
  int argc = 1;
  va_list ap;
  va_start(ap, err);
  while (argc < 31 && (argv[argc] = va_arg(ap, char *))) argc++;
  va_end(ap);
  return trc_parse_args(&model, argc, argv, o, err);
}

static void test_good(void) {
  trc_options o;
  trc_error err;
  CHECK(parse(&o, &err, "--data", "d", NULL) == 0);
  CHECK(strcmp(o.data_dir, "d") == 0 && o.cfg.epochs == 10 && o.cfg.lr == 1e-3 && !o.steps_given);
  CHECK(parse(&o, &err, "--data=d", "--eval-data", "e", "--lr=0.5", "--seed",
              "18446744073709551615", "--log=l.jsonl", "--log-every", "7", "--quiet", "--save=w",
              NULL) == 0);
  CHECK(strcmp(o.eval_dir, "e") == 0 && o.cfg.lr == 0.5 && o.cfg.seed == UINT64_MAX);
  CHECK(strcmp(o.log_path, "l.jsonl") == 0 && o.cfg.log_every == 7 && o.quiet);
  CHECK(strcmp(o.save_path, "w") == 0);
  CHECK(parse(&o, &err, "--steps", "0", NULL) == 0 && o.steps_given && o.cfg.steps == 0);
  CHECK(o.comm_timeout == 300);
  CHECK(parse(&o, &err, "--data", "d", "--comm-timeout=2.5", NULL) == 0 && o.comm_timeout == 2.5);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--comm-timeout", "-1", NULL), err, ">= 0");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--comm-timeout", "1e19", NULL), err,
                   "--comm-timeout: at most 1e+09 seconds (0: no limit), got 1e+19");
  CHECK(parse(&o, &err, "--data", "d", "--comm-timeout=1e9", NULL) == 0);
  CHECK(parse(&o, &err, "--gradcheck", NULL) == 0 && o.gradcheck);
  CHECK(parse(&o, &err, "--data", "d", NULL) == 0 && o.cfg.precision == TRC_FP32);
  CHECK(parse(&o, &err, "--data", "d", "--precision", "bf16", NULL) == 0 &&
        o.cfg.precision == TRC_BF16);
  CHECK(parse(&o, &err, "--data", "d", "--precision=fp32", NULL) == 0 &&
        o.cfg.precision == TRC_FP32);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--precision", "fp16", NULL), err,
                   "--precision: expected fp32 or bf16, got 'fp16'");
  CHECK_FAILS_WITH(parse(&o, &err, "--gradcheck", "--precision", "bf16", NULL), err,
                   "--precision does nothing with --gradcheck");
  CHECK(parse(&o, &err, "--data", "d", "--dump-step=s.safetensors", NULL) == 0 &&
        strcmp(o.dump_path, "s.safetensors") == 0);
  CHECK(parse(&o, &err, "-h", NULL) == 0 && o.help);
  CHECK(parse(&o, &err, "--version", NULL) == 0 && o.version);
  /* --epochs beats a compiled-in step count; --steps beats --epochs */
  model.defaults.steps = 500;
  CHECK(parse(&o, &err, "--data", "d", "--epochs", "2", NULL) == 0 && o.cfg.steps == 0 &&
        o.cfg.epochs == 2);
  CHECK(parse(&o, &err, "--data", "d", NULL) == 0 && o.cfg.steps == 500);
  CHECK(parse(&o, &err, "--steps=3", "--data", "d", "--epochs", "2", NULL) == 0 &&
        o.cfg.steps == 3);
  model.defaults.steps = 0;
}

/* --sample needs a sequence model (any vocabulary: the tokenizer's); --prompt,
 * --temperature, --top-k, --top-p. */
static void test_sample(void) {
  trc_options o;
  trc_error err;
  CHECK(parse(&o, &err, "--data", "d", NULL) == 0 && o.sample == 0 && o.temperature == 1.0 && !o.prompt);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--sample", "5", NULL), err,
                   "not a sequence model");
  model.token_input = 0, model.predict_rows = 784, model.predict_classes = 256;
  model.has_predict = 1;
  CHECK(parse(&o, &err, "--steps", "0", "--sample", "5", "--prompt=", "--temperature", "0", NULL) == 0);
  CHECK(o.sample == 5 && strcmp(o.prompt, "") == 0 && o.temperature == 0);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--sample", "-1", NULL), err, "--sample");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--temperature", "-1", NULL), err, "--temperature");
  model.predict_classes = 50257;
  CHECK(parse(&o, &err, "--steps", "0", "--sample", "5", "--top-k", "40", "--top-p=0.9", NULL) == 0);
  CHECK(o.top_k == 40 && o.top_p == 0.9 && strcmp(o.tokenizer, "bytes") == 0);
  CHECK_FAILS_WITH(parse(&o, &err, "--steps", "0", "--sample", "5", "--top-p", "0", NULL), err,
                   "--top-p: expected a number in (0, 1]");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--top-k", "3", NULL), err,
                   "--top-k and --top-p need --sample N");
  model.token_input = -1, model.predict_rows = 0, model.predict_classes = 0;
  model.has_predict = 0;
}

static void test_bad(void) {
  trc_options o;
  trc_error err;
  const char *required = "--data DIR (or --text FILE, or --pairs FILE) is required";
  CHECK_FAILS_WITH(parse(&o, &err, NULL), err, required);
  CHECK_FAILS_WITH(parse(&o, &err, "--steps", "5", NULL), err, required);
  CHECK_FAILS_WITH(parse(&o, &err, "--dump-step", "s", NULL), err, "--dump-step needs --data DIR");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--bogus", NULL), err, "unknown flag '--bogus'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--lr=1=2", NULL), err,
                   "--lr: expected a finite number >= 0, got '1=2'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--lr", "abc", NULL), err, "got 'abc'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--lr", "inf", NULL), err, "finite");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--lr", "-1", NULL), err, ">= 0");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--epochs", "0", NULL), err, "integer >= 1");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--steps", "-1", NULL), err, "integer >= 0");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--steps", "1x", NULL), err, "got '1x'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--steps", "99999999999999999999", NULL), err,
                   "expected an integer");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--seed", "-3", NULL), err, "non-negative");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--log-every", "0", NULL), err, ">= 1");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--beta1", "1.5", NULL), err,
                   "--beta1: expected a finite number from 0 to 1, got '1.5'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--accumulate", "0", NULL), err,
                   "--accumulate: expected an integer from 1 to 1048576, got '0'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--warmup", "2.5", NULL), err,
                   "--warmup: expected an integer >= 0, got '2.5'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--validation", "0.95", NULL), err,
                   "--validation: expected a finite number from 0 to 0.9");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--nesterov", "maybe", NULL), err,
                   "--nesterov: expected yes or no, got 'maybe'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--optimizer", "adam", NULL), err,
                   "--optimizer: expected sgd or adamw, got 'adam'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--schedule", "step", NULL), err,
                   "--schedule: expected constant, linear or cosine, got 'step'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--metrics", "loss,auc", NULL), err,
                   "--metrics: expected a comma-separated list");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--metrics", "accuracy,", NULL), err,
                   "--metrics: expected a comma-separated list");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--eps", NULL), err, "--eps needs a value (X)");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--sync-gradients", "yes", "--local-sgd", "4",
                         NULL), err, "--sync-gradients averages every step");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--quiet=1", NULL), err,
                   "--quiet takes no value");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", NULL), err, "--data needs a value (DIR)");
  CHECK_FAILS_WITH(parse(&o, &err, "--data=", NULL), err, "empty value");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "extra", NULL), err,
                   "unexpected argument 'extra'");
  CHECK_FAILS_WITH(parse(&o, &err, "-x", NULL), err, "unexpected argument '-x'");
}

/* Flags are settings too: each is given once, and what the train block
 * refuses together is refused after every flag is applied (issue 26). */
static void test_as_train_block(void) {
  trc_options o;
  trc_error err;
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--save", "a", "--save=b", NULL), err,
                   "--save is given twice");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--steps", "1", "--steps", "2", NULL), err,
                   "--steps is given twice");
  CHECK_FAILS_WITH(parse(&o, &err, "--quiet", "--data", "d", "--quiet", NULL), err,
                   "--quiet is given twice");
  /* min_lr above lr: a decaying schedule would climb to it */
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--min-lr", "1", NULL), err,
                   "min_lr 1 is above lr 0.001");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--min-lr", "1e-4", "--lr", "1e-5", NULL), err,
                   "min_lr 0.0001 is above lr 1e-05");
  CHECK(parse(&o, &err, "--data", "d", "--min-lr", "1", "--lr", "2", NULL) == 0);
  CHECK(parse(&o, &err, "--data", "d", "--min-lr", "1", "--schedule", "constant", NULL) == 0);
  /* AdamW divides by sqrt(v) + eps, and by 1 - beta^t */
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--eps", "0", NULL), err,
                   "eps must be above 0");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--beta2=1", NULL), err,
                   "beta2 must be below 1");
  CHECK(parse(&o, &err, "--data", "d", "--eps", "0", "--optimizer", "sgd", NULL) == 0);
}

/* A flag the run would ignore is refused, naming what makes it moot. */
static void test_moot_combinations(void) {
  trc_options o;
  trc_error err;
  CHECK_FAILS_WITH(parse(&o, &err, "--gradcheck", "--save", "w", NULL), err,
                   "--save does nothing with --gradcheck");
  CHECK_FAILS_WITH(parse(&o, &err, "--gradcheck", "--data", "d", NULL), err,
                   "--data does nothing with --gradcheck");
  CHECK_FAILS_WITH(parse(&o, &err, "--gradcheck", "--dump-step", "s", "--data", "d", NULL), err,
                   "does nothing with --gradcheck");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--dump-step", "s", "--log", "l", NULL), err,
                   "--log does nothing with --dump-step");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--dump-step", "s", "--save-state", "st", NULL),
                   err, "--save-state does nothing with --dump-step");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--resume", "st", "--init", "w", NULL), err,
                   "--init does nothing with --resume");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--prompt", "hi", NULL), err,
                   "--prompt, --temperature, --top-k and --top-p need --sample N");
  CHECK(parse(&o, &err, "--gradcheck", "--init", "w", "--seed", "3", "--quiet", NULL) == 0);
  CHECK(parse(&o, &err, "--data", "d", "--dump-step", "s", "--init", "w", "--seed", "3", NULL) == 0);
  CHECK(parse(&o, &err, "--data", "d", "--resume", "st", "--save-state", "st", NULL) == 0);
}

/* Values different from main()'s defaults for every train setting, each
 * valid alone. */
static const trc_train_config others = {.accumulate = 3,
                                        .epochs = 2,
                                        .steps = 7,
                                        .optimizer = TRC_SGD,
                                        .lr = 0.5,
                                        .momentum = 0.8,
                                        .weight_decay = 0.2,
                                        .beta1 = 0.8,
                                        .beta2 = 0.99,
                                        .eps = 1e-6,
                                        .nesterov = 1,
                                        .schedule = TRC_SCHED_LINEAR,
                                        .warmup = 5,
                                        .min_lr = 1e-5,
                                        .clip_norm = 2.5,
                                        .seed = 9,
                                        .eval_every_epoch = 1,
                                        .eval_every_steps = 4,
                                        .metrics = TRC_METRIC_LOSS | TRC_METRIC_F1_MACRO,
                                        .log_every = 3,
                                        .validation = 0.25,
                                        .local_sgd = 4,
                                        .local_sgd_warmup = 2,
                                        .sync_gradients = 1,
                                        .sync_optimizer_state = 1,
                                        .outer_optimizer = 1,
                                        .outer_lr = 0.7,
                                        .outer_momentum = 0.9,
                                        .precision = TRC_BF16};

/* Every train setting has a flag, --FIELD with dashes, that sets it and
 * nothing else: walked from the config table, so a new setting is covered
 * (and fails here until `others` gives it a value of its own). */
static void test_every_setting(void) {
  trc_config_field defaults[TRC_CONFIG_FIELDS], wanted[TRC_CONFIG_FIELDS], got[TRC_CONFIG_FIELDS];
  trc_config_fields(&model.defaults, defaults);
  trc_config_fields(&others, wanted);
  for (int i = 0; i < TRC_CONFIG_FIELDS; i++) {
    char flag[128];
    trc_options o;
    trc_error err;
    CHECK(strcmp(defaults[i].value, wanted[i].value) != 0);
    snprintf(flag, sizeof flag, "--%s=%s", defaults[i].flag, wanted[i].value);
    int rc = parse(&o, &err, "--data", "d", flag, NULL);
    if (rc != 0) fprintf(stderr, "%s: %s\n", flag, err.msg);
    CHECK(rc == 0);
    trc_config_fields(&o.cfg, got);
    for (int k = 0; k < TRC_CONFIG_FIELDS; k++) {
      int same = strcmp(got[k].value, (k == i ? wanted : defaults)[k].value) == 0;
      if (!same) fprintf(stderr, "%s changed %s to %s\n", flag, got[k].name, got[k].value);
      CHECK(same);
    }
  }
  trc_options o;
  trc_error err;
  CHECK(parse(&o, &err, "--data", "d", "--metrics", "accuracy,f1,f1_macro", "--nesterov", "true",
              NULL) == 0);
  CHECK(o.cfg.metrics == (TRC_METRIC_LOSS | TRC_METRIC_ACCURACY | TRC_METRIC_F1 |
                          TRC_METRIC_F1_MACRO) && o.cfg.nesterov == 1);
  CHECK(parse(&o, &err, "--data", "d", "--eval-every-epoch", "no", NULL) == 0 &&
        o.cfg.eval_every_epoch == 0);
  CHECK_FAILS_WITH(parse(&o, &err, "--gradcheck", "--lr", "1", NULL), err,
                   "--lr does nothing with --gradcheck");
  CHECK(parse(&o, &err, "--gradcheck", "--seed", "3", NULL) == 0 && o.cfg.seed == 3);
}

/* --save-every N|epoch, --save-total-limit, --load-best, --metric-for-best,
 * --early-stopping and what each needs. */
static void test_save_strategy(void) {
  trc_options o;
  trc_error err;
  CHECK(parse(&o, &err, "--data", "d", NULL) == 0 && o.save_every == 100 &&
        o.save_total_limit == 1 && !o.load_best && o.metric_for_best == TRC_EVAL_LOSS &&
        o.early_stopping == 0);
  CHECK(parse(&o, &err, "--data", "d", "--save-state", "s", "--save-every", "epoch",
              "--save-total-limit", "0", NULL) == 0 &&
        o.save_every == -1 && o.save_total_limit == 0);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--save-state", "s", "--save-every", "0", NULL),
                   err, "--save-every: expected an integer >= 1 or 'epoch', got '0'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--save-total-limit", "2", NULL), err,
                   "--save-total-limit needs --save-state DIR");
  model.defaults.validation = 0.1, model.defaults.eval_every_epoch = 1;
  model.has_predict = 1, model.label_input = 1, model.predict_classes = 10, model.predict_rows = 1;
  model.defaults.metrics = TRC_METRIC_LOSS | TRC_METRIC_ACCURACY | TRC_METRIC_F1;
  CHECK(parse(&o, &err, "--data", "d", "--load-best", "--metric-for-best", "accuracy",
              "--early-stopping", "3", "--early-stopping-threshold", "0.01", NULL) == 0);
  CHECK(o.load_best && o.metric_for_best == TRC_EVAL_ACCURACY && o.early_stopping == 3 &&
        o.early_stopping_threshold == 0.01);
  CHECK(parse(&o, &err, "--data", "d", "--early-stopping", "2", "--metric-for-best=eval_f1",
              NULL) == 0 && o.metric_for_best == TRC_EVAL_F1);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--load-best", "--metric-for-best", "f2", NULL),
                   err, "--metric-for-best: expected eval_loss, eval_accuracy, eval_f1");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--load-best", "--metric-for-best", "f1_binary",
                         NULL),
                   err, "--metric-for-best eval_f1_binary: the run does not compute it");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--metric-for-best", "accuracy", NULL), err,
                   "--metric-for-best needs --load-best or --early-stopping");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--early-stopping-threshold", "1", NULL), err,
                   "--early-stopping-threshold needs --early-stopping");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--early-stopping", "0", NULL), err,
                   "--early-stopping: expected an integer >= 1");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--load-best", "--validation", "0", NULL), err,
                   "--load-best needs evaluation data: --eval-data DIR (--eval-text, "
                   "--eval-pairs) or --validation X");
  CHECK(parse(&o, &err, "--data", "d", "--load-best", "--validation", "0", "--eval-data", "e",
              NULL) == 0);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--early-stopping", "2", "--eval-every-epoch",
                         "no", NULL), err, "--early-stopping needs evaluations during training");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--metrics", "f1_binary", NULL), err,
                   "metric f1_binary: the model predicts 10 classes; binary F1 needs 2");
  model.predict_classes = 2;
  CHECK(parse(&o, &err, "--data", "d", "--metrics", "f1_binary", "--load-best",
              "--metric-for-best", "eval_f1_binary", NULL) == 0);
  model.defaults.validation = 0, model.defaults.eval_every_epoch = 0;
  model.defaults.metrics = TRC_METRIC_LOSS;
  model.has_predict = 0, model.label_input = -1, model.predict_classes = 0, model.predict_rows = 0;
}

static void test_usage(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  trc_print_usage(&model, "fashion", f);
  fclose(f);
  CHECK(strstr(text, "usage: fashion --data DIR") != NULL);
  CHECK(strstr(text, "examples/fashion_mlp.nn") != NULL);
  CHECK(strstr(text, "image") && strstr(text, "u8[B, 784]"));
  CHECK(strstr(text, "label") && strstr(text, "i32[B]") && strstr(text, "values in [0, 10)"));
  CHECK(strstr(text, "B = 128") != NULL);
  CHECK(strstr(text, "--gradcheck") && strstr(text, "--log-every N"));
  CHECK(strstr(text, "batch 128 is compiled") != NULL);
  /* every setting's flag with its compiled value: exact, and short */
  CHECK(strstr(text, "\n  --optimizer sgd|adamw          adamw ") != NULL);
  CHECK(strstr(text, "\n  --lr X                         0.001 ") != NULL);
  CHECK(strstr(text, "\n  --beta1 X                      0.9 ") != NULL);
  CHECK(strstr(text, "\n  --weight-decay X               0.01 ") != NULL);
  CHECK(strstr(text, "\n  --schedule constant|linear|cosine cosine ") != NULL);
  CHECK(strstr(text, "\n  --metrics LIST                 loss ") != NULL);
  CHECK(strstr(text, "\n  --validation X                 0 ") != NULL);
  trc_config_field fields[TRC_CONFIG_FIELDS];
  trc_config_fields(&model.defaults, fields);
  for (int i = 0; i < TRC_CONFIG_FIELDS; i++) {
    char line[128];
    snprintf(line, sizeof line, "\n  --%s %s", fields[i].flag, fields[i].metavar);
    CHECK(strstr(text, line) != NULL);
  }
  free(text);
}

int main(void) {
  model.defaults = (trc_train_config){.accumulate = 4,
                                      .epochs = 10,
                                      .optimizer = TRC_ADAMW,
                                      .lr = 1e-3,
                                      .beta1 = 0.9,
                                      .beta2 = 0.999,
                                      .eps = 1e-8,
                                      .weight_decay = 0.01,
                                      .schedule = TRC_SCHED_COSINE,
                                      .warmup = 200,
                                      .seed = 42,
                                      .log_every = 50,
                                      .metrics = TRC_METRIC_LOSS,
                                      .local_sgd = 1};
  test_good();
  test_bad();
  test_as_train_block();
  test_moot_combinations();
  test_every_setting();
  test_save_strategy();
  test_sample();
  test_usage();
  return test_finish("test_args");
}
