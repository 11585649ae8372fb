// A real 7B-transformer-shaped tensor list (Llama-style config, bf16), scaled to a target
// size: the matrices' row counts are divided by one factor, every tiny tensor (norms,
// biases: `hidden` elements, 8 KiB each) keeps its real size, and the tensor count is the
// real one. Shared by the transfer benchmarks (thub_bench_replicate --layout 7b) and the
// compaction benchmark.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace thub::bench {

struct LlamaConfig {
  uint64_t layers = 32, hidden = 4096, ffn = 11008, vocab = 32000;
  bool bias = true;  // q/k/v biases (Qwen-style); Llama itself has none
};

struct NamedTensor {
  std::string name;
  uint64_t bytes = 0;
};

// The layout with the matrices' rows divided by `div` (>= 1).
inline std::vector<NamedTensor> llama_layout(const LlamaConfig& c, uint64_t div) {
  const uint64_t e = 2;  // bf16
  auto mat = [&](uint64_t rows, uint64_t cols) { return std::max<uint64_t>(1, rows / div) * cols * e; };
  std::vector<NamedTensor> t;
  t.push_back({"model.embed_tokens.weight", mat(c.vocab, c.hidden)});
  for (uint64_t l = 0; l < c.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", c.hidden * e});
    for (const char* w : {"q_proj", "k_proj", "v_proj"}) {
      t.push_back({p + "self_attn." + w + ".weight", mat(c.hidden, c.hidden)});
      if (c.bias) t.push_back({p + "self_attn." + w + ".bias", c.hidden * e});
    }
    t.push_back({p + "self_attn.o_proj.weight", mat(c.hidden, c.hidden)});
    t.push_back({p + "post_attention_layernorm.weight", c.hidden * e});
    t.push_back({p + "mlp.gate_proj.weight", mat(c.ffn, c.hidden)});
    t.push_back({p + "mlp.up_proj.weight", mat(c.ffn, c.hidden)});
    t.push_back({p + "mlp.down_proj.weight", mat(c.hidden, c.ffn)});
  }
  t.push_back({"model.norm.weight", c.hidden * e});
  t.push_back({"lm_head.weight", mat(c.vocab, c.hidden)});
  return t;
}

inline uint64_t total_bytes(const std::vector<NamedTensor>& t) {
  uint64_t n = 0;
  for (const auto& x : t) n += x.bytes;
  return n;
}

// The row divisor that brings the full model (13.5 GB in bf16) to at most about `target`.
inline uint64_t llama_divisor(const LlamaConfig& c, uint64_t target) {
  const uint64_t real = total_bytes(llama_layout(c, 1));
  return std::max<uint64_t>(1, (real + target - 1) / std::max<uint64_t>(1, target));
}

}  // namespace thub::bench
