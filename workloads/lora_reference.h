// The independent reference of LoRA training: the model of lora_model.h written out in plain
// double-precision loops (no LibTorch, no autograd), and the adapters' gradient by central
// finite differences of that loss -- a computation that shares nothing with the LibTorch
// autograd driver but the weights. Meant for small configurations (the cost is two forward
// passes per adapter parameter).
#pragma once

#include <vector>

#include "workloads/lora_model.h"

namespace kg {

// Mean next-token cross-entropy of the batch.
double lora_reference_loss(const lora_config& c, const lora_base& base, const lora_adapters& a,
                           const lora_batch& batch);

// d loss / d adapter, in lora_adapters::flat() order; step h * max(1, |p|) per parameter.
std::vector<double> lora_reference_grad(const lora_config& c, const lora_base& base,
                                        const lora_adapters& a, const lora_batch& batch,
                                        double h = 1e-5);

// max over k of |a[k] - b[k]| / (atol + |b[k]|): at most rtol when every element of a is within
// rtol of b (atol keeps near-zero elements from dominating). The gates' measure.
double worst_relative_difference(const std::vector<double>& a, const std::vector<double>& b,
                                 double atol);

} // namespace kg
