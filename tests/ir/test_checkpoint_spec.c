/* test_checkpoint_spec.c — the checkpoint policy's text form (`--policy`):
 * every form parses to its spec and prints back to a form that parses to the
 * same spec; malformed forms are refused and leave the spec untouched. */
#include "ir.h"
#include "check.h"

#include <string.h>


static bool spec_equal(CheckpointSpec a, CheckpointSpec b) {
  return a.policy == b.policy && a.every == b.every && a.budget == b.budget;
}

int main(void) {
  static const struct {
    const char *text, *printed;
    CheckpointSpec spec;
  } good[] = {
      {"off", "off", {.policy = CKPT_OFF}},
      {"all", "all", {.policy = CKPT_ALL}},
      {"sqrt", "sqrt", {.policy = CKPT_SQRT}},
      {"auto", "auto", {.policy = CKPT_AUTO}},
      {"every 4", "every 4", {.policy = CKPT_EVERY, .every = 4}},
      {"budget 1MiB", "budget 1048576B", {.policy = CKPT_BUDGET, .budget = 1048576}},
      {"budget 9.5MiB", "budget 9961472B", {.policy = CKPT_BUDGET, .budget = 9961472}},
      {"budget 300", "budget 300B", {.policy = CKPT_BUDGET, .budget = 300}},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    CheckpointSpec spec = {.policy = CKPT_SQRT, .every = 99}, again;
    char buf[64];
    CHECK(checkpoint_spec_parse(good[i].text, &spec), good[i].text);
    CHECK(spec_equal(spec, good[i].spec), good[i].text);
    CHECK(strcmp(checkpoint_spec_str(&spec, buf), good[i].printed) == 0, good[i].text);
    CHECK(checkpoint_spec_parse(buf, &again) && spec_equal(again, spec), good[i].text);
  }
  static const char *const bad[] = {
      "", "of", "offf", "off ", "every", "every ", "every 0", "every 2KiB", "every -1", "every 2.5",
      "budget", "budget 0", "budget lots", "sqrt 3", "auto 1", "everyone 4", "every  4", "budgetbudgetbudget 1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CheckpointSpec spec = {.policy = CKPT_ALL, .every = 7};
    CHECK(!checkpoint_spec_parse(bad[i], &spec), bad[i]);
    CHECK(spec.policy == CKPT_ALL && spec.every == 7, bad[i]);
  }
  /* The one word list: each policy's printed word names it again. */
  for (int p = CKPT_OFF; p <= CKPT_AUTO; p++) {
    CheckpointSpec spec = {.policy = (CheckpointPolicy)p};
    char buf[64], word[16];
    CheckpointPolicy back;
    sscanf(checkpoint_spec_str(&spec, buf), "%15s", word);
    CHECK(checkpoint_policy_parse(word, &back) && back == (CheckpointPolicy)p, word);
  }
  return failures != 0;
}
