/* One int8 matmul, gemm_s8s8s32 call or convolution through oneDNN 3.2's C API, for
 * tools/onednn32_drift.py: reads raw inputs from DIR, writes the raw output to DIR/dst.bin and
 * prints "impl <name>" (the implementation the primitive descriptor picked).
 *
 *   onednn32_drift matmul DIR M K N SRC_DT ZP WSCALE_MASK
 *       DIR/src.bin: A (M,K) u8|s8 row-major; DIR/wei.bin: B (K,N) s8 row-major.
 *       dnnl_matmul, weights in the primitive's preferred layout (format any + reorder), f32
 *       dst (M,N); source zero point ZP as a runtime attribute when ZP != 0; unit weight scales
 *       with mask WSCALE_MASK when it is >= 0 (what PyTorch's qlinear_pointwise sets: 0 for one
 *       scale, 2 for one per output column), none when it is -1. dst.bin: f32 (M,N).
 *   onednn32_drift gemm DIR M K N
 *       dnnl_gemm_s8s8s32('N', 'N', 'F', M, N, K, 1, A, K, 0, B, N, 0, 0, C, N, {0}): the call
 *       torch._int_mm makes for contiguous s8 tensors. dst.bin: s32 (M,N). impl: "gemm_api".
 *   onednn32_drift conv DIR N C H W O KH KW G SH SW PT PL PB PR DH DW SRC_DT ZP
 *       DIR/src.bin: x in nhwc, u8|s8; DIR/wei.bin: w (O, C/G, KH, KW) s8 (goihw when G > 1).
 *       dnnl convolution_forward (direct, forward inference), nhwc src/dst, weights format any
 *       + reorder, no bias, f32 dst; DH/DW in PyTorch's convention (1 = dense); source zero
 *       point ZP as a runtime attribute when ZP != 0. dst.bin: f32 nhwc (N, OH, OW, O).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oneapi/dnnl/dnnl.h"

#define CHECK(f) do { dnnl_status_t s_ = (f); if (s_ != dnnl_success) { \
    fprintf(stderr, "oneDNN error %d at %s:%d: %s\n", (int)s_, __FILE__, __LINE__, #f); exit(2); } } while (0)

static void *slurp(const char *dir, const char *name, size_t bytes) {
    char path[4096]; snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb"); if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(3); }
    void *p = malloc(bytes ? bytes : 1);
    if (fread(p, 1, bytes, f) != bytes) { fprintf(stderr, "short %s\n", path); exit(3); }
    fclose(f); return p;
}
static void spill(const char *dir, const char *name, const void *p, size_t bytes) {
    char path[4096]; snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb"); if (!f) { fprintf(stderr, "cannot write %s\n", path); exit(3); }
    fwrite(p, 1, bytes, f); fclose(f);
}
static dnnl_memory_desc_t md(int nd, const dnnl_dim_t *dims, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t m; CHECK(dnnl_memory_desc_create_with_tag(&m, nd, dims, dt, tag)); return m;
}
static dnnl_data_type_t src_type(const char *name) {
    if (!strcmp(name, "u8")) return dnnl_u8;
    if (!strcmp(name, "s8")) return dnnl_s8;
    fprintf(stderr, "unknown source type %s\n", name); exit(1);
}

/* Weights from the user's plain s8 layout into the layout the primitive wants. */
static dnnl_memory_t weights(dnnl_engine_t eng, dnnl_stream_t st, dnnl_primitive_desc_t pd,
        dnnl_memory_desc_t user_md, void *user) {
    const_dnnl_memory_desc_t want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_t umem, wmem;
    CHECK(dnnl_memory_create(&umem, user_md, eng, user));
    CHECK(dnnl_memory_create(&wmem, want, eng, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t rpd;
    CHECK(dnnl_reorder_primitive_desc_create(&rpd, user_md, eng, want, eng, NULL));
    dnnl_primitive_t r; CHECK(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, umem}, {DNNL_ARG_TO, wmem}};
    CHECK(dnnl_primitive_execute(r, st, 2, a)); CHECK(dnnl_stream_wait(st));
    return wmem;
}

/* Run pd with src, weights (already reordered), f32 dst and the optional zero point / scales. */
static void run(dnnl_engine_t eng, dnnl_stream_t st, dnnl_primitive_desc_t pd, void *src,
        dnnl_memory_t wmem, void *dst, int32_t *zp, float *wscales) {
    dnnl_memory_t m_src, m_dst, m_zp, m_ws, m_scr;
    CHECK(dnnl_memory_create(&m_src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), eng, src));
    CHECK(dnnl_memory_create(&m_dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), eng, dst));
    const_dnnl_memory_desc_t scr_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    CHECK(dnnl_memory_create(&m_scr, scr_md, eng, DNNL_MEMORY_ALLOCATE));
    dnnl_exec_arg_t args[6]; int n = 0;
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m_src};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, wmem};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, m_dst};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m_scr};
    if (zp) {
        dnnl_dim_t one = 1;
        CHECK(dnnl_memory_create(&m_zp, md(1, &one, dnnl_s32, dnnl_a), eng, zp));
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, m_zp};
    }
    if (wscales) {
        dnnl_dim_t count = (dnnl_dim_t)wscales[0];
        CHECK(dnnl_memory_create(&m_ws, md(1, &count, dnnl_f32, dnnl_a), eng, wscales + 1));
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, m_ws};
    }
    dnnl_primitive_t prim; CHECK(dnnl_primitive_create(&prim, pd));
    CHECK(dnnl_primitive_execute(prim, st, n, args)); CHECK(dnnl_stream_wait(st));
}

static void print_impl(dnnl_primitive_desc_t pd) {
    const char *impl; CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    printf("impl %s\n", impl); fflush(stdout);
}

static int do_gemm(const char *dir, dnnl_dim_t M, dnnl_dim_t K, dnnl_dim_t N) {
    int8_t *a = slurp(dir, "src.bin", (size_t)(M * K)), *b = slurp(dir, "wei.bin", (size_t)(K * N));
    int32_t *c = calloc((size_t)(M * N), sizeof(int32_t)), co = 0;
    printf("impl gemm_api\n"); fflush(stdout);
    CHECK(dnnl_gemm_s8s8s32('N', 'N', 'F', M, N, K, 1.0f, a, K, 0, b, N, 0, 0.0f, c, N, &co));
    spill(dir, "dst.bin", c, sizeof(int32_t) * (size_t)(M * N));
    return 0;
}

static int do_matmul(dnnl_engine_t eng, dnnl_stream_t st, const char *dir, dnnl_dim_t M,
        dnnl_dim_t K, dnnl_dim_t N, dnnl_data_type_t sdt, int32_t zp, int wmask) {
    dnnl_dim_t d_src[2] = {M, K}, d_wei[2] = {K, N}, d_dst[2] = {M, N};
    dnnl_memory_desc_t src_md = md(2, d_src, sdt, dnnl_ab), wany = md(2, d_wei, dnnl_s8, dnnl_format_tag_any),
        wuser = md(2, d_wei, dnnl_s8, dnnl_ab), dst_md = md(2, d_dst, dnnl_f32, dnnl_ab);
    dnnl_primitive_attr_t attr; CHECK(dnnl_primitive_attr_create(&attr));
    if (zp) CHECK(dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_SRC, 0));
    float *wscales = NULL;
    if (wmask >= 0) {
        CHECK(dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_WEIGHTS, wmask));
        dnnl_dim_t count = wmask ? N : 1;
        wscales = malloc(sizeof(float) * (size_t)(count + 1));
        wscales[0] = (float)count;
        for (dnnl_dim_t i = 1; i <= count; i++) wscales[i] = 1.0f;
    }
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_matmul_primitive_desc_create(&pd, eng, src_md, wany, NULL, dst_md, attr));
    print_impl(pd);
    void *src = slurp(dir, "src.bin", (size_t)(M * K)), *wei = slurp(dir, "wei.bin", (size_t)(K * N));
    dnnl_memory_t wmem = weights(eng, st, pd, wuser, wei);
    float *dst = calloc((size_t)(M * N), sizeof(float));
    run(eng, st, pd, src, wmem, dst, zp ? &zp : NULL, wscales);
    spill(dir, "dst.bin", dst, sizeof(float) * (size_t)(M * N));
    return 0;
}

static int do_conv(dnnl_engine_t eng, dnnl_stream_t st, const char *dir, char **v) {
    dnnl_dim_t N = atol(v[0]), C = atol(v[1]), H = atol(v[2]), W = atol(v[3]), O = atol(v[4]),
        KH = atol(v[5]), KW = atol(v[6]), G = atol(v[7]), SH = atol(v[8]), SW = atol(v[9]),
        PT = atol(v[10]), PL = atol(v[11]), PB = atol(v[12]), PR = atol(v[13]), DH = atol(v[14]),
        DW = atol(v[15]);
    dnnl_data_type_t sdt = src_type(v[16]);
    int32_t zp = atoi(v[17]);
    dnnl_dim_t OH = (H + PT + PB - ((KH - 1) * DH + 1)) / SH + 1;
    dnnl_dim_t OW = (W + PL + PR - ((KW - 1) * DW + 1)) / SW + 1;
    dnnl_dim_t d_src[4] = {N, C, H, W}, d_dst[4] = {N, O, OH, OW};
    dnnl_dim_t d_w4[4] = {O, C, KH, KW}, d_w5[5] = {G, O / G, C / G, KH, KW};
    int grouped = G > 1;
    dnnl_memory_desc_t src_md = md(4, d_src, sdt, dnnl_nhwc), dst_md = md(4, d_dst, dnnl_f32, dnnl_nhwc),
        wany = grouped ? md(5, d_w5, dnnl_s8, dnnl_format_tag_any) : md(4, d_w4, dnnl_s8, dnnl_format_tag_any),
        wuser = grouped ? md(5, d_w5, dnnl_s8, dnnl_goihw) : md(4, d_w4, dnnl_s8, dnnl_oihw);
    dnnl_dims_t strides = {SH, SW}, dilates = {DH - 1, DW - 1}, pl = {PT, PL}, pr = {PB, PR};
    dnnl_primitive_attr_t attr; CHECK(dnnl_primitive_attr_create(&attr));
    if (zp) CHECK(dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_SRC, 0));
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_convolution_forward_primitive_desc_create(&pd, eng, dnnl_forward_inference,
        dnnl_convolution_direct, src_md, wany, NULL, dst_md, strides, dilates, pl, pr, attr));
    print_impl(pd);
    size_t n_src = (size_t)(N * C * H * W), n_wei = (size_t)(O * (C / G) * KH * KW), n_dst = (size_t)(N * O * OH * OW);
    void *src = slurp(dir, "src.bin", n_src), *wei = slurp(dir, "wei.bin", n_wei);
    dnnl_memory_t wmem = weights(eng, st, pd, wuser, wei);
    float *dst = calloc(n_dst, sizeof(float));
    run(eng, st, pd, src, wmem, dst, zp ? &zp : NULL, NULL);
    spill(dir, "dst.bin", dst, sizeof(float) * n_dst);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 6 && !strcmp(argv[1], "gemm"))
        return do_gemm(argv[2], atol(argv[3]), atol(argv[4]), atol(argv[5]));
    dnnl_engine_t eng; CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    dnnl_stream_t st; CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
    if (argc == 9 && !strcmp(argv[1], "matmul"))
        return do_matmul(eng, st, argv[2], atol(argv[3]), atol(argv[4]), atol(argv[5]),
            src_type(argv[6]), atoi(argv[7]), atoi(argv[8]));
    if (argc == 21 && !strcmp(argv[1], "conv")) return do_conv(eng, st, argv[2], argv + 3);
    fprintf(stderr, "usage: onednn32_drift matmul DIR M K N u8|s8 ZP WSCALE_MASK\n"
                    "       onednn32_drift gemm DIR M K N\n"
                    "       onednn32_drift conv DIR N C H W O KH KW G SH SW PT PL PB PR DH DW u8|s8 ZP\n");
    return 1;
}
