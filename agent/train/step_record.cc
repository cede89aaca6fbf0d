#include "agent/train/step_record.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tae::train {
namespace {

absl::Status WriteTensors(const std::string& path, std::initializer_list<torch::Tensor> tensors) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const torch::Tensor& t : tensors) {
    torch::Tensor flat = t.detach().to(torch::kCPU).contiguous();
    out.write(static_cast<const char*>(flat.data_ptr()),
              static_cast<std::streamsize>(flat.numel() * flat.element_size()));
  }
  out.close();
  if (!out) {
    return absl::InternalError(
        absl::StrCat("step record: cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status WriteBatch(const std::string& path, const Batch& batch) {
  return WriteTensors(path, {batch.inputs.to(torch::kLong), batch.targets.to(torch::kLong),
                             batch.mask.to(torch::kFloat)});
}

}  // namespace

absl::Status StepRecorder::Start(torch::nn::Module& model, const Batch& first_eval_batch) {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("step record: cannot create ", dir_, ": ", error.message()));
  }
  nlohmann::json params = nlohmann::json::array();
  int64_t offset = 0;
  for (const auto& named : model.named_parameters()) {
    params.push_back(
        {{"name", named.key()}, {"shape", named.value().sizes().vec()}, {"offset", offset}});
    offset += named.value().numel();
  }
  std::ofstream index(dir_ + "/params.json");
  index << nlohmann::json{{"params", params}, {"count", offset}}.dump(1) << "\n";
  index.close();
  if (!index) {
    return absl::InternalError(absl::StrCat("step record: cannot write ", dir_, "/params.json"));
  }
  std::ofstream(dir_ + "/steps.jsonl", std::ios::trunc).close();
  if (absl::Status s = WriteParams("params_0.bin", model); !s.ok()) {
    return s;
  }
  return WriteBatch(dir_ + "/eval_0.bin", first_eval_batch);
}

absl::Status StepRecorder::Step(int64_t step, const Batch& batch, double loss, double grad_norm,
                                double lr, torch::nn::Module& model) {
  if (absl::Status s = WriteBatch(absl::StrCat(dir_, "/batch_", step, ".bin"), batch); !s.ok()) {
    return s;
  }
  if (absl::Status s = WriteParams(absl::StrCat("params_", step, ".bin"), model); !s.ok()) {
    return s;
  }
  std::ofstream steps(dir_ + "/steps.jsonl", std::ios::app);
  steps
      << nlohmann::json{{"step", step}, {"loss", loss}, {"grad_norm", grad_norm}, {"lr", lr}}.dump()
      << "\n";
  steps.close();
  if (!steps) {
    return absl::InternalError(absl::StrCat("step record: cannot write ", dir_, "/steps.jsonl"));
  }
  return absl::OkStatus();
}

absl::Status StepRecorder::WriteParams(const std::string& name, torch::nn::Module& model) {
  std::ofstream out(dir_ + "/" + name, std::ios::binary | std::ios::trunc);
  for (const torch::Tensor& p : model.parameters()) {
    torch::Tensor flat = p.detach().contiguous();
    out.write(static_cast<const char*>(flat.data_ptr()),
              static_cast<std::streamsize>(flat.numel() * sizeof(float)));
  }
  out.close();
  if (!out) {
    return absl::InternalError(absl::StrCat("step record: cannot write ", dir_, "/", name));
  }
  return absl::OkStatus();
}

}  // namespace tae::train
