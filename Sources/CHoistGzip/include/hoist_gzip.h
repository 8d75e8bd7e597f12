// gzip compression on the system's zlib, behind an opaque handle: Swift never sees a z_stream.
#ifndef HOIST_GZIP_H
#define HOIST_GZIP_H

#include <stddef.h>

/// One gzip stream being written.
typedef struct hoist_gzip hoist_gzip;

/// A new stream at `level` (1-9). Its header is the same on every machine and every run: no
/// modification time (0), no file name, no comment, OS byte 255 ("unknown"), so the same input
/// at the same level gives the same bytes (with the same zlib). NULL when out of memory or for a
/// bad level.
hoist_gzip *hoist_gzip_new(int level);

/// Compresses `input` (`input_length` bytes; `finish` non-zero when it is the last of the
/// stream) into `output` (room for `output_capacity` bytes). Sets `*consumed` to the input
/// bytes taken and `*produced` to the output bytes written. Returns 1 once the stream has ended
/// (only with `finish`), 0 when the caller should call again (with the input not consumed, or
/// more output room), -1 on an error (a zlib bug or misuse).
int hoist_gzip_deflate(hoist_gzip *stream, const void *input, size_t input_length, size_t *consumed,
                       void *output, size_t output_capacity, size_t *produced, int finish);

/// Frees the stream (NULL is allowed).
void hoist_gzip_free(hoist_gzip *stream);

#endif
