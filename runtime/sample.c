/* sample.c — text generation from a trained byte-level sequence model
 * (`--sample N`): the model's own forward() on a sliding context, one token
 * per call, from the logits at the context's last position. */
#include "rt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Row 0 of the token input <- the last min(len, T) tokens, then zeros. */
static int64_t write_context(const trc_model *m, char *arena, const unsigned char *tokens, size_t len) {
  const trc_input *in = &m->inputs[m->token_input];
  int64_t T = m->predict_rows, used = (int64_t)len < T ? (int64_t)len : T;
  const unsigned char *first = tokens + len - (size_t)used;
  for (int64_t t = 0; t < T; t++) {
    int32_t v = t < used ? first[t] : 0;
    if (in->dtype == TRC_U8)
      arena[in->offset + (uint64_t)t] = (char)v;
    else
      memcpy(arena + in->offset + 4 * (uint64_t)t, &v, 4);
  }
  return used;
}

/* A draw from softmax(logits / temperature), or the first arg-max. */
static int pick(const float *logits, int64_t classes, double temperature, double u) {
  int best = 0;
  for (int64_t c = 1; c < classes; c++)
    if (logits[c] > logits[best]) best = (int)c;
  if (temperature == 0) return best;
  double total = 0;
  for (int64_t c = 0; c < classes; c++) total += exp((logits[c] - logits[best]) / temperature);
  double target = u * total, run = 0;
  for (int64_t c = 0; c < classes; c++) {
    run += exp((logits[c] - logits[best]) / temperature);
    if (run > target) return (int)c;
  }
  return best; /* rounding left u*total beyond the sum */
}

int trc_can_sample(const trc_model *m) { return m->token_input >= 0 && m->predict_classes <= 256; }

int trc_sample(const trc_model *m, char *arena, const unsigned char *prompt, size_t len,
               int64_t count, double temperature, uint64_t seed, FILE *out, trc_error *err) {
  if (!trc_can_sample(m) || len == 0)
    return trc_fail(err, "sampling needs a byte-level sequence model and a prompt of at least one byte");
  const int64_t limit = m->inputs[m->token_input].index_limit;
  for (size_t i = 0; i < len; i++)
    if (limit > 0 && prompt[i] >= limit)
      return trc_fail(err, "--prompt: byte %u at offset %zu is not below the vocabulary size %lld",
                      prompt[i], i, (long long)limit);
  unsigned char *text = malloc(len + (size_t)count);
  if (!text) return trc_fail(err, "out of memory (sampling)");
  memcpy(text, prompt, len);
  fwrite(prompt, 1, len, out);
  uint64_t key = trc_rng_key(seed, TRC_STREAM_SAMPLE, 0);
  trc_set_mode(m, arena, 0, 0);
  for (int64_t i = 0; i < count; i++) {
    int64_t last = write_context(m, arena, text, len + (size_t)i) - 1;
    m->forward(arena);
    const float *logits = (const float *)(arena + m->predict_offset) + last * m->predict_classes;
    text[len + (size_t)i] = (unsigned char)pick(logits, m->predict_classes, temperature,
                                                trc_rng_uniform(key, (uint64_t)i));
    fputc(text[len + (size_t)i], out);
    fflush(out);
  }
  fputc('\n', out);
  free(text);
  return 0;
}
