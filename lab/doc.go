// Package lab runs FORGIVE's experiment on real processes: for each policy
// and seed it places a topology on loopback with an emulation profile
// (package topo), starts every trimswitch and forgived (package launch),
// drives the training workload through them (package workload), collects
// the daemons' and switches' counters, and hands the results to package
// report.
package lab

import "errors"

// ErrInput marks a bad flag, profile, topology or policy name: nothing was
// started.
var ErrInput = errors.New("lab: bad input")
