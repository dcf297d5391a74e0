// Package lab runs FORGIVE's experiment: a sweep of policies x seeds x
// options, each run one job shape (one job, or a pair of jobs on one
// fabric) over a placed fabric. It owns the inputs and their checks
// (options, check, the policy catalogue), the one run path (run.go's
// runOne over a placement: real processes on loopback or in network
// namespaces, or the engines in the simulator, placement.go), the
// recorder (record.go), and the sweep's plumbing (sweep, worker,
// progress).
//
// It never brings a fabric up itself (package fabric does, for
// `forgivectl topo up` too), analyses a loss pattern (package pattern),
// writes or merges the results' files (package report) or opens a
// profile or topology by name (package topo).
package lab

import "errors"

// ErrInput marks a bad flag, profile, topology or policy name: nothing was
// started.
var ErrInput = errors.New("lab: bad input")
