// `scaleplan run`: the command end to end on the host backend, in one process and under mpirun
// (one rank per process, the host backend's collectives over MPI), and its failure paths: a rank
// that never arrives or a process that is killed ends the run within the timeout, exit 1, no
// output file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/cli_runner.h"

namespace {

using scaleplan::testing::run_scaleplan;
using scaleplan::testing::RunResult;
using scaleplan::testing::unique_temp_path;
using Clock = std::chrono::steady_clock;

// mpirun, as CI runs it. OpenMPI does not free its components' and hwloc's allocations at
// MPI_Finalize, so in the sanitizer build (docs/reliability.md) every rank would report them as
// leaks: the ranks it starts run with leak detection off. The executor's own code is leak-checked
// by the in-process tests, which run the same ranks as threads.
const std::string kMpirun = [] {
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string options =
      (asan != nullptr && *asan != '\0' ? std::string(asan) + ":" : "") + "detect_leaks=0";
  return "env ASAN_OPTIONS=" + options +
         " mpirun --allow-run-as-root --oversubscribe --bind-to none";
}();

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

RunResult run_mpi(int np, const std::string& args) {
  // cli_runner prepends the binary; mpirun goes in front of it through a shell wrapper.
  const std::string err = unique_temp_path("mpi_stderr");
  const std::string cmd =
      kMpirun + " -np " + std::to_string(np) + " " + SCALEPLAN_BINARY + " " + args + " 2>" + err;
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  std::remove(err.c_str());
  return r;
}

// What every run must show in its --json: each op of the Program ran once per step (warm-up
// included), each rank checked every collective of more than one member and every receive it
// has, and the memory both sides count (model states, activations) is within 10% of the model.
void expect_faithful(const nlohmann::json& j, int processes, int steps_total) {
  EXPECT_EQ(j["processes"], processes);
  EXPECT_EQ(j["op_runs"]["min"], steps_total);
  EXPECT_EQ(j["op_runs"]["max"], steps_total);
  std::map<int64_t, int64_t> expected;
  for (const auto& op : j["ops"]) {
    const std::string kind = op["kind"];
    if (kind == "recv" || (kind == "collective" && !op["class"].get<std::string>().empty()))
      ++expected[op["rank"].get<int64_t>()];
  }
  for (const auto& m : j["memory"]) {
    EXPECT_EQ(m["checked"], expected[m["rank"].get<int64_t>()]) << "rank " << m["rank"];
    EXPECT_LT(std::abs(m["states_activations_error"].get<double>()), 0.10) << m.dump();
  }
}

constexpr const char* kTiny = "--cluster dgx-h100 --seq 64 --warmup 1 --steps 1 --timeout 30 -q";

TEST(RunCli, JsonAndTraceDescribeTheRunAndMatchTheSimulationOpForOp) {
  const std::string measured = unique_temp_path("run_trace.json");
  const std::string predicted = unique_temp_path("sim_trace.json");
  const std::string layout = "--model llama-tiny --layout tp=2,pp=2,gbs=4 ";
  RunResult r = run_scaleplan("run " + layout + kTiny + " --json --trace " + measured);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k :
       {"model", "cluster", "seq", "layout", "framework", "backend", "device", "steps", "warmup",
        "measured", "predicted", "iteration_error", "op_classes", "memory", "ops"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["model"], "llama-tiny");
  EXPECT_EQ(j["gpus"], 4);
  // dgx-h100 is not calibrated on this machine: the prediction says so.
  EXPECT_EQ(j["predicted"]["calibrated_backend"], "");
  expect_faithful(j, 1, 2);
  // tokens/s is the global batch's tokens over the measured median iteration.
  EXPECT_NEAR(j["measured"]["tokens_per_s"].get<double>(),
              4.0 * 64 / j["measured"]["iteration_s"].get<double>(), 1e-6);

  ASSERT_EQ(run_scaleplan("simulate " + layout +
                          "--cluster dgx-h100 --seq 64 --all-ranks --trace " + predicted)
                .exit_code,
            0);
  auto load = [](const std::string& path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f);
  };
  const auto mt = load(measured), pt = load(predicted);
  EXPECT_EQ(mt["otherData"]["generator"], "scaleplan run");
  EXPECT_EQ(pt["otherData"]["generator"], "scaleplan simulate");
  for (const auto& t : {mt, pt}) {
    EXPECT_EQ(t["otherData"]["model"], "llama-tiny");
    EXPECT_EQ(t["otherData"]["seq"], 64);
  }
  EXPECT_EQ(mt["otherData"]["steps"], 1);
  // Every op the simulation draws is in the measured trace under the same id and name, on the
  // same rank and stream.
  std::map<int64_t, nlohmann::json> by_id;
  for (const auto& e : mt["traceEvents"]) {
    if (e["ph"] == "X") by_id[e["args"]["op"].get<int64_t>()] = e;
  }
  int matched = 0;
  for (const auto& e : pt["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const auto it = by_id.find(e["args"]["op"].get<int64_t>());
    ASSERT_NE(it, by_id.end()) << e.dump();
    EXPECT_EQ(it->second["name"], e["name"]);
    EXPECT_EQ(it->second["pid"], e["pid"]);
    EXPECT_EQ(it->second["tid"], e["tid"]);
    ++matched;
  }
  EXPECT_GT(matched, 100);
  std::remove(measured.c_str());
  std::remove(predicted.c_str());
}

// `run --plan` executes the plan's own layout on the plan's model and sequence, and a plan's
// field given again on the command line is an error naming the option.
TEST(RunCli, PlanFileRunsItsLayout) {
  const std::string plan = unique_temp_path("run.plan.json");
  ASSERT_EQ(run_scaleplan("plan --model llama-tiny --cluster dgx-h100 --gpus 2 --seq 64 --gbs 2 "
                          "--top 1 -q --emit json --out " +
                          plan)
                .exit_code,
            0);
  std::ifstream in(plan);
  const auto file = nlohmann::json::parse(in);
  const RunResult r =
      run_scaleplan("run --plan " + plan + " --warmup 1 --steps 1 --timeout 30 -q --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layout"], file["layout"]);
  EXPECT_EQ(j["model"], "llama-tiny");
  EXPECT_EQ(j["seq"], 64);
  EXPECT_EQ(j["gpus"], 2);
  expect_faithful(j, 1, 2);
  const RunResult both = run_scaleplan("run --plan " + plan + " --layout tp=2 -q");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--layout"), std::string::npos) << both.err;
  std::remove(plan.c_str());
}

TEST(RunCli, BadInputExitsTwoWithOneMessage) {
  const std::string trace = unique_temp_path("bad_trace.json");
  for (const std::string& args : {std::string("--model llama-tiny --layout tp=2 --steps 0 "),
                                  std::string("--model llama-tiny --layout tp=2 --backend tpu "),
                                  std::string("--model llama-tiny --layout tp=3 "),
                                  std::string("--model no-such-model --layout tp=2 ")}) {
    const RunResult r =
        run_scaleplan("run " + args + "--cluster dgx-h100 --seq 64 -q --trace " + trace);
    EXPECT_EQ(r.exit_code, 2) << args << r.err;
    EXPECT_NE(r.err.find("scaleplan run: error:"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(trace)) << args;
  }
}

// A model whose memory the host cannot hold is an input error before anything is allocated
// (Llama-3-70B's 16 bytes per parameter over tp=2: about 560 GB per rank), not an out-of-memory
// kill halfway through.
TEST(RunCli, ModelTooLargeForTheHostIsAnInputError) {
  const std::string trace = unique_temp_path("big_trace.json");
  const RunResult r = run_scaleplan(
      "run --model llama3-70b --layout tp=2,gbs=2 --cluster dgx-h100 --seq 128 -q --trace " +
      trace);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("GiB of host memory for the 2 rank(s)"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(std::filesystem::exists(trace));
}

TEST(RunCli, RankThatNeverArrivesTimesOutNamingTheOpRankAndGroup) {
  const std::string trace = unique_temp_path("stall_trace.json");
  const auto t0 = Clock::now();
  const RunResult r = run_scaleplan(
      "run --model llama-tiny --layout tp=2,gbs=2 --cluster dgx-h100 --seq 64 --timeout 2 -q "
      "--inject-stall 1 --trace " +
      trace);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(seconds, 20);
  // "rank 0: embed.sp_rs (op 3, reduce_scatter of 32.0 KiB over tp group 0: global ranks 0,1) on
  // global rank 0: timed out after 2 s waiting for global rank(s) 1 (1 of 2 members arrived)"
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tp group 0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("waiting for global rank(s) 1"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
  EXPECT_TRUE(r.out.empty());
}

// One process per rank: the parallelisms of the executor's own tests, over MPI.
class RunMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not found (scripts/setup.sh installs openmpi-bin)";
  }
  void expect_runs(int np, const std::string& model, const std::string& layout) {
    const RunResult r =
        run_mpi(np, "run --model " + model + " --layout " + layout + " " + kTiny + " --json");
    ASSERT_EQ(r.exit_code, 0) << layout << "\n" << r.err;
    expect_faithful(nlohmann::json::parse(r.out), np, 2);
  }
};

TEST_F(RunMpi, TensorAndSequenceParallelOnTwoProcesses) {
  expect_runs(2, "llama-tiny", "tp=2,sp=off,gbs=2");
  expect_runs(2, "llama-tiny", "tp=2,sp=on,gbs=2");
}

TEST_F(RunMpi, PipelineSchedulesOnTwoProcesses) {
  for (const char* s : {"1f1b", "interleaved", "zb-h1", "zb-v"})
    expect_runs(2, "llama-tiny", std::string("pp=2,gbs=4,schedule=") + s);
}

TEST_F(RunMpi, ZeroStagesContextAndExpertParallelOnTwoProcesses) {
  for (const char* z : {"1", "2", "3"})
    expect_runs(2, "llama-tiny", std::string("dp=2,gbs=2,zero=") + z);
  expect_runs(2, "llama-tiny", "cp=2,gbs=1");
  expect_runs(2, "mixtral-tiny", "dp=2,ep=2,gbs=2");
}

TEST_F(RunMpi, TwoDimensionalLayoutsOnFourProcesses) {
  expect_runs(4, "llama-tiny", "tp=2,pp=2,gbs=4,schedule=interleaved");
  expect_runs(4, "llama-tiny", "tp=2,dp=2,zero=1,gbs=2");
  expect_runs(4, "llama-tiny", "cp=2,dp=2,zero=3,gbs=2");
  expect_runs(4, "mixtral-tiny", "dp=4,ep=2,gbs=4");
}

TEST_F(RunMpi, ProcessThatNeverArrivesEndsTheOthersWithAClearMessage) {
  const std::string trace = unique_temp_path("mpi_stall_trace.json");
  const auto t0 = Clock::now();
  const RunResult r = run_mpi(2,
                              "run --model llama-tiny --layout tp=2,gbs=2 --cluster dgx-h100 "
                              "--seq 64 --timeout 3 -q --inject-stall 1 --trace " +
                                  trace);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(seconds, 30);
  EXPECT_NE(r.err.find("timed out after 3 s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tp group 0"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
}

TEST_F(RunMpi, KilledProcessEndsTheRun) {
  const std::string trace = unique_temp_path("mpi_kill_trace.json");
  const std::string err = unique_temp_path("mpi_kill_stderr");
  const std::string cmd = kMpirun + " -np 2 " + SCALEPLAN_BINARY +
                          " run --model llama-tiny --layout tp=2,gbs=2 --cluster dgx-h100 "
                          "--seq 64 --steps 100000 --timeout 5 -q --trace " +
                          trace + " >/dev/null 2>" + err;
  const pid_t mpirun = fork();
  ASSERT_GE(mpirun, 0);
  if (mpirun == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // The ranks are mpirun's children: wait until both run, then kill one.
  auto children = [&] {
    std::vector<pid_t> pids;
    for (const auto& d : std::filesystem::directory_iterator("/proc")) {
      const std::string name = d.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(d.path() / "stat");
      std::string pid, comm, state;
      pid_t ppid = 0;
      if (stat >> pid >> comm >> state >> ppid && ppid == mpirun) pids.push_back(std::stoi(pid));
    }
    return pids;
  };
  std::vector<pid_t> ranks;
  for (int i = 0; i < 200 && ranks.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ranks = children();
  }
  ASSERT_EQ(ranks.size(), 2u);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // both are inside their steps
  const auto t0 = Clock::now();
  ASSERT_EQ(kill(ranks[1], SIGKILL), 0);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(mpirun, &status, WNOHANG)) == 0 &&
         Clock::now() - t0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (done == 0) {
    kill(mpirun, SIGKILL);
    waitpid(mpirun, &status, 0);
    FAIL() << "the run did not end within 60 s of a rank's death";
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(seconds, 5 + 10);  // within the timeout (and mpirun's own teardown)
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(std::filesystem::exists(trace));
  // The message says which rank went away: the launcher notices its child's death at once
  // (OpenMPI: "process rank 1 with PID ... exited on signal 9 (Killed)") and ends the survivor,
  // well before the survivor's own timeout would name the op and group.
  std::ifstream e(err);
  const std::string message((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  std::remove(err.c_str());
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
}

}  // namespace
