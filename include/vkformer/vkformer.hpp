#pragma once
// The vkformer C++ API: devices, tensors, graphs and their executors.
#include "vkformer/device.hpp"
#include "vkformer/device_tensor.hpp"
#include "vkformer/dtype.hpp"
#include "vkformer/embedder.hpp"
#include "vkformer/error.hpp"
#include "vkformer/executor.hpp"
#include "vkformer/graph.hpp"
#include "vkformer/half.hpp"
#include "vkformer/host_tensor.hpp"
#include "vkformer/io.hpp"
#include "vkformer/model.hpp"
#include "vkformer/shape.hpp"
