#include "sim/match_table.h"

#include <functional>

namespace scaleplan::sim {

size_t MatchKeyHash::operator()(const MatchKey& k) const noexcept {
  // boost::hash_combine's mixing over every field.
  size_t h = 0;
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(static_cast<uint64_t>(k.site));
  mix(static_cast<uint64_t>(k.kind));
  mix(k.backward ? 1 : 0);
  mix(static_cast<uint64_t>(k.group));
  mix(static_cast<uint64_t>(k.chunk));
  mix(static_cast<uint64_t>(k.seq));
  return h;
}

uint32_t MatchTable::instance(const MatchKey& key, int members, Program& program) {
  auto [it, fresh] = ids_.try_emplace(key, 0);
  if (fresh) it->second = program.add_match(members);
  return it->second;
}

}  // namespace scaleplan::sim
