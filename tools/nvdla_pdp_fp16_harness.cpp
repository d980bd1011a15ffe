// A driver around NVIDIA's NVDLA cmod PDP (pooling) sequencer and its FP16 HLS cores, for one layer.
//
// nvdla/hw, branch nvdlav1, commit 8e06b1b9d85aab65b40d43d08eec5ea4681ff715. Build it through
// tools/make_nvdla_pdp_fp16_vectors.py, which extracts the cmod files at that commit, writes the
// generated include files named below and compiles this file together with, unchanged,
//   cmod/hls_wrapper/pdp_hls_wrapper.cpp and cmod/hls/vlibs/{fp16_max,fp16_min,fp16_to_fp17,
//   fp17_add,fp17_mul,fp17_to_fp16}.cpp
// (headers: cmod/hls/include/nvdla_float.h, nvdla_int.h, nvdla_common.h, ac_int.h, ac_fixed.h with
// its one ".template slc<" syntax patch, ac_channel.h; cmod/hls/vlibs/vlibs.h;
// cmod/hls_wrapper/pdp_hls_wrapper.h; cmod/include/arnvdla.h, arnvdla.uh), a stub log.h whose
// debug macros expand to nothing and an empty systemc.h (the vlibs include it; they use none of it).
//
// Generated include files (extracted verbatim from the commit by the Python tool):
//   pdp_h_defines.inc    lines 29-79 of cmod/pdp/NV_NVDLA_pdp.h (buffer sizes, formats, methods)
//   pdp_cpp_defines.inc  lines 21-30 of cmod/pdp/NV_NVDLA_pdp.cpp (DATA_FORMAT_*, KERNEL_WIDTH_MAX)
//   pdp_sequencer.inc    lines 425-658, 666-797, 1425-1748 and 1775-1865 of NV_NVDLA_pdp.cpp:
//                        PoolingStage0SequenceCommon, PoolingStage1SequenceCommon, LineOperation,
//                        PoolingStage0Calc, PoolingStage1Calc, IsFirstElement, IsLastElement,
//                        IsContributeToANewLine, int_sign_extend
//
// The sequencer runs verbatim as members of the stand-in class below, whose members are the
// register variables (types of cmod/pdp/gen/pdp_reg_model.h), the line buffers (types of
// NV_NVDLA_pdp.h) and non-blocking stand-ins for the sc_fifo synchronisation between stage 0 and
// stage 1 (stage 0 runs over the whole layer first, so the line buffer must not wrap: at most
// 256 atoms, ceil(C / 16) * OH * OW <= 256; no width split). No arithmetic of its own: it parses
// the input, packs fp16 words into 32-byte atoms and prints the words the cmod wrote.
//
// Input (text, whitespace-separated decimal integers on stdin):
//   25 register fields in this order (raw values, "minus one" where the register is):
//    0 CUBE_IN_WIDTH 1 CUBE_IN_HEIGHT 2 CUBE_IN_CHANNEL 3 CUBE_OUT_WIDTH 4 CUBE_OUT_HEIGHT
//    5 POOLING_METHOD 6 FLYING_MODE 7 NAN_TO_ZERO 8 KERNEL_WIDTH 9 KERNEL_HEIGHT
//    10 KERNEL_STRIDE_WIDTH 11 KERNEL_STRIDE_HEIGHT 12 PAD_LEFT 13 PAD_TOP 14 PAD_RIGHT
//    15 PAD_BOTTOM 16 RECIP_KERNEL_WIDTH 17 RECIP_KERNEL_HEIGHT 18..24 PAD_VALUE_1X..7X
//   then S * H * W * 16 fp16 words, [S][H][W][16] (S = ceil(C / 16) surfaces of 16 channels).
// Output: "Y" and the S * OH * OW * 16 output words, [S][OH][OW][16]; "NAN_OUTPUT_NUM" n.
#include <stdint.h>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <vector>
#include <algorithm>
#include "log.h"
#include "arnvdla.h"
#include "pdp_hls_wrapper.h"
using namespace std;
#include "pdp_h_defines.inc"
#include "pdp_cpp_defines.inc"
#define POOLING_FLYING_MODE_ON_FLYING   NVDLA_PDP_D_OPERATION_MODE_CFG_0_FLYING_MODE_ON_FLYING
#define POOLING_FLYING_MODE_OFF_FLYING  NVDLA_PDP_D_OPERATION_MODE_CFG_0_FLYING_MODE_OFF_FLYING
struct StubFifo { int n; StubFifo(): n(0) {} void write(uint8_t) { n++; }
  uint8_t read() { if (n <= 0) { fprintf(stderr, "stub fifo underflow\n"); abort(); } n--; return 1; } };
struct WdmaFifo { std::vector<uint8_t*> v; void write(uint8_t* p) { v.push_back(p); } };
class NV_NVDLA_pdp {
public:
  uint16_t pdp_cube_in_width_, pdp_cube_in_height_, pdp_cube_in_channel_, pdp_cube_out_width_, pdp_cube_out_height_;
  uint8_t pdp_pooling_method_, pdp_flying_mode_, pdp_nan_to_zero_, pdp_kernel_width_, pdp_kernel_height_,
          pdp_kernel_stride_width_, pdp_kernel_stride_height_, pdp_pad_left_, pdp_pad_top_, pdp_pad_right_, pdp_pad_bottom_, pdp_input_data_;
  uint32_t pdp_recip_kernel_width_, pdp_recip_kernel_height_, pdp_pad_value_1x_, pdp_pad_value_2x_, pdp_pad_value_3x_,
           pdp_pad_value_4x_, pdp_pad_value_5x_, pdp_pad_value_6x_, pdp_pad_value_7x_;
  uint16_t line_buffer_[PDP_LINE_BUFFER_INT8_ELEMENT_NUM];
  uint16_t line_operation_buffer_[8*ELEMENT_PER_ATOM_INT8];
  StubFifo* line_buffer_usage_free_[PDP_LINE_BUFFER_ENTRY_NUM];
  StubFifo* line_buffer_ready_[PDP_LINE_BUFFER_ENTRY_NUM];
  WdmaFifo* wdma_buffer_;
  std::deque<uint8_t*> input_;
  uint32_t nan_output_num;
  uint8_t* FetchInputData() { uint8_t* p = input_.front(); input_.pop_front(); return p; }
  void PoolingStage0SequenceCommon(uint32_t cube_in_width, uint32_t pad_left, uint32_t pad_right, uint32_t acc_subcube_out_width, uint32_t cube_out_width);
  void PoolingStage1SequenceCommon(uint32_t cube_out_width, uint32_t acc_subcube_out_width, uint32_t pad_left, uint32_t pad_right, uint32_t cube_in_width);
  template <typename T_IN, typename T_OUT, typename T_PAD>
  void PoolingStage0Calc (T_IN * atomic_data_in, T_OUT * line_buffer_ptr, uint32_t cube_out_width_idx, uint32_t cube_out_height_idx, uint32_t surface, uint32_t cube_in_height, uint32_t kernel_height_iter,  uint32_t kernel_height, uint32_t cube_in_height_iter, T_PAD * padding_value_ptr, uint8_t element_num, uint32_t surface_num, uint32_t acc_subcube_out_width, uint32_t cube_out_width);
  template <typename T_OUT, typename T_IN>
  void PoolingStage1Calc (T_OUT * atomic_data_out, T_IN * line_buffer_ptr, uint32_t width, uint32_t height, uint32_t surface, uint8_t element_num, uint32_t surface_num, uint32_t acc_subcube_out_width, uint32_t cube_out_width, uint32_t pad_left, uint32_t pad_right, uint32_t cube_in_width);
  template <typename T_IN, typename T_OUT, typename T_PAD>
  void LineOperation (T_IN * atomic_data_in, T_OUT * line_buffer_ptr, uint32_t kernel_width_iter, uint32_t kernel_width, uint32_t cube_in_width_iter, uint32_t cube_in_width, T_PAD * padding_value_ptr, uint8_t element_num, uint32_t pad_left);
  bool IsFirstElement(uint32_t pad_left, uint32_t width_iter, uint32_t height_iter, uint32_t kernel_width_iter, uint32_t kernel_height_iter);
  bool IsLastElement(uint32_t cube_in_width, uint32_t pad_left, uint32_t width_iter, uint32_t height_iter, uint32_t kernel_width_iter, uint32_t kernel_height_iter);
  bool IsContributeToANewLine(uint32_t cube_in_height_iter, uint32_t kernel_height_iter);
  template <typename T_IN, typename T_OUT>
  void int_sign_extend(T_IN original_value, uint8_t sign_bit_idx, uint8_t extended_bit_num, T_OUT *return_value);
};
#include "pdp_sequencer.inc"

// One layer without width split (see the header).
int pdp_fp16_layer(const uint32_t* regs, const uint16_t* x, uint16_t* y, uint32_t* nan_out) {
  NV_NVDLA_pdp* p = new NV_NVDLA_pdp();
  p->pdp_cube_in_width_ = regs[0]; p->pdp_cube_in_height_ = regs[1]; p->pdp_cube_in_channel_ = regs[2];
  p->pdp_cube_out_width_ = regs[3]; p->pdp_cube_out_height_ = regs[4]; p->pdp_pooling_method_ = regs[5];
  p->pdp_flying_mode_ = regs[6]; p->pdp_nan_to_zero_ = regs[7]; p->pdp_kernel_width_ = regs[8]; p->pdp_kernel_height_ = regs[9];
  p->pdp_kernel_stride_width_ = regs[10]; p->pdp_kernel_stride_height_ = regs[11]; p->pdp_pad_left_ = regs[12];
  p->pdp_pad_top_ = regs[13]; p->pdp_pad_right_ = regs[14]; p->pdp_pad_bottom_ = regs[15];
  p->pdp_recip_kernel_width_ = regs[16]; p->pdp_recip_kernel_height_ = regs[17];
  p->pdp_pad_value_1x_ = regs[18]; p->pdp_pad_value_2x_ = regs[19]; p->pdp_pad_value_3x_ = regs[20]; p->pdp_pad_value_4x_ = regs[21];
  p->pdp_pad_value_5x_ = regs[22]; p->pdp_pad_value_6x_ = regs[23]; p->pdp_pad_value_7x_ = regs[24];
  p->pdp_input_data_ = DATA_FORMAT_FP16; p->nan_output_num = 0;
  for (int i = 0; i < PDP_LINE_BUFFER_ENTRY_NUM; ++i) { p->line_buffer_usage_free_[i] = new StubFifo(); p->line_buffer_ready_[i] = new StubFifo(); }
  p->wdma_buffer_ = new WdmaFifo();
  uint32_t W = regs[0] + 1, H = regs[1] + 1, C = regs[2] + 1, S = (C + 15) / 16, OW = regs[3] + 1, OH = regs[4] + 1;
  if (S * OW * OH > PDP_LINE_BUFFER_ENTRY_NUM) return -1;   // stage 0 then stage 1: the line buffer must not wrap
  for (uint32_t i = 0; i < S * H * W; ++i) { uint8_t* a = new uint8_t[32]; for (int k = 0; k < 16; ++k) { a[2*k] = x[i*16+k] & 0xff; a[2*k+1] = x[i*16+k] >> 8; } p->input_.push_back(a); }
  p->PoolingStage0SequenceCommon(W, regs[12], regs[14], 0, OW);
  p->PoolingStage1SequenceCommon(OW, 0, regs[12], regs[14], W);
  for (size_t i = 0; i < p->wdma_buffer_->v.size(); ++i) { uint16_t* o = (uint16_t*)p->wdma_buffer_->v[i]; for (int k = 0; k < 16; ++k) y[i*16+k] = o[k]; }
  if (nan_out) *nan_out = p->nan_output_num;
  return (int)p->wdma_buffer_->v.size();
}

int main() {
  uint32_t regs[25];
  for (int i = 0; i < 25; ++i) if (scanf("%u", &regs[i]) != 1) { fprintf(stderr, "short register list\n"); return 2; }
  uint32_t S = (regs[2] + 1 + 15) / 16, H = regs[1] + 1, W = regs[0] + 1, OH = regs[4] + 1, OW = regs[3] + 1;
  std::vector<uint16_t> x(S * H * W * 16), y(S * OH * OW * 16);
  for (size_t i = 0; i < x.size(); ++i) { unsigned v; if (scanf("%u", &v) != 1) { fprintf(stderr, "short X\n"); return 2; } x[i] = (uint16_t)v; }
  uint32_t nan_out = 0;
  int n = pdp_fp16_layer(regs, &x[0], &y[0], &nan_out);
  if (n != (int)(S * OH * OW)) { fprintf(stderr, "the cmod wrote %d atoms, expected %u\n", n, S * OH * OW); return 3; }
  printf("Y");
  for (size_t i = 0; i < y.size(); ++i) printf(" %u", (unsigned)y[i]);
  printf("\nNAN_OUTPUT_NUM %u\n", nan_out);
  return 0;
}
