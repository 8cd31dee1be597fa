/* Time an exported TensorCode library from C (suite_aot.py builds and runs this).
 *
 *   aot_bench LIBRARY NAME ROUNDS < cases   (cases: float64 inputs, one case a line)
 *
 * Prints one JSON line: open_first_us (dlopen, symbol lookup, a handle and the first
 * answer, from a cold start of this process's use of the library), call_ns (the median
 * over ROUNDS passes of one <name>_run per case, per call) and batch_cases_per_s (the
 * median over ROUNDS of one <name>_batch over every case).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*open_fn)(void **);
typedef int (*run_fn)(void *, const void *const *, void *const *, int32_t *);
typedef int (*batch_fn)(void *, int64_t, const void *const *, void *const *, int32_t *);
typedef int64_t (*size_fn)(int64_t);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *symbol(void *library, const char *name, const char *suffix) {
    char text[256];
    snprintf(text, sizeof text, "%s_%s", name, suffix);
    void *found = dlsym(library, text);
    if (!found) { fprintf(stderr, "missing %s\n", text); exit(1); }
    return found;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: aot_bench LIBRARY NAME ROUNDS < cases\n"); return 2; }
    const char *name = argv[2];
    int rounds = atoi(argv[3]);
    /* the cases, read before any timing */
    size_t count = 0, room = 1024, filled = 0;
    double *values = malloc(room * sizeof *values);
    double value;
    while (scanf("%lf", &value) == 1) {
        if (filled == room) values = realloc(values, (room *= 2) * sizeof *values);
        values[filled++] = value;
    }
    double start = now();
    void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!library) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    open_fn open_handle = (open_fn)symbol(library, name, "open");
    run_fn run = (run_fn)symbol(library, name, "run");
    batch_fn batch = (batch_fn)symbol(library, name, "batch");
    size_fn input_size = (size_fn)symbol(library, name, "input_size");
    size_fn output_size = (size_fn)symbol(library, name, "output_size");
    int64_t (*outputs)(void) = (int64_t (*)(void))symbol(library, name, "output_count");
    void *handle;
    if (open_handle(&handle)) return 1;
    int64_t width = input_size(0), out_count = outputs();
    count = filled / (size_t)width;
    void *out_one[16], *out_all[16];
    for (int64_t k = 0; k < out_count && k < 16; k++) {
        out_one[k] = malloc(8 * (size_t)output_size(k));
        out_all[k] = malloc(8 * (size_t)output_size(k) * count);
    }
    int32_t *covered = malloc(sizeof *covered * count);
    const void *in[1] = {values};
    if (run(handle, in, out_one, covered)) return 1;
    double open_first = now() - start;
    double *samples = malloc(sizeof *samples * (size_t)rounds);
    for (int r = 0; r < rounds; r++) {
        double t = now();
        for (size_t c = 0; c < count; c++) {
            in[0] = values + c * (size_t)width;
            run(handle, in, out_one, covered);
        }
        samples[r] = (now() - t) / (double)count;
    }
    qsort(samples, (size_t)rounds, sizeof *samples, compare);
    double call = samples[rounds / 2];
    in[0] = values;
    for (int r = 0; r < rounds; r++) {
        double t = now();
        if (batch(handle, (int64_t)count, in, out_all, covered)) return 1;
        samples[r] = now() - t;
    }
    qsort(samples, (size_t)rounds, sizeof *samples, compare);
    printf("{\"open_first_us\": %.3f, \"call_ns\": %.3f, \"batch_cases_per_s\": %.1f, "
           "\"cases\": %zu}\n", open_first * 1e6, call * 1e9, count / samples[rounds / 2], count);
    return 0;
}
