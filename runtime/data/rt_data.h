/* rt_data.h — what data/'s readers share: array files (.npy, IDX),
 * the input files of a run, text and tokens, ignored labels. Not installed. */
#ifndef TRAINC_RT_DATA_H
#define TRAINC_RT_DATA_H

#include "core/rt_core.h"

/* Element i of an integer input's data (u8 or i32) set to v (data.c). */
void trc_store_index(const trc_input *in, unsigned char *data, uint64_t i, int32_t v);

/* Bytes of one element of a .npy / IDX array. */
size_t trc_elem_size(trc_elem_type elem);
/* Sets hdr->count and hdr->data_bytes from the dims (overflow checked). */
int trc_array_size(trc_array_header *hdr, trc_error *err);
/* Fails unless exactly hdr->data_bytes follow hdr->data_offset in `len`. */
int trc_array_check_payload(const trc_array_header *hdr, uint64_t len, trc_error *err);

/* The file input `name` is read from: the first of DIR/NAME.npy,
 * DIR/NAME.idx, DIR/NAME.idx.gz that exists (a dangling symlink counts, so
 * the read reports it). */
int trc_find_input_file(const char *dir, const char *name, char *path, size_t cap, trc_error *err);

/* An array file's header read piece by piece (data.c): its extent from its
 * first n bytes (more than n: read that many first; 0: not this format, the
 * parser says why), then parsed from exactly that many bytes, which sets
 * data_offset, count and data_bytes but checks nothing after it. */
uint64_t trc_npy_header_extent(const unsigned char *b, size_t n);
uint64_t trc_idx_header_extent(const unsigned char *b, size_t n);
int trc_npy_parse_header(const void *buf, size_t len, trc_array_header *hdr, trc_error *err);
int trc_idx_parse_header(const void *buf, size_t len, trc_array_header *hdr, trc_error *err);

/* Text and tokens (tokenizer.c), shared with wordpiece.c. */
/* The code point at s[0..len) (valid UTF-8, checked before) and its length. */
uint32_t trc_utf8_decode(const unsigned char *s, size_t len, size_t *n);
/* Unicode's White_Space property. */
int trc_is_white_space(uint32_t cp);
/* Whether cp lies in one of n sorted, disjoint, inclusive ranges. */
int trc_in_ranges(uint32_t cp, const uint32_t (*r)[2], size_t n);
/* The id of the token with these bytes, or -1. */
int32_t trc_tokenizer_find(const trc_tokenizer *t, const unsigned char *s, size_t n);
/* BERT's WordPiece (wordpiece.c) over t's vocabulary: the ids of valid
 * UTF-8 text, appended to out. */
int trc_wordpiece_encode(const trc_tokenizer *t, const unsigned char *text, size_t len,
                         trc_tokens *out, trc_error *err);

/* ---- ignored labels (labels.c): cross_entropy(..., ignore = L) ---- */
/* The input whose labels may be ignored (has_ignore), -1 if none. The model's
 * loss is then a sum over the labels that count, which the runtime divides
 * by their number. */
int trc_ignore_input(const trc_model *m);
/* Labels that count (not ignored) in rows[0..count) of ds. */
int64_t trc_count_labels(const trc_model *m, const trc_dataset *ds, const int64_t *rows,
                         int64_t count);
/* The same for the batch now in the arena's input slot. */
int64_t trc_count_labels_in_arena(const trc_model *m, const char *arena);
/* Fails when none of the `rows` examples of the ignored input's file at path
 * has a label that counts: nothing to train on or evaluate. */
int trc_check_labels_count(const trc_model *m, const unsigned char *labels, int64_t rows,
                           const char *path, trc_error *err);

#endif
