// The command line's input contract (README "Commands", docs/reliability.md): on bad input, exit 2
// with one message naming the field, never a signal, exit 1 or a hang, and no partial output file.
// Each case is a reproducer of issue 33's mutation campaign (`B` there is the binary).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/cli/cli_runner.h"

namespace {

namespace fs = std::filesystem;
using scaleplan::testing::run_scaleplan;
using scaleplan::testing::RunResult;
using scaleplan::testing::unique_temp_path;

// Bad input: exit 2, one short message on stderr naming `field`, nothing on stdout.
void expect_input_error(const std::string& args, const std::string& field) {
  SCOPED_TRACE(args.substr(0, 200));
  const RunResult r = run_scaleplan(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(field), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 1200u) << "message too long";
  EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 200);
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = unique_temp_path(name);
  std::ofstream(path) << text;
  return path;
}

const std::string kTiny =
    R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
        "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
        "vocab_size": 1024})";

TEST(ReliabilityCli, ValidateRecordsWithMistypedFieldsNameTheField) {
  // Each used to throw nlohmann's type_error in a worker thread: SIGABRT.
  const std::string a = write_file("rec_id.json", R"([{"id": 5, "model": )" + kTiny + "}]");
  expect_input_error("validate " + a, "records[0]: id: expected a string, got 5");
  const std::string b =
      write_file("rec_measured.json", R"([{"model": )" + kTiny + R"(, "measured": 5}])");
  expect_input_error("validate " + b, "records[0]: measured: expected an object, got 5");
  // Without "model": undefined behaviour (garbage values or SIGSEGV after a valid record).
  const std::string c = write_file("rec_nomodel.json", R"([{"id": "x", "cluster": "dgx-h100"}])");
  expect_input_error("validate " + c, "records[0]: model:");
  expect_input_error("memory --validate " + a, "records[0]: id");
  for (const auto& p : {a, b, c}) std::remove(p.c_str());
}

TEST(ReliabilityCli, LongSourcesAndIdsDoNotOverflowTheStack) {
  // std::regex recursed once per character of a record's source (record_month) or id (--match).
  const std::string source(50000, 'a');
  const std::string ok = write_file(
      "rec_source.json",
      R"([{"id": "long", "source": ")" + source + R"( arXiv:2205.05198", "model": )" + kTiny +
          R"(, "cluster": "dgx-h100", "gpus": 8, "seq_len": 512, "layout": "tp=8,gbs=8",
              "measured": {"status": "ok", "sec_per_iter": 0.1}}])");
  const RunResult r = run_scaleplan("validate " + ok + " --json --quiet --match long");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string long_id =
      write_file("rec_longid.json",
                 R"([{"id": ")" + std::string(50000, 'x') + R"(", "model": )" + kTiny + "}]");
  expect_input_error("validate " + long_id + " --match 'x+'", "id: 50000 characters, at most 256");
  std::remove(ok.c_str());
  std::remove(long_id.c_str());
}

TEST(ReliabilityCli, DeepJsonIsRefusedOnEveryInput) {
  // print('['*100000+']'*100000): SIGSEGV through recursive json::dump() in error messages.
  const std::string deep =
      write_file("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  expect_input_error("model --model " + deep, "nested deeper than 128 levels");
  expect_input_error("cluster show " + deep, "nested deeper than 128 levels");
  expect_input_error("validate " + deep, "nested deeper than 128 levels");
  const std::string big = write_file("big_number.json", R"({"hidden_size": 1e309})");
  expect_input_error("model --model " + big, "malformed JSON");
  std::remove(deep.c_str());
  std::remove(big.c_str());
}

TEST(ReliabilityCli, ThreadCountsAndAbsurdPlansAreRefusedUpFront) {
  const std::string job = "plan --model llama-tiny --cluster dgx-h100 --seq 1024 -q ";
  // length_error in a worker (abort); dp = 0 (SIGFPE); dp = -1 with "fits": true and exit 0;
  // a divisor loop of ~3e9 iterations.
  expect_input_error(job + "--gpus 2147483648 --gbs 1099511627776",
                     "--gpus 2147483648 is more than the 1048576");
  expect_input_error(job + "--gpus 1099511627776 --gbs 16", "1048576");
  expect_input_error(job + "--gpus 4294967295 --gbs 16", "1048576");
  expect_input_error(job + "--gpus 4611686018427387904 --gbs 16", "1048576");
  // Thread creation failed while joinable threads unwound: abort.
  expect_input_error(job + "--gpus 8 --gbs 16 --threads 100000", "--threads: 100000");
  expect_input_error(job + "--gpus 8 --gbs 16 --train-tokens -5", "--train-tokens");
  const std::string recs = write_file("rec_threads.json", R"([{"model": )" + kTiny + "}]");
  expect_input_error("validate " + recs + " --threads 100000", "--threads: 100000");
  std::remove(recs.c_str());
}

TEST(ReliabilityCli, ProfileCountsBeyondIntAreRefused) {
  // gpus_per_node 2^32 became 0 and divided by zero (SIGFPE) in `collective` and `simulate`.
  const std::string p =
      write_file("gpn.json", R"({"extends": "dgx-h100", "node": {"gpus_per_node": 4294967296}})");
  expect_input_error("collective --cluster " + p + " --op all_reduce --ranks 8 --bytes 1GiB",
                     "gpus_per_node: 4294967296 is too large");
  expect_input_error("simulate --model llama-tiny --cluster " + p + " --seq 512 --layout tp=8",
                     "gpus_per_node");
  const std::string bw = write_file(
      "bw.json", R"({"extends": "dgx-h100", "network": {"nic_bandwidth": "1e-300Gb/s"}})");
  expect_input_error("simulate --model llama-tiny --cluster " + bw + " --seq 512 --layout tp=8",
                     "nic_bandwidth: '1e-300Gb/s' is below 0.1 B/s");
  const std::string lat = write_file(
      "lat.json", R"({"extends": "dgx-h100", "cost_model": {"network_step_latency": "1e7s"}})");
  expect_input_error("simulate --model llama-tiny --cluster " + lat + " --seq 512 --layout tp=8",
                     "network_step_latency");
  for (const auto& f : {p, bw, lat}) std::remove(f.c_str());
}

TEST(ReliabilityCli, UnboundedWorkIsRefusedWithTheLimit) {
  const std::string layers = write_file(
      "layers.json", R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
        "num_hidden_layers": 1000000, "num_attention_heads": 8, "vocab_size": 1024})");
  expect_input_error("simulate --model " + layers + " --cluster dgx-h100 --seq 512 --layout tp=1",
                     "num_hidden_layers: 1000000 is too large (at most 4096)");
  const std::string vocab = write_file(
      "vocab.json", R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
        "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 4611686018427387904})");
  expect_input_error("memory --model " + vocab + " --cluster dgx-h100 --seq 512 --layout tp=1",
                     "vocab_size");
  expect_input_error("collective --cluster dgx-h100 --op all_reduce --ranks 8 --sweep 1B:8191PiB",
                     "--sweep: '8191PiB' is more than 1 EiB");
  expect_input_error("collective --cluster dgx-h100 --op all_reduce --ranks 8 --sweep 1B:1GiB:2x",
                     "--sweep: factor '2x'");
  expect_input_error(
      "collective --cluster dgx-h100 --op all_reduce --ranks 2147483647 --bytes 1GiB",
      "--ranks: 2147483647");
  expect_input_error(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 2147483647 --layout tp=1",
      "sequence length 2147483647");
  expect_input_error(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 4611686018427387904 --layout tp=1",
      "4611686018427387904");
  // 1.45 GB of trace at 128 GPUs; 16,384 GPUs exhausted memory.
  const std::string trace = unique_temp_path("all_ranks_trace.json");
  expect_input_error(
      "simulate --model llama3-8b --cluster dgx-h100 --seq 4096 --all-ranks --trace " + trace +
          " --layout tp=8,pp=4,dp=512,gbs=4096",
      "layer passes, more than the");
  EXPECT_FALSE(fs::exists(trace));
  // Time saturated at INT64_MAX picoseconds: iteration_s 9223370.9, MFU 1.9, exit 0.
  expect_input_error(
      "simulate --model llama3.1-405b --cluster dgx-h100 --seq 131072 --layout "
      "tp=8,pp=16,cp=8,gbs=32767",
      "layout:");
  for (const auto& f : {layers, vocab}) std::remove(f.c_str());
}

TEST(ReliabilityCli, AnIterationPastTheClocksRangeIsRefusedNotSaturated) {
  // A calibrated kernel model at one second per FLOP makes every GEMM longer than the int64
  // picosecond clock holds (~106 days); times saturate (core/units.h) and the simulation refuses
  // the result instead of printing iteration_s 9223370.9 and an MFU above 1.
  const std::string slow = write_file("slow_kernels.json", R"({"extends": "dgx-h100",
    "calibration": {"format": 1, "backend": "test",
      "gemm": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1,
               "seconds_per_padded_flop": 0, "seconds_per_byte": 0}, "samples": 8},
      "attention_forward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1,
               "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8},
      "attention_backward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1,
               "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8},
      "memory_bound": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 0,
               "seconds_per_byte": 1}, "samples": 8}}})");
  expect_input_error("simulate --model llama-tiny --cluster " + slow + " --seq 512 --layout tp=1",
                     "past the range of the simulated clock");
  std::remove(slow.c_str());
}

TEST(ReliabilityCli, FilesThatAreNotRegularOrCannotExistAreInputErrors) {
  // --model /dev/zero read for ever; a FIFO blocked for ever.
  expect_input_error("model --model /dev/zero", "/dev/zero: not a regular file");
  const std::string fifo = unique_temp_path("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_input_error("model --model " + fifo, "not a regular file");
  std::remove(fifo.c_str());
  // std::filesystem threw for names over 255 characters and for symbolic-link loops: exit 1.
  const std::string name = "/tmp/" + std::string(300, 'n') + ".json";
  expect_input_error("model --model " + name, "cannot open file");
  expect_input_error("simulate --model llama-tiny --seq 512 --layout tp=1 --cluster " + name,
                     "cluster '");
  const std::string loop = unique_temp_path("loop.json");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  expect_input_error("cluster show " + loop, "loop.json");
  std::remove(loop.c_str());
}

TEST(ReliabilityCli, MessagesQuoteTheValueBriefly) {
  // A 100 KB value used to be echoed back whole; a zero memory said "must be positive" only.
  expect_input_error("simulate --model llama-tiny --cluster dgx-h100 --seq 512 --layout tp=" +
                         std::string(100000, '7'),
                     "layout: tp=");
  const std::string mem =
      write_file("mem0.json", R"({"extends": "dgx-h100", "gpu": {"memory": "0GiB"}})");
  expect_input_error("cluster show " + mem, "gpu: memory: must be positive, got 0");
  std::remove(mem.c_str());
}

TEST(ReliabilityCli, ImportNcclRefusesRowsItCouldNotWriteBack) {
  // nan, inf, negative and zero sizes were fitted into a profile `cluster show` then rejected.
  const std::string log =
      write_file("nan.log",
                 "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                 "8 2 float sum -1 nan 0.1 0.1 0 1 1 1 0\n");
  const std::string out = unique_temp_path("nan_profile.json");
  expect_input_error("cluster import-nccl dgx-h100 --log " + log + " --out " + out, "line 2");
  EXPECT_FALSE(fs::exists(out));  // no partial output
  std::remove(log.c_str());
}

TEST(ReliabilityCli, OutputsNeverReplaceALinkOrADevice) {
  // rename() replaced a symbolic link at the target, and as root `--trace /dev/null` would have
  // replaced /dev/null.
  const std::string victim = write_file("victim.txt", "keep");
  const std::string link = unique_temp_path("trace_link.json");
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  const std::string sim = "simulate --model llama-tiny --cluster dgx-h100 --seq 512 --layout tp=1 ";
  expect_input_error(sim + "--trace " + link, "not a regular file (a symbolic link)");
  EXPECT_TRUE(fs::is_symlink(link));
  std::ifstream in(victim);
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "keep");
  expect_input_error(sim + "--trace /dev/null", "not a regular file");
  std::remove(link.c_str());
  std::remove(victim.c_str());
}

TEST(ReliabilityCli, ProfileResumeRefusesAMistypedPartial) {
  // `profile --resume` read OUT.partial's fields with get<>(): exit 1 with nlohmann's text.
  const std::string out = unique_temp_path("host_profile.json");
  std::ofstream(out + ".partial")
      << R"({"backend": "host", "quick": true, "done": [1, 2], "measurements": {}})";
  expect_input_error("profile --backend host --quick --resume --out " + out,
                     "done: expected point names, got 1");
  EXPECT_FALSE(fs::exists(out));
  std::remove((out + ".partial").c_str());
}

}  // namespace
