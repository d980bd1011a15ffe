// A driver around NVIDIA's NVDLA cmod FP16 MAC cell (CMAC) and FP16 accumulator (CACC).
//
// nvdla/hw, branch nvdlav1, commit 8e06b1b9d85aab65b40d43d08eec5ea4681ff715. Build it through
// tools/make_nvdla_conv_fp16_vectors.py, which extracts, verbatim, at that commit:
//   cmac_defs.inc  lines 30-51 of cmod/cmac/NV_NVDLA_cmac.h   (operand widths, PARALLEL_CHANNEL_NUM)
//   cmac_cell.inc  lines 66-854 of cmod/cmac/NV_NVDLA_cmac.h  (class NvdlaMacCell: calculation_fp16,
//                  cal_fp16_nan, cal_fp16_exp, cal_fp16_booth, cal_fp16_mul)
//   cacc_defs.inc  lines 29-42 of cmod/cacc/NV_NVDLA_cacc.h   (FP16_ALEN 48, ELEN 8, MLEN 40)
//   cacc_fp.inc    lines 1242-1627 of cmod/cacc/NV_NVDLA_cacc.cpp (cacc_fp16_add, cacc_fp48_to_fp32)
// and compiles this file against SystemC (sc_int/sc_uint; Debian's libsystemc-dev 2.3.4), the
// cmod's cmod/include/arnvdla.h and a stub log.h whose debug macros expand to nothing.
// cacc_fp16_add and cacc_fp48_to_fp32 are members of the SystemC module NV_NVDLA_cacc that use no
// member state; they are compiled as members of the stand-in struct below. Their double-precision
// self-check calls exit(-1); here it sets a flag that is printed instead.
//
// No arithmetic of its own: it packs the fp16 words into the cell's sc_int<8> byte operands, builds
// the zero-channel masks as CSC does (cmod/csc/NV_NVDLA_csc.cpp 908-917 and 1454-1465: a channel
// takes part if its word is neither 0x0000 nor 0x8000), runs one atomic op per line and accumulates
// as CACC does for direct convolution: acc = add(0, first), then acc = add(acc, next).
//
// Input (text, whitespace-separated decimal integers on stdin): N, then for each of N outputs: T,
// then T atomic ops of 128 fp16 words each (64 data words, then 64 weight words, channel order).
// Output: per output a line "Y <fp32 word> <self-check failed 0/1>".
#include <systemc.h>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <stdint.h>
#include "log.h"
#include "arnvdla.h"
using namespace std;
#include "cmac_defs.inc"
#include "cmac_cell.inc"
#include "cacc_defs.inc"
#define FP16DEBUG_DETAIL 0
struct NV_NVDLA_cacc {
  void cacc_fp16_add(sc_uint<FP16_ALEN> *fp16_accu_data, sc_uint<44> fp16_mac_data);
  void cacc_fp48_to_fp32(sc_int<32> *fp32_to_sdp, sc_uint<FP16_ALEN> fp16_accu_data);
};
static int g_checker_fail = 0;
#define exit(x) (g_checker_fail = 1)
#include "cacc_fp.inc"
#undef exit

static sc_uint<44> atomic_op(NvdlaMacCell &cell, const unsigned *dat, const unsigned *wt) {
  sc_int<8> d[128], w[128];
  sc_int<22> res[8];
  uint64_t dmask[2] = {0, 0}, wmask[2] = {0, 0};
  for (int c = 0; c < 64; ++c) {
    d[2 * c] = (int)(int8_t)(dat[c] & 0xff); d[2 * c + 1] = (int)(int8_t)(dat[c] >> 8);
    w[2 * c] = (int)(int8_t)(wt[c] & 0xff);  w[2 * c + 1] = (int)(int8_t)(wt[c] >> 8);
  }
  for (int idx = 63; idx >= 0; --idx) {
    uint64_t bd = ((dat[idx] != 0) && (dat[idx] != 0x8000)) ? 3 : 0;
    uint64_t bw = ((wt[idx] != 0) && (wt[idx] != 0x8000)) ? 3 : 0;
    if (idx < 32) { dmask[1] = (dmask[1] << 2) | bd; wmask[1] = (wmask[1] << 2) | bw; }
    else          { dmask[0] = (dmask[0] << 2) | bd; wmask[0] = (wmask[0] << 2) | bw; }
  }
  cell.mac_cell_enable_ = true;
  cell.winograd_op_ = false;
  cell.calculation_fp16(wmask, dmask, d, w, res);
  return (res[1], res[0]);
}

int main() {
  NvdlaMacCell cell;
  NV_NVDLA_cacc cacc;
  long n;
  if (scanf("%ld", &n) != 1) return 2;
  for (long o = 0; o < n; ++o) {
    long t;
    if (scanf("%ld", &t) != 1 || t < 1) return 2;
    sc_uint<FP16_ALEN> acc = 0;
    g_checker_fail = 0;
    for (long k = 0; k < t; ++k) {
      unsigned words[128];
      for (int i = 0; i < 128; ++i)
        if (scanf("%u", &words[i]) != 1) return 2;
      sc_uint<44> mac = atomic_op(cell, words, words + 64);
      cacc.cacc_fp16_add(&acc, mac);
    }
    sc_int<32> out;
    cacc.cacc_fp48_to_fp32(&out, acc);
    printf("Y %u %d\n", (unsigned)out.to_int(), g_checker_fail);
  }
  return 0;
}
int sc_main(int, char **) { return 0; }  // libsystemc references it; never called
