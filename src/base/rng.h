// Deterministic randomness: every random choice in Herd goes through an Rng
// seeded by its owner, so a run is reproducible for a given seed.
#pragma once

#include <cstdint>
#include <random>

namespace herd {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t Next() { return gen_(); }
  // Uniform in [0, n).
  uint64_t Uniform(uint64_t n) { return n == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, n - 1)(gen_); }
  double UniformDouble() { return std::uniform_real_distribution<double>(0.0, 1.0)(gen_); }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

}  // namespace herd
