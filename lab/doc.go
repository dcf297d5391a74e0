// Package lab runs FORGIVE's experiment: for each policy and seed it
// places a topology with an emulation profile on loopback or, with
// Options.Placement "netns", in network namespaces (packages topo and
// netns), starts every trimswitch and forgived (package launch; StartFabric
// does both steps and Fabric.Stop undoes them, also on failure),
// drives the training workload through them (package workload), collects
// the daemons' and switches' counters, and hands the results to package
// report.
//
// With Options.Placement "sim" the same placement's configurations build
// the engines instead (forgivedrv's and trimswitchdrv's parsers, then nic.New and
// switchcore.New), cabled by address, run by package sim on a virtual clock;
// the ranks reach their hosts through package simhost, and the recorder
// reads the engines. Everything else, from the policies to the report, is
// shared.
package lab

import "errors"

// ErrInput marks a bad flag, profile, topology or policy name: nothing was
// started.
var ErrInput = errors.New("lab: bad input")
