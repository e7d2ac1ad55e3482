// What a long call reports while it runs: progress (typed per command) and notes for the user
// (one sentence each, the lines the CLI prints on stderr after "<command>: "). Both are optional;
// they are called from the calling thread, in the order the events happen.
#pragma once

#include <functional>
#include <string>

namespace scaleplan::api {

template <typename Progress>
struct Callbacks {
  std::function<void(const Progress&)> progress;
  std::function<void(const std::string&)> note;

  void notify(const std::string& text) const {
    if (note) note(text);
  }
};

}  // namespace scaleplan::api
