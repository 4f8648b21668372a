/* llama.cpp side of bench/perplexity_compare.sh, written against llama.h only: perplexity as
 * llama.cpp's llama-perplexity defines it (the tool itself needs the `common` library, which
 * this build leaves out).
 *
 *   llamacpp_perplexity MODEL THREADS TEXTFILE CTX [CHUNKS]  -> one JSON line
 *
 * The text is tokenized with the model's special prefix (no special-token parsing); windows of
 * CTX tokens, non-overlapping, each from an empty KV cache with its first token replaced by BOS
 * when the model adds one; the logits at positions CTX/2 .. CTX-2 are scored against the next
 * token; PPL = exp(mean NLL) +/- PPL * sqrt(var / (n - 1)). */
#include "llama.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)level; (void)text; (void)data;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL THREADS TEXTFILE CTX [CHUNKS]\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int threads = atoi(argv[2]), n_ctx = atoi(argv[4]);
    FILE *f = fopen(argv[3], "rb");
    if (!f) { perror(argv[3]); return 1; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(len + 1);
    if (fread(text, 1, len, f) != (size_t)len) { perror(argv[3]); return 1; }
    fclose(f);
    int cap = (int)len + 16;
    llama_token *tok = malloc(sizeof(llama_token) * cap);
    int n_tok = llama_tokenize(vocab, text, (int)len, tok, cap, 1, 0);
    if (n_tok < 2 * n_ctx) { fprintf(stderr, "%d tokens: need %d\n", n_tok, 2 * n_ctx); return 1; }
    int n_chunk = n_tok / n_ctx;
    if (argc > 5 && atoi(argv[5]) > 0 && atoi(argv[5]) < n_chunk) n_chunk = atoi(argv[5]);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = n_ctx < 512 ? n_ctx : 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
    int n_vocab = llama_vocab_n_tokens(vocab);
    int add_bos = llama_vocab_get_add_bos(vocab);
    struct llama_batch batch = llama_batch_init(n_ctx, 0, 1);
    double nll = 0, nll2 = 0;
    long count = 0;
    int first = n_ctx / 2;
    for (int c = 0; c < n_chunk; c++) {
        llama_memory_clear(llama_get_memory(ctx), 1);
        batch.n_tokens = n_ctx;
        for (int j = 0; j < n_ctx; j++) {
            batch.token[j] = (j == 0 && add_bos) ? llama_vocab_bos(vocab) : tok[c * n_ctx + j];
            batch.pos[j] = j;
            batch.n_seq_id[j] = 1;
            batch.seq_id[j][0] = 0;
            batch.logits[j] = j >= first;
        }
        if (llama_decode(ctx, batch)) { fprintf(stderr, "decode failed\n"); return 1; }
        for (int j = first; j < n_ctx - 1; j++) {
            const float *l = llama_get_logits_ith(ctx, j);
            float max = l[0];
            for (int v = 1; v < n_vocab; v++) if (l[v] > max) max = l[v];
            double sum = 0;
            for (int v = 0; v < n_vocab; v++) sum += exp((double)l[v] - max);
            double x = log(sum) + max - l[tok[c * n_ctx + j + 1]];
            nll += x;
            nll2 += x * x;
            count++;
        }
        fprintf(stderr, "[%d/%d] PPL %.4f\n", c + 1, n_chunk, exp(nll / count));
    }
    double mean = nll / count, var = nll2 / count - mean * mean, ppl = exp(mean);
    double err = var > 0 ? sqrt(var / (count - 1)) * ppl : 0;
    printf("{\"ppl\":%.6f,\"err\":%.6f,\"scored\":%ld,\"windows\":%d,\"tokens\":%d}\n", ppl, err, count,
           n_chunk, n_tok);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
