// Ampere+ asynchronous global -> shared copies (cp.async), written once for the attention
// kernels that stage K/V tiles through them (attention_splitkv.cu, attention_prefill.cu).
#pragma once

namespace kg::decode {

// 16 bytes global -> shared, asynchronously; zero-filled with nothing read when !valid, so a
// tile's rows past the valid keys are zeros, never stale shared memory or another sequence's
// cache (src must still be a mapped address: callers pass a valid element of the block).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most `pending` committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

} // namespace kg::decode
