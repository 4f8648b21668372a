/* llama.cpp side of bench/llamacpp_compare.py, written against llama.h only.
 *
 *   llamacpp_probe MODEL THREADS tokenize TEXTFILE          -> ids as JSON
 *   llamacpp_probe MODEL THREADS run TEXTFILE N LOGITS.f32  -> prompt ids, N greedy ids and
 *       speeds as JSON; the prompt's last-position logits as raw little-endian f32.
 * Speeds come from llama.cpp's own counters (prefill = one batch of the whole prompt). */
#include "llama.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path, int *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n + 1);
    if (fread(buf, 1, n, f) != (size_t)n) { perror(path); exit(1); }
    buf[n] = 0;
    fclose(f);
    *len = (int)n;
    return buf;
}

static void print_ids(const char *key, const llama_token *ids, int n) {
    printf("\"%s\":[", key);
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    printf("]");
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)level; (void)text; (void)data;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL THREADS tokenize|run TEXTFILE [N LOGITS.f32]\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int threads = atoi(argv[2]);
    int len;
    char *text = slurp(argv[4], &len);
    int tokenize_only = strcmp(argv[3], "tokenize") == 0;
    /* Plain text for tokenization; the model's own BOS rule for runs, as flexkern does. */
    int add_special = tokenize_only ? 0 : 1;
    int cap = len + 16;
    llama_token *ids = malloc(sizeof(llama_token) * cap);
    int n = llama_tokenize(vocab, text, len, ids, cap, add_special, 0);
    if (n < 0) { fprintf(stderr, "tokenize failed\n"); return 1; }
    if (tokenize_only) {
        printf("{");
        print_ids("ids", ids, n);
        printf("}\n");
        return 0;
    }
    int n_gen = atoi(argv[5]);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.no_perf = 0;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    int n_vocab = llama_vocab_n_tokens(vocab);
    llama_perf_context_reset(ctx);
    if (llama_decode(ctx, llama_batch_get_one(ids, n))) { fprintf(stderr, "decode failed\n"); return 1; }
    float *logits = llama_get_logits_ith(ctx, -1);
    FILE *lf = fopen(argv[6], "wb");
    fwrite(logits, sizeof(float), n_vocab, lf);
    fclose(lf);
    llama_token *gen = malloc(sizeof(llama_token) * (n_gen + 1));
    for (int i = 0; i < n_gen; i++) {
        gen[i] = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        if (i + 1 < n_gen && llama_decode(ctx, llama_batch_get_one(&gen[i], 1))) return 1;
    }
    struct llama_perf_context_data p = llama_perf_context(ctx);
    printf("{");
    print_ids("prompt_ids", ids, n);
    printf(",");
    print_ids("ids", gen, n_gen);
    printf(",\"prefill_tokens\":%d,\"prefill_tok_s\":%.3f,\"decode_tokens\":%d,\"decode_tok_s\":%.3f}\n",
           p.n_p_eval, 1e3 * p.n_p_eval / p.t_p_eval_ms, p.n_eval, 1e3 * p.n_eval / p.t_eval_ms);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
