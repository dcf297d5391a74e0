// Package report turns the lab's measurements into what a reader compares
// with the seed: a per-policy summary across seeds, a table in the seed's
// terms, results.json and results.csv, and PNG plots.
//
// What it owns:
//
//   - [Summarize]: fills a results.File's Summary from its Runs. Every
//     relative figure is against the first policy listed, matched seed by
//     seed, as the seed's "Results" section compares every variant with one
//     baseline run on the same random stream.
//   - [Table], [WriteTable]: the two tables forgivectl prints, with one
//     line naming the profile, topology, ranks, steps and seeds above them
//     (every derived parameter with [TableOptions] Verbose) and a legend
//     under them; each change with its margin and a mark when it is
//     within the run-to-run noise.
//   - [WriteJSON], [ReadJSON], [WriteCSV]: the files; [WriteResults]
//     writes all of a sweep's files into its output directory (the JSON,
//     the CSV, the plots and each run's loss pattern); [EarlierResults]
//     and [ClearResults] find and remove what an earlier run left there.
//   - [Shards], [Merge], [CopyPatterns]: the post-processing of a sharded
//     sweep (`forgivectl report merge`): its shards read back, checked to
//     be one sweep, and merged into the results.json the whole sweep run
//     at once would have written, with their loss patterns beside it.
//   - [Plots], [SkippedPlots]: step time, all-reduce CDF, one sender's rate
//     and the bottleneck queue, drawn with gonum.org/v1/plot.
//   - [FillFractions]: the three byte fractions of a run from its counters,
//     so the runner and the documentation share one formula.
//
// docs/results.md documents every field, column and plot.
//
// What it does not own: measuring. It reads a results.File and never starts
// a fabric or runs a sweep. Import rule: report imports lab/results, the standard library
// and gonum.org/v1/plot only; never the engines, the simulator, the
// daemons or the launcher.
package report
