// MatchTable: the match instances (sim::Program::add_match) the program builder shares between
// the ranks that take part in one collective or one send/receive pair, found by a typed key.
//
// Every field of a key is compared on its own, so two different collectives can never share an
// instance whatever their group index, call count, chunk or micro-batch (the builder used to pack
// them into one 64-bit integer, in which a group index >= 2^20 or a call count >= 2^36 spilled
// into the neighbouring field). Instances are created in the order keys are first asked for,
// which is what makes a program's match ids deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "sim/program.h"

namespace scaleplan::sim {

struct MatchKey {
  enum class Site : uint8_t {
    kGroup,     // a collective on group `group` of kind `kind`, the `seq`-th on it of each member
    kWorld,     // a collective over every simulated rank, the `seq`-th of each rank
    kTransfer,  // a pipeline send/receive pair: pipeline `group`, direction, receiving global
                // chunk `chunk`, micro-batch `seq`
  };
  Site site = Site::kGroup;
  GroupKind kind = GroupKind::kTp;  // kGroup only
  bool backward = false;            // kTransfer: a gradient (true) or an activation
  int64_t group = 0;
  int64_t chunk = 0;
  int64_t seq = 0;
  bool operator==(const MatchKey&) const = default;
};

struct MatchKeyHash {
  size_t operator()(const MatchKey& k) const noexcept;
};

class MatchTable {
 public:
  // The instance of `key` in `program`: added there with `members` members when the key is new.
  uint32_t instance(const MatchKey& key, int members, Program& program);
  size_t size() const { return ids_.size(); }

 private:
  std::unordered_map<MatchKey, uint32_t, MatchKeyHash> ids_;
};

}  // namespace scaleplan::sim
