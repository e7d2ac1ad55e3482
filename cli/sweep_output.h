// Output of sweeps over GPU counts (planner/sweep.h), shared by `sweep` and `plan --deadline`:
// the JSON of a point, the text table of points, the deadline search's summary.
// Formatting only: the numbers come from planner::SweepPoint and planner::DeadlineResult.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/json_util.h"
#include "planner/sweep.h"

namespace scaleplan::cli {

// GPU-hours, costs and days for a table: three significant digits below 1000 ("0.278", "41.3"),
// format_count's K/M/B above ("3.38M").
std::string format_amount(double v);

// The columns of `sweep --csv` (one row per point; a subset of sweep_point_json's keys).
std::vector<std::string> sweep_csv_columns(const planner::Budget& budget);

// The table of points: GPUs, gbs, iteration, tokens/s/GPU, MFU, peak memory, with a budget days,
// GPU-hours and cost, the best layout; a point whose best layout's shape changed from the previous
// point is marked with '*' and listed below the table with what changed.
void print_sweep_table(std::FILE* out, const std::vector<planner::SweepPoint>& points,
                       const planner::Budget& budget);

// `plan --deadline`: the deadline, whether and where it is met, and every count tried.
void print_deadline(std::FILE* out, const planner::DeadlineResult& r, double deadline_s,
                    const planner::Budget& budget, int gpus_per_node);

}  // namespace scaleplan::cli
