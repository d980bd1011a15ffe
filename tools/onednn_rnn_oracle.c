/* int8 LSTM/GRU forward inference through oneDNN's C API: reads raw inputs, writes raw outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oneapi/dnnl/dnnl.h"

#define CHECK(f) do { dnnl_status_t s_ = (f); if (s_ != dnnl_success) { \
    fprintf(stderr, "oneDNN error %d at %s:%d: %s\n", (int)s_, __FILE__, __LINE__, #f); exit(2); } } while (0)

static void *slurp(const char *dir, const char *name, size_t bytes) {
    char path[4096]; snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb"); if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(3); }
    void *p = malloc(bytes); if (fread(p, 1, bytes, f) != bytes) { fprintf(stderr, "short %s\n", path); exit(3); }
    fclose(f); return p;
}
static void spill(const char *dir, const char *name, const void *p, size_t bytes) {
    char path[4096]; snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb"); fwrite(p, 1, bytes, f); fclose(f);
}
static dnnl_memory_desc_t md(int nd, dnnl_dim_t *dims, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t m; CHECK(dnnl_memory_desc_create_with_tag(&m, nd, dims, dt, tag)); return m;
}

int main(int argc, char **argv) {
    if (argc != 13) { fprintf(stderr, "usage: cell dir T N C L D(1|2 concat|sum) dirname scale shift wmask_count\n"); return 1; }
    const char *cell = argv[1]; const char *dir = argv[2];
    dnnl_dim_t T = atol(argv[3]), N = atol(argv[4]), C = atol(argv[5]), L = atol(argv[6]);
    const char *direction = argv[7]; const char *io = argv[8];
    float scale = atof(argv[9]), shift = atof(argv[10]); int wcount = atoi(argv[11]); int wmask = atoi(argv[12]);
    int lstm = !strcmp(cell, "lstm"), lbr = !strcmp(cell, "lbr_gru");
    dnnl_dim_t G = lstm ? 4 : 3, GB = lbr ? 4 : G;
    dnnl_rnn_direction_t dirk = !strcmp(direction, "l2r") ? dnnl_unidirectional_left2right
        : !strcmp(direction, "r2l") ? dnnl_unidirectional_right2left
        : !strcmp(direction, "concat") ? dnnl_bidirectional_concat : dnnl_bidirectional_sum;
    dnnl_dim_t D = (dirk == dnnl_bidirectional_concat || dirk == dnnl_bidirectional_sum) ? 2 : 1;
    dnnl_dim_t DLC = dirk == dnnl_bidirectional_concat ? 2 * C : C;

    dnnl_engine_t eng; CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    dnnl_stream_t st; CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));

    dnnl_dim_t d_src[3] = {T, N, C}, d_iter[4] = {L, D, N, C}, d_w[5] = {L, D, C, G, C},
               d_b[4] = {L, D, GB, C}, d_dst[3] = {T, N, DLC};
    dnnl_memory_desc_t src_md = md(3, d_src, dnnl_u8, dnnl_tnc), iter_md = md(4, d_iter, dnnl_u8, dnnl_ldnc),
        iterc_md = md(4, d_iter, dnnl_f32, dnnl_ldnc), wany = md(5, d_w, dnnl_s8, dnnl_format_tag_any),
        wuser = md(5, d_w, dnnl_f32, dnnl_ldigo), b_md = md(4, d_b, dnnl_f32, dnnl_ldgo),
        dst_md = md(3, d_dst, dnnl_u8, dnnl_tnc), dsti_md = md(4, d_iter, dnnl_u8, dnnl_ldnc);

    float *wscales = slurp(dir, "wscales.bin", sizeof(float) * wcount);
    dnnl_primitive_attr_t attr; CHECK(dnnl_primitive_attr_create(&attr));
    CHECK(dnnl_primitive_attr_set_rnn_data_qparams(attr, scale, shift));
    CHECK(dnnl_primitive_attr_set_rnn_weights_qparams(attr, wcount, wmask, wscales));

    dnnl_primitive_desc_t pd;
    if (lstm)
        CHECK(dnnl_lstm_forward_primitive_desc_create(&pd, eng, dnnl_forward_inference, dirk, src_md,
            iter_md, iterc_md, wany, wany, NULL, NULL, b_md, dst_md, dsti_md, iterc_md, 0, attr));
    else if (lbr)
        CHECK(dnnl_lbr_gru_forward_primitive_desc_create(&pd, eng, dnnl_forward_inference, dirk, src_md,
            iter_md, wany, wany, b_md, dst_md, dsti_md, 0, attr));
    else
        CHECK(dnnl_gru_forward_primitive_desc_create(&pd, eng, dnnl_forward_inference, dirk, src_md,
            iter_md, wany, wany, b_md, dst_md, dsti_md, 0, attr));
    const char *impl; CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    printf("impl %s\n", impl);

    /* weights: f32 ldigo -> the primitive's s8 layout, quantized by the reorder with the same scales */
    dnnl_memory_t wmem[2];
    const char *wnames[2] = {"weights_layer.bin", "weights_iter.bin"};
    for (int k = 0; k < 2; k++) {
        const_dnnl_memory_desc_t want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, k);
        void *user = slurp(dir, wnames[k], dnnl_memory_desc_get_size(wuser));
        dnnl_memory_t umem; CHECK(dnnl_memory_create(&umem, wuser, eng, user));
        CHECK(dnnl_memory_create(&wmem[k], want, eng, DNNL_MEMORY_ALLOCATE));
        dnnl_primitive_attr_t rattr; CHECK(dnnl_primitive_attr_create(&rattr));
        CHECK(dnnl_primitive_attr_set_rnn_weights_qparams(rattr, wcount, wmask, wscales));
        CHECK(dnnl_primitive_attr_set_rnn_data_qparams(rattr, scale, shift));
        dnnl_primitive_desc_t rpd; CHECK(dnnl_reorder_primitive_desc_create(&rpd, wuser, eng, want, eng, rattr));
        dnnl_primitive_t r; CHECK(dnnl_primitive_create(&r, rpd));
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, umem}, {DNNL_ARG_TO, wmem[k]}};
        CHECK(dnnl_primitive_execute(r, st, 2, a)); CHECK(dnnl_stream_wait(st));
    }
    void *src = slurp(dir, "src_layer.bin", dnnl_memory_desc_get_size(src_md));
    void *siter = slurp(dir, "src_iter.bin", dnnl_memory_desc_get_size(iter_md));
    void *siterc = lstm ? slurp(dir, "src_iter_c.bin", dnnl_memory_desc_get_size(iterc_md)) : NULL;
    void *bias = slurp(dir, "bias.bin", dnnl_memory_desc_get_size(b_md));
    void *dst = calloc(1, dnnl_memory_desc_get_size(dst_md));
    void *diter = calloc(1, dnnl_memory_desc_get_size(dsti_md));
    void *diterc = calloc(1, dnnl_memory_desc_get_size(iterc_md));
    dnnl_memory_t m_src, m_iter, m_iterc, m_b, m_dst, m_diter, m_diterc, m_scr;
    CHECK(dnnl_memory_create(&m_src, src_md, eng, src));
    CHECK(dnnl_memory_create(&m_iter, iter_md, eng, siter));
    CHECK(dnnl_memory_create(&m_b, b_md, eng, bias));
    CHECK(dnnl_memory_create(&m_dst, dst_md, eng, dst));
    CHECK(dnnl_memory_create(&m_diter, dsti_md, eng, diter));
    const_dnnl_memory_desc_t scr_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    CHECK(dnnl_memory_create(&m_scr, scr_md, eng, DNNL_MEMORY_ALLOCATE));
    dnnl_exec_arg_t args[12]; int n = 0;
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_LAYER, m_src};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_ITER, m_iter};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS_LAYER, wmem[0]};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS_ITER, wmem[1]};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m_b};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST_LAYER, m_dst};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST_ITER, m_diter};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m_scr};
    if (lstm) {
        CHECK(dnnl_memory_create(&m_iterc, iterc_md, eng, siterc));
        CHECK(dnnl_memory_create(&m_diterc, iterc_md, eng, diterc));
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_ITER_C, m_iterc};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST_ITER_C, m_diterc};
    }
    dnnl_primitive_t prim; CHECK(dnnl_primitive_create(&prim, pd));
    CHECK(dnnl_primitive_execute(prim, st, n, args)); CHECK(dnnl_stream_wait(st));
    spill(dir, "dst_layer.bin", dst, dnnl_memory_desc_get_size(dst_md));
    spill(dir, "dst_iter.bin", diter, dnnl_memory_desc_get_size(dsti_md));
    if (lstm) spill(dir, "dst_iter_c.bin", diterc, dnnl_memory_desc_get_size(iterc_md));
    (void)io;
    return 0;
}
