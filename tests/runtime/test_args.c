/* test_args.c — the trainer's flags: both spellings, defaults from the
 * model, --epochs/--steps precedence, and every kind of bad value; the
 * usage text lists the inputs. */
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

/* --sample needs a byte-level sequence model; --prompt and --temperature. */
static void test_sample(void) {
  trc_options o;
  trc_error err;
  CHECK(parse(&o, &err, "--data", "d", NULL) == 0 && o.sample == 0 && o.temperature == 1.0 && !o.prompt);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--sample", "5", NULL), err,
                   "not a byte-level sequence model");
  model.token_input = 0, model.predict_rows = 784, model.predict_classes = 256;
  CHECK(parse(&o, &err, "--steps", "0", "--sample", "5", "--prompt=", "--temperature", "0", NULL) == 0);
  CHECK(o.sample == 5 && strcmp(o.prompt, "") == 0 && o.temperature == 0);
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--sample", "-1", NULL), err, "--sample");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--temperature", "-1", NULL), err, "--temperature");
  model.predict_classes = 50257;
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--sample", "5", NULL), err, "byte-level");
  model.token_input = -1, model.predict_rows = 0, model.predict_classes = 0;
}

static void test_bad(void) {
  trc_options o;
  trc_error err;
  CHECK_FAILS_WITH(parse(&o, &err, NULL), err, "--data DIR is required");
  CHECK_FAILS_WITH(parse(&o, &err, "--steps", "5", NULL), err, "--data DIR is required");
  CHECK_FAILS_WITH(parse(&o, &err, "--dump-step", "s", NULL), err, "--dump-step needs --data DIR");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--bogus", NULL), err, "unknown flag '--bogus'");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--lr=1=2", NULL), err,
                   "--lr: expected a finite number");
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
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "--quiet=1", NULL), err,
                   "--quiet takes no value");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", NULL), err, "--data needs a value (DIR)");
  CHECK_FAILS_WITH(parse(&o, &err, "--data=", NULL), err, "empty value");
  CHECK_FAILS_WITH(parse(&o, &err, "--data", "d", "extra", NULL), err,
                   "unexpected argument 'extra'");
  CHECK_FAILS_WITH(parse(&o, &err, "-x", NULL), err, "unexpected argument '-x'");
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
                   "--prompt and --temperature need --sample N");
  CHECK(parse(&o, &err, "--gradcheck", "--init", "w", "--seed", "3", "--quiet", NULL) == 0);
  CHECK(parse(&o, &err, "--data", "d", "--dump-step", "s", "--init", "w", "--seed", "3", NULL) == 0);
  CHECK(parse(&o, &err, "--data", "d", "--resume", "st", "--save-state", "st", NULL) == 0);
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
  CHECK(strstr(text, "\n  optimizer            adamw ") != NULL);
  CHECK(strstr(text, "\n  lr                   0.001 ") != NULL);
  CHECK(strstr(text, "\n  beta1                0.9 ") != NULL); /* exact, and short */
  CHECK(strstr(text, "\n  schedule             cosine ") != NULL);
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
                                      .local_sgd = 1};
  test_good();
  test_bad();
  test_moot_combinations();
  test_sample();
  test_usage();
  return test_finish("test_args");
}
