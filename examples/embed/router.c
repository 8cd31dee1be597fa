/* Answer cases with an exported TensorCode library, from C.
 *
 * Built by run.sh against one export (lib<name>.so and <name>.h): TC_NAME is the
 * library's name, TC_UPPER the same in capitals and TC_HEADER its header. Reads one case
 * per line from standard input (the numbers of the flattened inputs, in the order the
 * header lists them, separated by spaces) and prints one line per case: the outputs'
 * numbers in the header's order (%.17g, so a double prints exactly), then, for a router,
 * the covered flag (1: the program's answer; 0: call your fallback for this case).
 * Exit status: 0, or 1 when a line could not be read or a call was refused.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include TC_HEADER

#define JOIN2(a, b) a##b
#define JOIN(a, b) JOIN2(a, b)
#define CALL(f) JOIN(TC_NAME, f)
#define CONSTANT(c) JOIN(TC_UPPER, c)

static int read_number(char **cursor, int32_t dtype, void *out, int64_t k) {
    char *end;
    errno = 0;
    if (dtype == CONSTANT(_FLOAT64) || dtype == CONSTANT(_FLOAT32)) {
        double value = strtod(*cursor, &end);
        if (end == *cursor || errno == ERANGE) return 0;
        if (dtype == CONSTANT(_FLOAT64)) ((double *)out)[k] = value;
        else ((float *)out)[k] = (float)value;
    } else {
        long long value = strtoll(*cursor, &end, 10);
        if (end == *cursor || errno == ERANGE) return 0;
        if (dtype == CONSTANT(_INT64)) ((int64_t *)out)[k] = value;
        else ((int32_t *)out)[k] = (int32_t)value;
    }
    *cursor = end;
    return 1;
}

static void print_number(int32_t dtype, const void *values, int64_t k, int first) {
    if (!first) putchar(' ');
    if (dtype == CONSTANT(_FLOAT64)) printf("%.17g", ((const double *)values)[k]);
    else if (dtype == CONSTANT(_FLOAT32)) printf("%.9g", (double)((const float *)values)[k]);
    else if (dtype == CONSTANT(_INT64)) printf("%lld", (long long)((const int64_t *)values)[k]);
    else printf("%ld", (long)((const int32_t *)values)[k]);
}

static size_t width(int32_t dtype) {
    return dtype == CONSTANT(_FLOAT64) || dtype == CONSTANT(_INT64) ? 8 : 4;
}

int main(void) {
    JOIN(TC_NAME, _handle) *h = NULL;
    int status = CALL(_open)(&h);
    if (status != CONSTANT(_OK)) {
        fprintf(stderr, "open: %s\n", CALL(_message)(h, status));
        return 1;
    }
    int64_t inputs = CALL(_input_count)(), outputs = CALL(_output_count)();
    void **in = calloc((size_t)inputs + 1, sizeof *in);
    void **out = calloc((size_t)outputs + 1, sizeof *out);
    for (int64_t k = 0; k < inputs; k++)
        in[k] = calloc((size_t)CALL(_input_size)(k) + 1, width(CALL(_input_dtype)(k)));
    for (int64_t k = 0; k < outputs; k++)
        out[k] = calloc((size_t)CALL(_output_size)(k) + 1, width(CALL(_output_dtype)(k)));
    size_t room = 1 << 16;
    char *line = malloc(room);
    int failed = 0;
    while (fgets(line, (int)room, stdin)) {
        char *cursor = line;
        int ok = 1;
        for (int64_t k = 0; ok && k < inputs; k++)
            for (int64_t i = 0; ok && i < CALL(_input_size)(k); i++)
                ok = read_number(&cursor, CALL(_input_dtype)(k), in[k], i);
        if (!ok) {
            fprintf(stderr, "a line does not hold the inputs' numbers\n");
            failed = 1;
            continue;
        }
        int32_t covered = 0;
        status = CALL(_run)(h, (const void *const *)in, out, &covered);
        if (status != CONSTANT(_OK)) {
            fprintf(stderr, "refused: %s\n", CALL(_message)(h, status));
            failed = 1;
            continue;
        }
        int first = 1;
        for (int64_t k = 0; k < outputs; k++)
            for (int64_t i = 0; i < CALL(_output_size)(k); i++, first = 0)
                print_number(CALL(_output_dtype)(k), out[k], i, first);
        if (CONSTANT(_IS_ROUTER)) printf(" %d", (int)covered);
        putchar('\n');
    }
    CALL(_close)(h);
    return failed;
}
