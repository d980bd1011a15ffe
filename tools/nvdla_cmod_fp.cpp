// Array wrappers around NVIDIA's NVDLA cmod floating-point primitives (a test oracle).
//
// nvdla/hw, branch nvdlav1, commit 8e06b1b9d85aab65b40d43d08eec5ea4681ff715,
// cmod/hls/include/nvdla_float.h (with nvdla_int.h, nvdla_common.h, ac_int.h, ac_fixed.h beside
// it, and cmod/hls/sdp/sdp.h for the SDP's types and widths). Build and load it through
// tools/nvdla_cmod_fp.py, which extracts those headers, patches the one C++ token ac_fixed.h needs
// on modern compilers and compiles this file with g++ -std=c++98.
//
// Every function loops over n elements and calls the cmod function once per element. Nothing here
// computes: the wrappers only move bit patterns in and out of the ac_int types, the way the SDP
// code (cmod/hls/sdp/*.cpp) passes them:
//   - float words travel as *signed* ac_int of the format's width (Fp32Type = ac_int<32,true>,
//     Fp17Type = ac_int<17,true>, Fp16Type/xOpType = ac_int<16,true>); the raw unsigned pattern
//     is sign-extended from its top bit into that type (ac_int keeps the low W bits of any value it
//     is given), and results are returned as their low W bits, unsigned;
//   - fp17 words live in the low 17 bits of a uint32 (higher bits are ignored on input);
//   - Fp16ToInt16 returns ac_int<16,true>: an int16;
//   - Int17ToFp16 takes cTrunOutType = ac_int<17,true> (only the low 17 bits of each int64 count);
//   - FpFloatToIntFrac<8,23,yLutRegIdxSize=8,yLutAddrSize=9,yLutFracSize=35> (as
//     cmod/hls/sdp/sdp_y_idx.cpp instantiates it) takes the right shift as yLutRegIdxType =
//     ac_int<8,true> (low 8 bits of each int64, signed) and returns ac_int<9,false> and
//     ac_int<35,false>;
//   - FpFractionToFloat<35,6,10> (cmod/hls/sdp/sdp_y_inp.cpp) takes ac_int<35,false> and returns
//     ac_int<17,false>: an fp17 pattern.

#include <stddef.h>
#include <stdint.h>

#include "sdp.h"  // includes nvdla_float.h; the SDP's typedefs and yLut* widths

namespace {

// The SDP's own types (cmod/hls/sdp/sdp.h): Fp32Type = cFloatType = yLutInType = ac_int<32,true>,
// Fp17Type = ac_int<17,true>, Fp16Type = xOpType = ac_int<16,true>.
inline Fp32Type fp32_in(uint32_t bits) { return Fp32Type((Slong)(int32_t)bits); }
inline Fp17Type fp17_in(uint32_t bits) { return Fp17Type((Slong)(bits & 0x1ffffu)); }
inline Fp16Type fp16_in(uint16_t bits) { return Fp16Type((Slong)(int16_t)bits); }

template <int W, bool S>
inline uint64_t low_bits(const ac_int<W, S>& v) {
  return (uint64_t)v.to_int64() & ((W >= 64) ? ~(uint64_t)0 : (((uint64_t)1 << W) - 1));
}

}  // namespace

extern "C" {

// ---- conversions --------------------------------------------------------------------------

void fp16_to_fp32(const uint16_t* h, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (uint32_t)low_bits(Fp16ToFp32(fp16_in(h[i])));
}

void fp32_to_fp16(const uint32_t* f, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (uint16_t)low_bits(Fp32ToFp16(fp32_in(f[i])));
}

void fp16_to_fp17(const uint16_t* h, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (uint32_t)low_bits(Fp16ToFp17(fp16_in(h[i])));
}

void fp17_to_fp32(const uint32_t* x, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (uint32_t)low_bits(Fp17ToFp32(fp17_in(x[i])));
}

void fp32_to_fp17(const uint32_t* f, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (uint32_t)low_bits(Fp32ToFp17(fp32_in(f[i])));
}

void fp16_to_int16(const uint16_t* h, int16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (int16_t)Fp16ToInt16(fp16_in(h[i])).to_int();
}

void int17_to_fp16(const int64_t* v, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    cTrunOutType t = (Slong)v[i];  // ac_int<17,true>, as sdp_c.cpp passes it
    out[i] = (uint16_t)low_bits(Int17ToFp16(t));
  }
}

// ---- fp32 arithmetic (8/23) ------------------------------------------------------------------

void fp32_add(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint32_t)low_bits(FpAdd<8, 23>(fp32_in(a[i]), fp32_in(b[i])));
}

void fp32_sub(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint32_t)low_bits(FpSub<8, 23>(fp32_in(a[i]), fp32_in(b[i])));
}

void fp32_mul(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint32_t)low_bits(FpMul<8, 23>(fp32_in(a[i]), fp32_in(b[i])));
}

void fp32_max(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint32_t)low_bits(FpMax<8, 23>(fp32_in(a[i]), fp32_in(b[i])));
}

void fp32_min(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint32_t)low_bits(FpMin<8, 23>(fp32_in(a[i]), fp32_in(b[i])));
}

void fp32_eql(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint32_t)low_bits(FpEql<8, 23>(fp32_in(a[i]), fp32_in(b[i])));
}

void fp32_relu(const uint32_t* a, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (uint32_t)low_bits(FpRelu<8, 23>(fp32_in(a[i])));
}

// ---- fp17 arithmetic (6/10) ------------------------------------------------------------------

void fp17_add(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint32_t)low_bits(Fp17Add(fp17_in(a[i]), fp17_in(b[i])));
}

void fp17_mul(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint32_t)low_bits(Fp17Mul(fp17_in(a[i]), fp17_in(b[i])));
}

// ---- SDP LUT index and interpolation weights ---------------------------------------------------

void fp32_to_int_frac(const uint32_t* f, const int64_t* rshift, uint32_t* out_int,
                      uint64_t* out_frac, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    yLutRegIdxType shift = (Slong)rshift[i];  // ac_int<8,true>: cfg_lut_*_index_select
    yLutIndexTypeF o_int;                     // ac_int<9,false>
    yLutFracType o_fra;                       // ac_int<35,false>
    FpFloatToIntFrac<Fp32ExpoSize, Fp32MantSize, yLutRegIdxSize, yLutAddrSize, yLutFracSize>(
        fp32_in(f[i]), shift, o_int, o_fra);
    out_int[i] = (uint32_t)low_bits(o_int);
    out_frac[i] = low_bits(o_fra);
  }
}

void fraction_to_fp17(const uint64_t* frac, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    yLutFracType f = (Ulong)frac[i];  // ac_int<35,false>, as sdp_y_inp.cpp passes it
    out[i] = (uint32_t)low_bits(FpFractionToFloat<yLutFracSize, Fp17ExpoSize, Fp17MantSize>(f));
  }
}

void fp17_to_fp16(const uint32_t* x, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = (uint16_t)low_bits(Fp17ToFp16(fp17_in(x[i])));
}

void fp16_max(const uint16_t* a, const uint16_t* b, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint16_t)low_bits(FpMax<5, 10>(fp16_in(a[i]), fp16_in(b[i])));
}

void fp16_min(const uint16_t* a, const uint16_t* b, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = (uint16_t)low_bits(FpMin<5, 10>(fp16_in(a[i]), fp16_in(b[i])));
}

// FpFractionToFloat<16,6,10>: the CDP LUT's 16-bit interpolation fraction.
void fraction16_to_fp17(const uint64_t* frac, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    ac_int<16, false> f = (Ulong)frac[i];
    out[i] = (uint32_t)low_bits(FpFractionToFloat<16, Fp17ExpoSize, Fp17MantSize>(f));
  }
}

// The widths the wrappers were built with, so Python can check them: yLutRegIdxSize,
// yLutAddrSize, yLutFracSize.
void lut_sizes(uint32_t* out) {
  out[0] = yLutRegIdxSize;
  out[1] = yLutAddrSize;
  out[2] = yLutFracSize;
}

}  // extern "C"
