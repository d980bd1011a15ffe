// A driver around NVIDIA's NVDLA cmod SDP (sdp_hls_wrapper + the HLS cores) for one test case.
//
// nvdla/hw, branch nvdlav1, commit 8e06b1b9d85aab65b40d43d08eec5ea4681ff715. Build it through
// tools/make_nvdla_fp16_vectors.py, which extracts the cmod files at that commit, writes the
// generated include files named below and compiles this file together with, unchanged,
//   cmod/hls/sdp/sdp_x.cpp, sdp_y.cpp, sdp_y_core.cpp, sdp_y_cvt.cpp, sdp_y_idx.cpp,
//   sdp_y_inp.cpp, sdp_c.cpp and cmod/hls_wrapper/sdp_hls_wrapper.cpp
// (headers: cmod/hls/include/nvdla_float.h, nvdla_int.h, nvdla_common.h, ac_int.h, ac_fixed.h with
// its one ".template slc<" syntax patch, ac_channel.h; cmod/hls/sdp/sdp.h;
// cmod/hls_wrapper/sdp_hls_wrapper.h; cmod/include/arnvdla.h, arnvdla.uh) and a stub log.h whose
// debug macros expand to nothing.
//
// Generated include files (extracted verbatim from the commit by the Python tool):
//   sdp_reg_fields.inc       the "Register field variables" block of cmod/sdp/gen/sdp_reg_model.h
//   sdp_rdma_reg_fields.inc  the same block of cmod/sdp/gen/sdp_rdma_reg_model.h
//   sdp_config_hls_body.inc  lines 646-720 of cmod/sdp/NV_NVDLA_sdp.cpp: the body of
//                            NV_NVDLA_sdp::SdpConfigHls() (registers -> wrapper configuration)
//
// What this file does itself (no arithmetic of its own):
//   - parses one case (text, see below) into the register variables, the LUT tables and arrays;
//   - sets every PERF / NAN-INF count enable to 1, SDP_RDMA IN_PRECISION = PROC_PRECISION and
//     SDP_RDMA FLYING_MODE = SDP FLYING_MODE;
//   - runs SdpConfigHls(), reset_stats_regs(), write_lut() for every entry of both tables;
//   - per atom of 16 elements: the FLYING_MODE_OFF input handling of
//     NV_NVDLA_sdp::SdpDataOperationDC() (FP16: count input Inf/NaN words, then Fp16ToFp32;
//     otherwise sign-extend the int16 word) or, with FLYING_MODE_ON, the 32-bit CACC word as it
//     is (the cmod's memcpy); then sdp_hls_wrapper::sdp(); then SdpDataOperationDC()'s
//     compare-mode rule (EW ALU on with ALGO EQL: STATUS_UNEQUAL = 1 when an output word != 0);
//   - prints the output words and the counters.
//
// Input (text, whitespace-separated tokens, any order):
//   <FIELD> <value>     one of the 68 SDP register fields of the conformance attrs
//                       (e.g. BS_ALU_OPERAND 15360) or FLYING_MODE (0 OFF = X read from memory,
//                       1 ON = X from CACC); integers, decimal; missing fields are 0.
//   <ARRAY> <n> <v>*n   X (n = multiple of 16; fp16/int16 memory words with FLYING_MODE 0,
//                       32-bit words with FLYING_MODE 1), BS_ALU BS_MUL BN_ALU BN_MUL EW_ALU EW_MUL
//                       (16-bit words, n = len(X); absent = zeros), LUT_LE (65), LUT_LO (257)
//                       (16-bit words; absent = zeros).
//   Values may be given signed or as unsigned bit patterns; they are stored by C++ conversion into
//   the type the cmod uses for them.
// Output (stdout): "Y v0 v1 ..." (int16 output words, signed) and one "NAME value" line per
//   counter: OUT_SATURATION LUT_UFLOW LUT_OFLOW LUT_HYBRID LUT_LE_HIT LUT_LO_HIT STATUS_UNEQUAL
//   STATUS_NAN_INPUT_NUM STATUS_INF_INPUT_NUM STATUS_NAN_OUTPUT_NUM.
//
// Usage: nvdla_sdp_fp16_harness [case.txt]   (default: stdin). Exit 0 on success, 2 on bad input.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "arnvdla.uh"
#include "arnvdla.h"
#include "sdp_hls_wrapper.h"

namespace {

// The register variables of NV_NVDLA_sdp (its sdp_reg_model and sdp_rdma_reg_model bases), with
// their cmod types, and the configuration step, verbatim.
struct SdpModel {
#include "sdp_reg_fields.inc"
#include "sdp_rdma_reg_fields.inc"
  sdp_hls_wrapper sdp_hls_wrapper_;

  void SdpConfigHls() {
#include "sdp_config_hls_body.inc"
  }
};

SdpModel model;  // static storage: every register variable starts at 0

const char* const kArrays[] = {"X",      "BS_ALU", "BS_MUL", "BN_ALU", "BN_MUL",
                               "EW_ALU", "EW_MUL", "LUT_LE", "LUT_LO"};
const int kNumArrays = sizeof(kArrays) / sizeof(kArrays[0]);

void fail(const char* what, const char* detail) {
  fprintf(stderr, "nvdla_sdp_fp16_harness: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(2);
}

// Stores a register field: the value is converted to the field's cmod type.
bool set_field(SdpModel& m, const std::string& key, long long v) {
#define SDP_FIELD(NAME, var) \
  if (key == NAME) {         \
    m.var = v;               \
    return true;             \
  }
  SDP_FIELD("PROC_PRECISION", sdp_proc_precision_)
  SDP_FIELD("OUT_PRECISION", sdp_out_precision_)
  SDP_FIELD("NAN_TO_ZERO", sdp_nan_to_zero_)
  SDP_FIELD("FLYING_MODE", sdp_flying_mode_)
  SDP_FIELD("BS_BYPASS", sdp_bs_bypass_)
  SDP_FIELD("BS_ALU_BYPASS", sdp_bs_alu_bypass_)
  SDP_FIELD("BS_ALU_ALGO", sdp_bs_alu_algo_)
  SDP_FIELD("BS_ALU_SRC", sdp_bs_alu_src_)
  SDP_FIELD("BS_ALU_OPERAND", sdp_bs_alu_operand_)
  SDP_FIELD("BS_ALU_SHIFT_VALUE", sdp_bs_alu_shift_value_)
  SDP_FIELD("BS_MUL_BYPASS", sdp_bs_mul_bypass_)
  SDP_FIELD("BS_MUL_SRC", sdp_bs_mul_src_)
  SDP_FIELD("BS_MUL_OPERAND", sdp_bs_mul_operand_)
  SDP_FIELD("BS_MUL_PRELU", sdp_bs_mul_prelu_)
  SDP_FIELD("BS_MUL_SHIFT_VALUE", sdp_bs_mul_shift_value_)
  SDP_FIELD("BS_RELU_BYPASS", sdp_bs_relu_bypass_)
  SDP_FIELD("BN_BYPASS", sdp_bn_bypass_)
  SDP_FIELD("BN_ALU_BYPASS", sdp_bn_alu_bypass_)
  SDP_FIELD("BN_ALU_ALGO", sdp_bn_alu_algo_)
  SDP_FIELD("BN_ALU_SRC", sdp_bn_alu_src_)
  SDP_FIELD("BN_ALU_OPERAND", sdp_bn_alu_operand_)
  SDP_FIELD("BN_ALU_SHIFT_VALUE", sdp_bn_alu_shift_value_)
  SDP_FIELD("BN_MUL_BYPASS", sdp_bn_mul_bypass_)
  SDP_FIELD("BN_MUL_SRC", sdp_bn_mul_src_)
  SDP_FIELD("BN_MUL_OPERAND", sdp_bn_mul_operand_)
  SDP_FIELD("BN_MUL_PRELU", sdp_bn_mul_prelu_)
  SDP_FIELD("BN_MUL_SHIFT_VALUE", sdp_bn_mul_shift_value_)
  SDP_FIELD("BN_RELU_BYPASS", sdp_bn_relu_bypass_)
  SDP_FIELD("EW_BYPASS", sdp_ew_bypass_)
  SDP_FIELD("EW_ALU_BYPASS", sdp_ew_alu_bypass_)
  SDP_FIELD("EW_ALU_ALGO", sdp_ew_alu_algo_)
  SDP_FIELD("EW_ALU_SRC", sdp_ew_alu_src_)
  SDP_FIELD("EW_ALU_OPERAND", sdp_ew_alu_operand_)
  SDP_FIELD("EW_ALU_CVT_BYPASS", sdp_ew_alu_cvt_bypass_)
  SDP_FIELD("EW_ALU_CVT_OFFSET", sdp_ew_alu_cvt_offset_)
  SDP_FIELD("EW_ALU_CVT_SCALE", sdp_ew_alu_cvt_scale_)
  SDP_FIELD("EW_ALU_CVT_TRUNCATE", sdp_ew_alu_cvt_truncate_)
  SDP_FIELD("EW_MUL_BYPASS", sdp_ew_mul_bypass_)
  SDP_FIELD("EW_MUL_SRC", sdp_ew_mul_src_)
  SDP_FIELD("EW_MUL_OPERAND", sdp_ew_mul_operand_)
  SDP_FIELD("EW_MUL_PRELU", sdp_ew_mul_prelu_)
  SDP_FIELD("EW_MUL_CVT_BYPASS", sdp_ew_mul_cvt_bypass_)
  SDP_FIELD("EW_MUL_CVT_OFFSET", sdp_ew_mul_cvt_offset_)
  SDP_FIELD("EW_MUL_CVT_SCALE", sdp_ew_mul_cvt_scale_)
  SDP_FIELD("EW_MUL_CVT_TRUNCATE", sdp_ew_mul_cvt_truncate_)
  SDP_FIELD("EW_TRUNCATE", sdp_ew_truncate_)
  SDP_FIELD("EW_LUT_BYPASS", sdp_ew_lut_bypass_)
  SDP_FIELD("LUT_LE_FUNCTION", sdp_lut_le_function_)
  SDP_FIELD("LUT_LE_START", sdp_lut_le_start_)
  SDP_FIELD("LUT_LE_END", sdp_lut_le_end_)
  SDP_FIELD("LUT_LE_INDEX_OFFSET", sdp_lut_le_index_offset_)
  SDP_FIELD("LUT_LE_INDEX_SELECT", sdp_lut_le_index_select_)
  SDP_FIELD("LUT_LO_START", sdp_lut_lo_start_)
  SDP_FIELD("LUT_LO_END", sdp_lut_lo_end_)
  SDP_FIELD("LUT_LO_INDEX_SELECT", sdp_lut_lo_index_select_)
  SDP_FIELD("LUT_HYBRID_PRIORITY", sdp_lut_hybrid_priority_)
  SDP_FIELD("LUT_UFLOW_PRIORITY", sdp_lut_uflow_priority_)
  SDP_FIELD("LUT_OFLOW_PRIORITY", sdp_lut_oflow_priority_)
  SDP_FIELD("LUT_LE_SLOPE_UFLOW_SCALE", sdp_lut_le_slope_uflow_scale_)
  SDP_FIELD("LUT_LE_SLOPE_UFLOW_SHIFT", sdp_lut_le_slope_uflow_shift_)
  SDP_FIELD("LUT_LE_SLOPE_OFLOW_SCALE", sdp_lut_le_slope_oflow_scale_)
  SDP_FIELD("LUT_LE_SLOPE_OFLOW_SHIFT", sdp_lut_le_slope_oflow_shift_)
  SDP_FIELD("LUT_LO_SLOPE_UFLOW_SCALE", sdp_lut_lo_slope_uflow_scale_)
  SDP_FIELD("LUT_LO_SLOPE_UFLOW_SHIFT", sdp_lut_lo_slope_uflow_shift_)
  SDP_FIELD("LUT_LO_SLOPE_OFLOW_SCALE", sdp_lut_lo_slope_oflow_scale_)
  SDP_FIELD("LUT_LO_SLOPE_OFLOW_SHIFT", sdp_lut_lo_slope_oflow_shift_)
  SDP_FIELD("CVT_OFFSET", sdp_cvt_offset_)
  SDP_FIELD("CVT_SCALE", sdp_cvt_scale_)
  SDP_FIELD("CVT_SHIFT", sdp_cvt_shift_)
#undef SDP_FIELD
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  FILE* in = stdin;
  if (argc > 1 && (in = fopen(argv[1], "r")) == NULL) fail("cannot open", argv[1]);

  std::vector<long long> arrays[kNumArrays];
  char tok[64];
  while (fscanf(in, "%63s", tok) == 1) {
    std::string key(tok);
    int a = 0;
    while (a < kNumArrays && key != kArrays[a]) a++;
    long long v;
    if (a < kNumArrays) {
      long long n;
      if (fscanf(in, "%lld", &n) != 1 || n < 0 || n > 1000000) fail("bad array length", tok);
      arrays[a].resize((size_t)n);
      for (long long i = 0; i < n; i++)
        if (fscanf(in, "%lld", &arrays[a][(size_t)i]) != 1) fail("short array", tok);
    } else {
      if (fscanf(in, "%lld", &v) != 1) fail("missing value for", tok);
      if (!set_field(model, key, v)) fail("unknown field", tok);
    }
  }
  if (in != stdin) fclose(in);

  std::vector<long long>& x = arrays[0];
  const size_t n = x.size();
  if (n == 0 || n % 16 != 0) fail("X must have a positive multiple of 16 elements", NULL);
  for (int a = 1; a <= 6; a++) {
    if (arrays[a].empty()) arrays[a].assign(n, 0);  // absent operand = zeros
    if (arrays[a].size() != n) fail("operand length differs from X", kArrays[a]);
  }
  if (arrays[7].empty()) arrays[7].assign(LE_TBL_ENTRY, 0);
  if (arrays[8].empty()) arrays[8].assign(LO_TBL_ENTRY, 0);
  if (arrays[7].size() != LE_TBL_ENTRY) fail("LUT_LE must have 65 entries", NULL);
  if (arrays[8].size() != LO_TBL_ENTRY) fail("LUT_LO must have 257 entries", NULL);

  // Every PERF / NAN-INF count enable on; the SDP_RDMA fields the configuration reads.
  model.sdp_perf_dma_en_ = 1;
  model.sdp_perf_lut_en_ = 1;
  model.sdp_perf_sat_en_ = 1;
  model.sdp_perf_nan_inf_count_en_ = 1;
  model.sdp_rdma_perf_dma_en_ = 1;
  model.sdp_rdma_perf_nan_inf_count_en_ = 1;
  model.sdp_rdma_in_precision_ = model.sdp_proc_precision_;
  model.sdp_rdma_proc_precision_ = model.sdp_proc_precision_;
  model.sdp_rdma_out_precision_ = model.sdp_out_precision_;
  model.sdp_rdma_flying_mode_ = model.sdp_flying_mode_;

  model.SdpConfigHls();
  sdp_hls_wrapper& w = model.sdp_hls_wrapper_;
  w.reset_stats_regs();
  for (int i = 0; i < LE_TBL_ENTRY; i++)
    w.write_lut(NVDLA_SDP_S_LUT_ACCESS_CFG_0_LUT_TABLE_ID_LE, i, (uint16_t)arrays[7][i]);
  for (int i = 0; i < LO_TBL_ENTRY; i++)
    w.write_lut(NVDLA_SDP_S_LUT_ACCESS_CFG_0_LUT_TABLE_ID_LO, i, (uint16_t)arrays[8][i]);

  uint32_t status_unequal = 0;
  std::vector<int16_t> y(n);
  for (size_t base = 0; base < n; base += 16) {
    int32_t hls_data_in_[16];
    int16_t op[6][16];
    for (int a = 0; a < 6; a++)
      for (int i = 0; i < 16; i++) op[a][i] = (int16_t)arrays[a + 1][base + i];

    // ---- re-typed from NV_NVDLA_sdp::SdpDataOperationDC() (input of one atom) ----
    if (NVDLA_SDP_D_FEATURE_MODE_CFG_0_FLYING_MODE_OFF == model.sdp_flying_mode_) {
      int16_t rdma_data_ptr[16];
      for (int i = 0; i < 16; i++) rdma_data_ptr[i] = (int16_t)x[base + i];
      if (model.sdp_proc_precision_ == NVDLA_SDP_D_DATA_FORMAT_0_PROC_PRECISION_FP16) {
        if (w.sdp_cfg_perf_nan_inf_cnt_en) {
          for (int i = 0; i < 16; i++) {
            if (((rdma_data_ptr[i] & 0x3FF) == 0) && (((rdma_data_ptr[i] >> 10) & 0x1F) == 0x1F)) {
              w.i_inf_cnt++;
            }
          }
          for (int i = 0; i < 16; i++) {
            if (((rdma_data_ptr[i] & 0x3FF) != 0) && (((rdma_data_ptr[i] >> 10) & 0x1F) == 0x1F)) {
              w.i_nan_cnt++;
            }
          }
        }
        for (int i = 0; i < 16; i++) {
          hls_data_in_[i] = Fp16ToFp32((ACINTT(16))rdma_data_ptr[i]);
        }
      } else {
        for (int i = 0; i < 16; i++) {
          hls_data_in_[i] = static_cast<int32_t>(rdma_data_ptr[i]);
        }
      }
    } else {
      uint32_t cacc2sdp_data_ptr[16];  // the 32-bit words from CACC, copied as they are
      for (int i = 0; i < 16; i++) cacc2sdp_data_ptr[i] = (uint32_t)x[base + i];
      memcpy(hls_data_in_, cacc2sdp_data_ptr, sizeof(uint32_t) * 16);
    }

    w.sdp(hls_data_in_, op[0], op[1], op[2], op[3], op[4], op[5]);

    if (model.sdp_ew_alu_algo_ == NVDLA_SDP_D_DP_EW_CFG_0_EW_ALU_ALGO_EQL &&
        model.sdp_ew_bypass_ == NVDLA_SDP_D_DP_EW_CFG_0_EW_BYPASS_NO &&
        model.sdp_ew_alu_bypass_ == NVDLA_SDP_D_DP_EW_CFG_0_EW_ALU_BYPASS_NO) {
      for (int i = 0; i < 16; i++) {
        if (w.sdp_data_out[i] != 0) status_unequal = 1;
      }
    }
    // ---- end of the re-typed part ----

    for (int i = 0; i < 16; i++) y[base + i] = w.sdp_data_out[i];
  }

  printf("Y");
  for (size_t i = 0; i < n; i++) printf(" %d", (int)y[i]);
  printf("\n");
  printf("OUT_SATURATION %u\n", (unsigned)w.o_cvt_o_flow);
  printf("LUT_UFLOW %u\n", (unsigned)w.lut_u_flow);
  printf("LUT_OFLOW %u\n", (unsigned)w.lut_o_flow);
  printf("LUT_HYBRID %u\n", (unsigned)w.lut_hybrid_hit);
  printf("LUT_LE_HIT %u\n", (unsigned)w.lut_le_hit);
  printf("LUT_LO_HIT %u\n", (unsigned)w.lut_lo_hit);
  printf("STATUS_UNEQUAL %u\n", (unsigned)status_unequal);
  printf("STATUS_NAN_INPUT_NUM %u\n", (unsigned)w.i_nan_cnt);
  printf("STATUS_INF_INPUT_NUM %u\n", (unsigned)w.i_inf_cnt);
  printf("STATUS_NAN_OUTPUT_NUM %u\n", (unsigned)w.o_nan_cnt);
  return 0;
}
