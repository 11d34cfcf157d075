// GPU tests skip, visibly, where no CUDA device can be used.
#pragma once

#include <gtest/gtest.h>

#include "gpu/device_info.h"

#define KG_REQUIRE_GPU()                                                                           \
  do {                                                                                             \
    const auto kg_device_ = ::kg::query_device(0);                                                 \
    if (!kg_device_.available) GTEST_SKIP() << "GPU test skipped: " << kg_device_.reason;          \
  } while (0)
