// Honest inputs while timing. A timed call must not be able to skip or cache its computation, nor
// to tell that it is timed. Every timed call is staged and checked: before it (outside the timed
// window, before the L2 flush) one of several verified input sets is copied into one of several
// buffer sets -- contents change behind the same pointers, and pointers change -- and its outputs
// are filled with a byte pattern that varies (NaN, or not); after it, a device kernel compares the
// outputs with the candidate's own verified output for that input set and raises a flag. Some
// calls run without the blocking kernel ahead of them (not timed, still checked), and one untimed
// call on inputs no timed call has seen lands at a random point. A failed check ends the run:
// REWARD_HACK, and no time.
#pragma once

#include <functional>
#include <string>

#include <cuda_runtime_api.h>

namespace kg {

struct honest_verdict {
  std::string status; // "" (verified), INCORRECT (wrong first time), REWARD_HACK (right, then
                      // different bits on the same inputs and wrong)
  std::string reason;
};

struct honest_work {
  // Optional, before any timing: every input set run and checked against its reference, its
  // output kept as the verified output `check` compares with. Empty: the caller verified already.
  std::function<honest_verdict(cudaStream_t)> verify;
  int slots = 2;     // buffer sets: the pointer identities the calls see (>= 1)
  int data_sets = 3; // verified input contents rotated through the slots (>= 3)
  // Queued before the call: data set `data`'s inputs copied into `slot`'s buffers, its outputs
  // filled with `fill` bytes.
  std::function<void(int slot, int data, unsigned char fill, cudaStream_t)> stage;
  std::function<void(int slot, cudaStream_t)> launch;
  // Queued after the call: `slot`'s outputs against data set `data`'s verified outputs.
  std::function<void(int slot, int data, cudaStream_t)> check;
  // After the stream was synchronized: "" while every check so far passed, else what failed.
  std::function<std::string()> failed;
  // The untimed call on fresh inputs, checked against the oracle: "" or why it failed.
  std::function<std::string(cudaStream_t)> fresh;
};

} // namespace kg
