#include "hoist_gzip.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct hoist_gzip {
    z_stream stream;
    /// zlib keeps a pointer to it until the header is written: it lives with the stream.
    gz_header header;
};

hoist_gzip *hoist_gzip_new(int level) {
    if (level < 1 || level > 9) return NULL;
    hoist_gzip *gzip = calloc(1, sizeof(hoist_gzip));
    if (gzip == NULL) return NULL;
    // windowBits 15 + 16: a gzip wrapper rather than zlib's own.
    if (deflateInit2(&gzip->stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(gzip);
        return NULL;
    }
    memset(&gzip->header, 0, sizeof(gzip->header));
    gzip->header.time = 0;
    gzip->header.os = 255;
    if (deflateSetHeader(&gzip->stream, &gzip->header) != Z_OK) {
        deflateEnd(&gzip->stream);
        free(gzip);
        return NULL;
    }
    return gzip;
}

int hoist_gzip_deflate(hoist_gzip *gzip, const void *input, size_t input_length, size_t *consumed,
                       void *output, size_t output_capacity, size_t *produced, int finish) {
    // zlib counts in uInt: at most 1 GiB a call, and the caller calls again for the rest.
    uInt in = input_length > (1u << 30) ? (1u << 30) : (uInt)input_length;
    uInt out = output_capacity > (1u << 30) ? (1u << 30) : (uInt)output_capacity;
    gzip->stream.next_in = (Bytef *)input;
    gzip->stream.avail_in = in;
    gzip->stream.next_out = (Bytef *)output;
    gzip->stream.avail_out = out;
    int flush = (finish && in == input_length) ? Z_FINISH : Z_NO_FLUSH;
    int result = deflate(&gzip->stream, flush);
    *consumed = in - gzip->stream.avail_in;
    *produced = out - gzip->stream.avail_out;
    if (result == Z_STREAM_END) return 1;
    if (result == Z_OK || result == Z_BUF_ERROR) return 0;
    return -1;
}

void hoist_gzip_free(hoist_gzip *gzip) {
    if (gzip == NULL) return;
    deflateEnd(&gzip->stream);
    free(gzip);
}

