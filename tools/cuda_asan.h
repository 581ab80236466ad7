// cuda_asan.h - for every program that runs CUDA code on a device (the
// GPU test in tests/cuda, the GPU benchmark in bench/cuda): under
// AddressSanitizer the CUDA driver needs the shadow gap unprotected, which
// this header asks for through __asan_default_options. Include it in one
// file of the program; without AddressSanitizer it defines nothing.
#ifndef PER_CUDA_ASAN_H
#define PER_CUDA_ASAN_H

#if defined(__SANITIZE_ADDRESS__)
#define PER_CUDA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PER_CUDA_ASAN 1
#endif
#endif
#ifdef PER_CUDA_ASAN
extern "C" const char *__asan_default_options(void);
extern "C" const char *__asan_default_options(void) {
  return "protect_shadow_gap=0";
}
#endif

#endif
