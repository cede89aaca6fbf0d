#pragma once

// A complete, valid run spec for tests to modify: the defaults of docs/design.md §10, except
// model.tie_embeddings (true here: the engine tests were written when it was the default).

#include <nlohmann/json.hpp>

namespace tae::train::testing {

inline nlohmann::json DefaultSpec() {
  return nlohmann::json{
      {"model.layers", 2},
      {"model.d_model", 64},
      {"model.heads", 4},
      {"model.kv_heads", 0},
      {"model.head_dim", 0},
      {"model.ffn_mult", 4},
      {"model.activation", "gelu"},
      {"model.norm", "layernorm"},
      {"model.norm_position", "pre"},
      {"model.pos_encoding", "learned"},
      {"model.residual", true},
      {"model.causal", true},
      {"model.drop_attention_layers", nlohmann::json::array()},
      {"model.drop_ffn_layers", nlohmann::json::array()},
      {"model.prune_heads", nlohmann::json::object()},
      {"model.tie_embeddings", true},
      {"model.bias", true},
      {"model.dropout", 0.0},
      {"train.task", "copy"},
      {"train.data", ""},
      {"train.vocab", 16},
      {"train.seq_len", 32},
      {"train.batch_size", 32},
      {"train.steps", 500},
      {"train.optimizer", "adamw"},
      {"train.lr", 0.003},
      {"train.schedule", "cosine"},
      {"train.warmup", 50},
      {"train.weight_decay", 0.0},
      {"train.grad_clip", 1.0},
      {"train.eval_every", 100},
      {"train.eval_batches", 8},
      {"train.checkpoint_every", 0},
      {"train.head_importance", false},
      {"train.threads", 0},
      {"train.seed", 0},
      {"resources.slots", 1},
      {"resources.labels", nlohmann::json::object()},
      {"resources.max_attempts", 3},
      {"resources.priority", 0},
  };
}

}  // namespace tae::train::testing
