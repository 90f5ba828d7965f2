/* Runs a standalone C model: harness IN_DIR OUT_DIR [REPEAT] reads IN_DIR/<k>.bin (input k),
 * writes OUT_DIR/<k>.bin (output k); with REPEAT, prints the median seconds of REPEAT runs.
 * Buffers are static: nothing is allocated. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"

#define ALIGNED __attribute__((aligned(64)))
static unsigned char workspace[MODEL_WORKSPACE_BYTES] ALIGNED;
static const unsigned long in_bytes[] = MODEL_INPUT_BYTES, out_bytes[] = MODEL_OUTPUT_BYTES;
static unsigned char buffers[MODEL_NUM_INPUTS + MODEL_NUM_OUTPUTS][1 << 21] ALIGNED;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(int argc, char** argv) {
    char path[4096];
    const void* inputs[MODEL_NUM_INPUTS];
    void* outputs[MODEL_NUM_OUTPUTS];
    double seconds[1000];
    int repeat = argc > 3 ? atoi(argv[3]) : 0;
    if (argc < 3 || repeat < 0 || repeat > 1000) return 2;
    for (int k = 0; k < MODEL_NUM_INPUTS; k++) {
        snprintf(path, sizeof path, "%s/%d.bin", argv[1], k);
        FILE* f = fopen(path, "rb");
        if (!f || in_bytes[k] > sizeof buffers[0] ||
            fread(buffers[k], 1, in_bytes[k], f) != in_bytes[k]) return 3;
        fclose(f);
        inputs[k] = buffers[k];
    }
    for (int k = 0; k < MODEL_NUM_OUTPUTS; k++) {
        if (out_bytes[k] > sizeof buffers[0]) return 4;
        outputs[k] = buffers[MODEL_NUM_INPUTS + k];
    }
    if (model_run(inputs, outputs, workspace, model_constants) != 0) return 5;
    for (int r = 0; r < repeat; r++) {
        double start = now();
        model_run(inputs, outputs, workspace, model_constants);
        seconds[r] = now() - start;
    }
    if (repeat > 0) {
        qsort(seconds, (size_t)repeat, sizeof seconds[0], by_value);
        printf("%.9f\n", seconds[repeat / 2]);
    }
    for (int k = 0; k < MODEL_NUM_OUTPUTS; k++) {
        snprintf(path, sizeof path, "%s/%d.bin", argv[2], k);
        FILE* f = fopen(path, "wb");
        if (!f || fwrite(outputs[k], 1, out_bytes[k], f) != out_bytes[k]) return 6;
        fclose(f);
    }
    return 0;
}
