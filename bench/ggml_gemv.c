/* ggml's GEMV (mul_mat with one activation column) on the CPU backend, for
 * bench/ggml_gemv_compare.sh: the same shapes, working set and timing rule as
 * `flexkern bench gemv`, so the two can be read side by side.
 *
 *   ggml_gemv FORMATS NS K THREADS REPS WS_MIB
 *     FORMATS  comma list: q4_0,q4_1,q8_0,q4_k,q6_k,f16,...
 *     NS       comma list of output sizes N
 *     WS_MIB   weight copies cycled through (defeats the cache), MiB
 *
 * For each format two layouts are timed: "plain" (the CPU buffer, ggml's vec_dot path)
 * and "repack" (the CPU_REPACK extra buffer llama.cpp puts weights in by default when
 * the format has an interleaved kernel for this CPU, e.g. Q4_0 8x8 on AVX2; "-" when none).
 * Output, one line per case: format,N,K,layout,median_ms,GB/s (weight bytes / time). */
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static enum ggml_type parse_type(const char *s) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *n = ggml_type_name((enum ggml_type)t);
        if (n && strcmp(n, s) == 0) return (enum ggml_type)t;
    }
    fprintf(stderr, "unknown format %s\n", s);
    exit(2);
}

/* xorshift uniform in [-1, 1) */
static unsigned long long rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1ull << 24))) * 2.0f - 1.0f;
}

/* One case: `copies` weight matrices [N, K] in buffers of `buft`, timed mul_mat. */
static void run_case(enum ggml_type type, int n, int k, int threads, int reps, size_t ws,
                     ggml_backend_buffer_type_t buft, const char *layout) {
    size_t wbytes = ggml_row_size(type, k) * (size_t)n;
    int copies = ws / wbytes;
    if (copies < 1) copies = 1;
    if (copies > 64) copies = 64;

    struct ggml_init_params ip = { ggml_tensor_overhead() * (3 * copies + 8) + ggml_graph_overhead() * copies, NULL, true };
    struct ggml_context *wctx = ggml_init(ip);
    struct ggml_context *xctx = ggml_init(ip);
    struct ggml_tensor **w = malloc(sizeof(*w) * copies);
    for (int c = 0; c < copies; c++) w[c] = ggml_new_tensor_2d(wctx, type, k, n);
    struct ggml_tensor *x = ggml_new_tensor_2d(xctx, GGML_TYPE_F32, k, 1);
    struct ggml_tensor **y = malloc(sizeof(*y) * copies);
    struct ggml_cgraph **g = malloc(sizeof(*g) * copies);
    for (int c = 0; c < copies; c++) {
        y[c] = ggml_mul_mat(xctx, w[c], x);
        g[c] = ggml_new_graph(xctx);
        ggml_build_forward_expand(g[c], y[c]);
    }
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    ggml_backend_buffer_t xbuf = ggml_backend_alloc_ctx_tensors_from_buft(xctx, ggml_backend_cpu_buffer_type());
    if (!wbuf || !xbuf) { fprintf(stderr, "allocation failed\n"); exit(1); }
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    /* Random weights quantized once by ggml's own quantizer, copied into every copy
     * (set_tensor repacks for the repack buffer). */
    float *wf = malloc(sizeof(float) * (size_t)n * k);
    for (size_t i = 0; i < (size_t)n * k; i++) wf[i] = frand();
    void *q = malloc(wbytes);
    ggml_quantize_chunk(type, wf, q, 0, n, k, NULL);
    for (int c = 0; c < copies; c++) ggml_backend_tensor_set(w[c], q, 0, wbytes);
    float *xf = malloc(sizeof(float) * k);
    for (int i = 0; i < k; i++) xf[i] = frand();
    ggml_backend_tensor_set(x, xf, 0, sizeof(float) * k);

    /* One persistent thread pool, as a llama.cpp context keeps (a fresh pool per call would
     * time thread start-up). */
    ggml_backend_t be = ggml_backend_cpu_init();
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    struct ggml_threadpool *tp = ggml_threadpool_new(&tpp);
    ggml_backend_cpu_set_n_threads(be, threads);
    ggml_backend_cpu_set_threadpool(be, tp);
    for (int c = 0; c < copies; c++) ggml_backend_graph_compute(be, g[c]); /* warm-up */
    double *t = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        ggml_backend_graph_compute(be, g[r % copies]);
        t[r] = now() - t0;
    }
    qsort(t, reps, sizeof(double), cmp);
    double med = t[reps / 2];
    printf("%s,%d,%d,%s,%.4f,%.2f\n", ggml_type_name(type), n, k, layout, med * 1e3,
           wbytes / med / 1e9);
    fflush(stdout);

    ggml_backend_free(be);
    ggml_threadpool_free(tp);
    ggml_backend_buffer_free(wbuf);
    ggml_backend_buffer_free(xbuf);
    ggml_free(wctx);
    ggml_free(xctx);
    free(w); free(y); free(g); free(wf); free(q); free(xf); free(t);
}

/* The CPU_REPACK buffer type, or NULL when this build/CPU has none. */
static ggml_backend_buffer_type_t repack_buft(void) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    typedef ggml_backend_buffer_type_t *(*get_t)(ggml_backend_dev_t);
    get_t get = (get_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    if (!get) return NULL;
    for (ggml_backend_buffer_type_t *b = get(dev); b && *b; b++) {
        if (strstr(ggml_backend_buft_name(*b), "REPACK")) return *b;
    }
    return NULL;
}

/* Whether the repack buffer holds this type in its interleaved layout (its tensors then carry
 * repack traits; otherwise the buffer is plain CPU memory). */
static int repacks(ggml_backend_buffer_type_t buft, enum ggml_type type, int n, int k) {
    struct ggml_init_params ip = { ggml_tensor_overhead() * 2, NULL, true };
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, type, k, n);
    ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    int ok = b && w->extra != NULL;
    if (b) ggml_backend_buffer_free(b);
    ggml_free(ctx);
    return ok;
}

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)level; (void)text; (void)data;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s FORMATS NS K THREADS REPS WS_MIB\n", argv[0]);
        return 2;
    }
    int k = atoi(argv[3]), threads = atoi(argv[4]), reps = atoi(argv[5]);
    size_t ws = (size_t)atoi(argv[6]) << 20;
    ggml_log_set(quiet, NULL);
    ggml_cpu_init();
    ggml_backend_buffer_type_t rb = repack_buft();
    printf("format,N,K,layout,median_ms,GB/s\n");
    char *fmts = strdup(argv[1]);
    for (char *f = strtok(fmts, ","); f; f = strtok(NULL, ",")) {
        enum ggml_type type = parse_type(f);
        char *ns = strdup(argv[2]), *save = NULL;
        for (char *s = strtok_r(ns, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
            int n = atoi(s);
            run_case(type, n, k, threads, reps, ws, ggml_backend_cpu_buffer_type(), "plain");
            if (rb && repacks(rb, type, n, k))
                run_case(type, n, k, threads, reps, ws, rb, "repack");
            else
                printf("%s,%d,%d,repack,-,-\n", ggml_type_name(type), n, k);
        }
        free(ns);
    }
    free(fmts);
    return 0;
}
