/* sample.c — text generation from a trained sequence model (`--sample N`):
 * the prompt through the tokenizer, then the model's own forward() on a
 * sliding context, one token per call, drawn from the logits at the
 * context's last position (temperature, then top-k, then top-p, in the order
 * Hugging Face's generate() applies them), each token written as its bytes. */
#include "rt_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Row 0 of the token input <- the last min(len, T) tokens, then zeros. */
static int64_t write_context(const trc_model *m, char *arena, const int32_t *tokens, uint64_t len) {
  const trc_input *in = &m->inputs[m->token_input];
  int64_t T = m->predict_rows, used = (int64_t)len < T ? (int64_t)len : T;
  const int32_t *first = tokens + len - (uint64_t)used;
  for (int64_t t = 0; t < T; t++) {
    int32_t v = t < used ? first[t] : 0;
    if (in->dtype == TRC_U8)
      arena[in->offset + (uint64_t)t] = (char)v;
    else
      memcpy(arena + in->offset + 4 * (uint64_t)t, &v, 4);
  }
  return used;
}

typedef struct {
  double p; /* unnormalized probability */
  int32_t id;
} candidate;

/* Most likely first; the lower id first on ties, so draws are repeatable. */
static int by_probability(const void *a, const void *b) {
  const candidate *x = a, *y = b;
  if (x->p != y->p) return x->p < y->p ? 1 : -1;
  return (x->id > y->id) - (x->id < y->id);
}

/* A draw from softmax(logits / temperature) over ids [0, classes), kept to
 * the top_k most likely (0: all), then to the fewest most likely whose
 * probability reaches top_p of what is left; the first arg-max at
 * temperature 0. `c` has room for `classes` candidates. */
static int32_t pick(const float *logits, int64_t classes, const trc_sample_settings *s, double u,
                    candidate *c) {
  int64_t best = 0;
  for (int64_t i = 1; i < classes; i++)
    if (logits[i] > logits[best]) best = i;
  if (s->temperature == 0) return (int32_t)best;
  for (int64_t i = 0; i < classes; i++)
    c[i] = (candidate){exp((logits[i] - logits[best]) / s->temperature), (int32_t)i};
  int64_t kept = classes;
  if (s->top_k > 0 || s->top_p < 1) qsort(c, (size_t)classes, sizeof *c, by_probability);
  if (s->top_k > 0 && s->top_k < kept) kept = s->top_k;
  double total = 0;
  for (int64_t i = 0; i < kept; i++) total += c[i].p;
  if (s->top_p < 1) {
    double run = 0;
    for (int64_t i = 0; i < kept; i++)
      if ((run += c[i].p) >= s->top_p * total) {
        kept = i + 1;
        total = run;
        break;
      }
  }
  double target = u * total, run = 0;
  for (int64_t i = 0; i < kept; i++)
    if ((run += c[i].p) > target) return c[i].id;
  return c[kept - 1].id; /* rounding left u*total beyond the sum */
}

int trc_can_sample(const trc_model *m) { return m->token_input >= 0 && m->has_predict; }

/* The prompt's tokens, each one the model's embedding takes. */
static int encode_prompt(const trc_model *m, const trc_tokenizer *tok, const char *prompt,
                         trc_tokens *tk, trc_error *err) {
  const int64_t limit = m->inputs[m->token_input].index_limit;
  if (trc_tokenizer_encode(tok, (const unsigned char *)prompt, strlen(prompt), tk, err))
    return trc_set_where(err, "--prompt");
  if (tk->n == 0) return trc_fail_at(err, "--prompt", "the prompt has no tokens");
  for (uint64_t i = 0; i < tk->n; i++)
    if (limit > 0 && tk->ids[i] >= limit)
      return trc_fail_at(err, "--prompt", "token %d (%llu of the prompt) is not below the "
                         "model's vocabulary of %lld", tk->ids[i], (unsigned long long)i,
                         (long long)limit);
  return 0;
}

static void write_token(const trc_tokenizer *tok, int32_t id, FILE *out) {
  size_t n;
  const unsigned char *b = trc_tokenizer_token(tok, id, &n);
  fwrite(b, 1, n, out);
}

int trc_sample(const trc_model *m, char *arena, const trc_tokenizer *tok, const char *prompt,
               int64_t count, const trc_sample_settings *s, FILE *out, trc_error *err) {
  if (!trc_can_sample(m)) return trc_fail(err, "sampling needs a sequence model");
  /* draw only ids the tokenizer can write (a model may pad its vocabulary)
   * and the embedding can read back */
  int64_t classes = m->predict_classes, limit = m->inputs[m->token_input].index_limit;
  if (trc_tokenizer_vocab(tok) < classes) classes = trc_tokenizer_vocab(tok);
  if (limit > 0 && limit < classes) classes = limit;
  trc_tokens tk = {0};
  candidate *c = malloc((size_t)classes * sizeof *c);
  float *logits = malloc((size_t)m->predict_classes * sizeof *logits);
  if (!c || !logits) {
    free(c);
    free(logits);
    return trc_fail(err, "out of memory (sampling)");
  }
  if (encode_prompt(m, tok, prompt, &tk, err)) {
    free(c);
    free(logits);
    trc_tokens_free(&tk);
    return -1;
  }
  fputs(prompt, out);
  uint64_t key = trc_rng_key(s->seed, TRC_STREAM_SAMPLE, 0);
  trc_set_mode(m, arena, 0, 0);
  int rc = 0;
  for (int64_t i = 0; i < count && rc == 0; i++) {
    int64_t last = write_context(m, arena, tk.ids, tk.n) - 1;
    m->forward(arena);
    trc_predict_row(m, arena, last, logits);
    int32_t id = pick(logits, classes, s, trc_rng_uniform(key, (uint64_t)i), c);
    rc = trc_tokens_push(&tk, id, err);
    write_token(tok, id, out);
    fflush(out);
  }
  fputc('\n', out);
  free(c);
  free(logits);
  trc_tokens_free(&tk);
  return rc;
}
