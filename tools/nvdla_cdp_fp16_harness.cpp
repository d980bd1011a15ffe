// Drives NVIDIA's NVDLA cmod CDP in FP16 (nvdla/hw nvdlav1 @ 8e06b1b9): HLS_CDP_lookup_fp16 of
// cmod/hls_wrapper/cdp_hls_wrapper.cpp, compiled unchanged (built by
// tools/make_nvdla_cdp_fp16_vectors.py). No arithmetic of its own.
//
// Input (stdin, one case, whitespace-separated integers):
//   CFG  14 values: NORMALZ_LEN LUT_LE_FUNCTION UFLOW_PRIORITY OFLOW_PRIORITY HYBRID_PRIORITY
//        LE_INDEX_OFFSET LE_INDEX_SELECT LO_INDEX_SELECT (raw 8-bit fields)
//        LE_SLOPE_UFLOW_SCALE LE_SLOPE_OFLOW_SCALE LO_SLOPE_UFLOW_SCALE LO_SLOPE_OFLOW_SCALE
//        SQSUM_BYPASS MUL_BYPASS
//   SE   LE_START LE_END LO_START LO_END (the 38-bit register values as unsigned integers)
//   LE   65 fp16 words;  LO  257 fp16 words
//   X n  n = C + 8 fp16 words: one pixel's channels with their 4-channel halo on each side (the
//        cmod's window builder fills the halo: +0 in FP16), C a multiple of 4
// Output: for each group of 4 output channels, the window X[4g .. 4g+11] goes through one call
// of HLS_CDP_lookup_fp16, which prints "Y w0 w1 w2 w3" (fp16 words) and
// "CNT uflow oflow le_hit lo_hit hybrid" (that call's counters).
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "cdp_hls_wrapper.h"

static int expect(const char* key) {
  char buf[16];
  if (scanf("%15s", buf) != 1 || strcmp(buf, key) != 0) {
    fprintf(stderr, "expected %s\n", key);
    return 0;
  }
  return 1;
}

static int read_words(int16_t* dst, int n) {
  for (int i = 0; i < n; i++) {
    long v;
    if (scanf("%ld", &v) != 1) return 0;
    dst[i] = (int16_t)(uint16_t)v;
  }
  return 1;
}

int main() {
  long cfg[14];
  unsigned long long se[4];
  static int16_t le[65], lo[257], x[4096 + 8];
  int n = 0;
  if (!expect("CFG")) return 2;
  for (int i = 0; i < 14; i++) if (scanf("%ld", &cfg[i]) != 1) return 2;
  if (!expect("SE")) return 2;
  for (int i = 0; i < 4; i++) if (scanf("%llu", &se[i]) != 1) return 2;
  if (!expect("LE") || !read_words(le, 65) || !expect("LO") || !read_words(lo, 257)) return 2;
  if (!expect("X") || scanf("%d", &n) != 1 || n < 12 || n > 4096 + 8 || (n - 8) % 4 != 0) return 2;
  if (!read_words(x, n)) return 2;
  for (int g = 0; g + 12 <= n; g += 4) {
    int16_t window[12], out[4];
    uint32_t cnt[5] = {0, 0, 0, 0, 0};
    memcpy(window, x + g, sizeof window);
    // The register fields as the cmod's NV_NVDLA_cdp passes them (FP16: offset/scale/shifter
    // values are ignored by the FP16 path; the selects and the offset are 8-bit signed fields).
    HLS_CDP_lookup_fp16(window, le, lo, (uint16_t)cfg[0], (uint16_t)cfg[1], cfg[2] != 0,
                        cfg[3] != 0, cfg[4] != 0, (uint64_t)se[0], (int16_t)(int8_t)cfg[5],
                        (int8_t)cfg[6], (uint64_t)se[1], (uint64_t)se[2], (int8_t)cfg[7],
                        (uint64_t)se[3], 0, 0, 0, 0, 0, 0, (int16_t)cfg[8], (int16_t)cfg[9],
                        (int16_t)cfg[10], (int16_t)cfg[11], cfg[12] != 0, cfg[13] != 0, out,
                        &cnt[0], &cnt[1], &cnt[2], &cnt[3], &cnt[4]);
    printf("Y %u %u %u %u\n", (uint16_t)out[0], (uint16_t)out[1], (uint16_t)out[2],
           (uint16_t)out[3]);
    printf("CNT %u %u %u %u %u\n", cnt[0], cnt[1], cnt[2], cnt[3], cnt[4]);
  }
  return 0;
}
