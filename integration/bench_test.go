package integration

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/udpio"
)

// BenchmarkOneFlow moves one flow between two forgived daemons through the
// middle of a fabric, measured three times in the same run: through a
// trimswitch process with unshaped links, and through the two references,
// plain UDP forwarders in this process (udpio.Forward, one per direction)
// on batched sockets and on batched sockets with segmentation offload
// (udpio.Options.Offload, as the daemons and trimswitch use). One op is a
// 32 MiB message; goodput is payload bytes delivered per second, and
// cpu-us/pkt what each packet cost the machine (reportCPU). A reference
// that fails (a socket error, a datagram it dropped or truncated, none
// forwarded) fails the benchmark.
//
//	go test ./integration -run '^$' -bench 'OneFlow$' -benchtime 5x
func BenchmarkOneFlow(b *testing.B) {
	for _, mid := range []string{"plain-forwarder", "plain-gso-forwarder", "trimswitch"} {
		b.Run(mid, func(b *testing.B) { benchOneFlow(b, mid) })
	}
}

// BenchmarkSwitchAgainstForwarder moves one flow through two fabrics
// running side by side, one op through each in turns: trimswitch with
// unshaped links, and the plain forwarder with segmentation offload (the
// plain-gso-forwarder of BenchmarkOneFlow). This machine's speed moves
// from one minute to the next by more than the switch's cost; alternating
// op by op weighs on both alike, so the ratio is steadier than either
// figure. It reports each goodput and cost (reportCPU) and ratio-%,
// trimswitch's goodput as a percentage of the forwarder's; a broken
// forwarder fails the benchmark.
//
//	go test ./integration -run '^$' -bench SwitchAgainstForwarder -benchtime 20x -count 6
func BenchmarkSwitchAgainstForwarder(b *testing.B) {
	sw := startOneFlow(b, "trimswitch", nil)
	fw := startOneFlow(b, "plain-gso-forwarder", nil)
	gs, gf := inTurns(b, sw, fw, "switch-", "forwarder-")
	b.ReportMetric(100*gs/gf, "ratio-%")
}

// inTurns times b.N ops through each of two running fabrics, one op
// through each in turns (a first on even ops, c first on odd ones), checks
// both, and reports each fabric's goodput, cost and losses under its
// prefix (prefix+"Gb/s", reportCPU's and reportLoss's). It returns the two
// goodputs.
func inTurns(b *testing.B, a, c *oneFlow, aPrefix, cPrefix string) (ga, gc float64) {
	b.SetBytes(2 * oneFlowSize)
	ad0, cd0 := a.socketDrops(), c.socketDrops()
	b.ResetTimer()
	var ta, tc time.Duration
	var ca, cc cpuTimes
	for i := range b.N {
		if i%2 == 0 {
			ta, ca = a.moveCounted(i, ta, ca)
			tc, cc = c.moveCounted(i, tc, cc)
		} else {
			tc, cc = c.moveCounted(i, tc, cc)
			ta, ca = a.moveCounted(i, ta, ca)
		}
	}
	b.StopTimer()
	ad, cd := a.socketDrops()-ad0, c.socketDrops()-cd0
	a.check()
	c.check()
	ga = float64(b.N) * oneFlowSize * 8 / ta.Seconds() / 1e9
	gc = float64(b.N) * oneFlowSize * 8 / tc.Seconds() / 1e9
	b.ReportMetric(ga, aPrefix+"Gb/s")
	b.ReportMetric(gc, cPrefix+"Gb/s")
	reportCPU(b, aPrefix, ca)
	reportCPU(b, cPrefix, cc)
	// Retransmissions explain a goodput the CPU does not: a sender that
	// outruns its receiver's socket loses packets and waits on its RTO.
	a.reportLoss(aPrefix, ad)
	c.reportLoss(cPrefix, cd)
	return ga, gc
}

// oneFlowSize is one op's message.
const oneFlowSize = 32 << 20

// oneFlowPackets is how many 4 KiB data packets carry one op's message.
const oneFlowPackets = oneFlowSize / 4096

// moveCounted moves op i's message and adds to took and cpu how long it
// took and the CPU time the machine spent meanwhile (machineCPU).
func (f *oneFlow) moveCounted(i int, took time.Duration, cpu cpuTimes) (time.Duration, cpuTimes) {
	c0, err := machineCPU()
	if err != nil {
		f.b.Fatal(err)
	}
	took += f.move(i)
	c1, err := machineCPU()
	if err != nil {
		f.b.Fatal(err)
	}
	return took, cpu.plus(c1.minus(c0))
}

// reportCPU reports what the ops' packets cost the machine, under prefix:
// cpu-us/pkt, the CPU time all cores spent per 4 KiB data packet while
// the fabric moved them (its processes, the kernel's loopback path
// between them, and the benchmark's own polling, which is small);
// ceiling-Gb/s, the goodput at that cost with every core of the machine
// busy; and steal-%, the share of the cores' time meanwhile that the
// hypervisor gave to other machines. The cost leaves out the waits for a
// core, stolen or not, but on a shared host it still moves with what the
// neighbours do to caches and memory (docs/trimswitch.md, "What a packet
// costs"): compare it, like the goodput, within one run.
func reportCPU(b *testing.B, prefix string, cpu cpuTimes) {
	perPkt := cpu.busy.Seconds() * 1e6 / float64(b.N*oneFlowPackets)
	b.ReportMetric(perPkt, prefix+"cpu-us/pkt")
	if perPkt > 0 {
		b.ReportMetric(float64(runtime.NumCPU())/perPkt*1e6*4096*8/1e9, prefix+"ceiling-Gb/s")
	}
	if cpu.all > 0 {
		b.ReportMetric(100*cpu.steal.Seconds()/cpu.all.Seconds(), prefix+"steal-%")
	}
}

// cpuTimes is what /proc/stat's first line says all cores spent, since
// boot or over an interval: busy, in anything but idle, I/O wait and
// steal; steal, waiting while the hypervisor ran another machine; all,
// everything.
type cpuTimes struct{ busy, steal, all time.Duration }

func (c cpuTimes) plus(d cpuTimes) cpuTimes {
	return cpuTimes{c.busy + d.busy, c.steal + d.steal, c.all + d.all}
}

func (c cpuTimes) minus(d cpuTimes) cpuTimes {
	return cpuTimes{c.busy - d.busy, c.steal - d.steal, c.all - d.all}
}

// machineCPU reads the machine's cpuTimes since boot from /proc/stat. The
// kernel counts them in USER_HZ ticks, 100 a second on Linux (its ABI:
// sysconf(_SC_CLK_TCK)); over an op of tens of milliseconds the tick is
// coarse, but the sampling errs as often up as down, so a sum over ops is
// unbiased.
func machineCPU() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPULine(line)
}

// parseCPULine reads /proc/stat's first line, the sum over cores.
func parseCPULine(line string) (cpuTimes, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	const tick = time.Second / 100
	var c cpuTimes
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: field %d of %q: %w", i+1, line, err)
		}
		d := time.Duration(n) * tick
		c.all += d
		switch i {
		case 3, 4: // idle, iowait
		case 7:
			c.steal += d
		default:
			c.busy += d
		}
	}
	return c, nil
}

// oneFlowSocketBuffer is every socket's buffer on the path: twice the
// daemons' 4 MiB window, what forgived takes by default for that window
// (forgivedrv.DefaultSocketBuffer), so that no socket of the switch or of
// a reference drops the window's tail while its reader is descheduled
// (4 MiB holds about 990 lone 4 KiB datagrams, fewer than the window).
const oneFlowSocketBuffer = units.Size(8 << 20)

// benchOneFlow measures one fabric of BenchmarkOneFlow.
func benchOneFlow(b *testing.B, mid string) {
	f := startOneFlow(b, mid, nil)
	b.SetBytes(oneFlowSize)
	drops0 := f.socketDrops()
	b.ResetTimer()
	var took time.Duration
	var cpu cpuTimes
	for i := 0; i < b.N; i++ {
		took, cpu = f.moveCounted(i, took, cpu)
	}
	b.StopTimer()
	drops := f.socketDrops() - drops0
	f.check()
	secs := took.Seconds()
	b.ReportMetric(float64(b.N)*oneFlowSize*8/secs/1e9, "Gb/s")
	b.ReportMetric(float64(b.N)*oneFlowPackets/secs, "pkt/s")
	reportCPU(b, "", cpu)
	f.reportLoss("", drops)
}

// reportLoss reports, per op, what the sender retransmitted and why: its
// retransmission timeouts and the NACKs it received, and the datagrams
// the kernel dropped at the fabric's sockets (drops, counted over the
// timed ops), each metric's name after prefix.
func (f *oneFlow) reportLoss(prefix string, drops int64) {
	fl := f.flow()
	n := float64(f.b.N)
	f.b.ReportMetric(float64(fl.RetxPackets)/n, prefix+"retx/op")
	f.b.ReportMetric(float64(fl.RTOs)/n, prefix+"rtos/op")
	f.b.ReportMetric(float64(fl.NacksRecv)/n, prefix+"nacks/op")
	f.b.ReportMetric(float64(drops)/n, prefix+"sockdrops/op")
}

// oneFlow is a running fabric of two daemons with flow 1 between them and
// a message's memory registered at both ends.
type oneFlow struct {
	b        *testing.B
	mid      string
	c1, c2   *hostapi.Client
	src, dst *hostapi.Region
	// net is the fabric's addresses' prefix ("127.A.B."): every socket
	// of the fabric, daemons, switch ports and reference forwarders,
	// is bound in it.
	net string
	// stopRef stops a reference forwarder and returns what it did (nil
	// through trimswitch); it may be called more than once.
	stopRef func() (udpio.ForwardStats, error)
}

// startOneFlow starts two forgived daemons through mid ("trimswitch",
// "plain-forwarder" or "plain-gso-forwarder"), with more YAML for both daemons' files made in the
// fabric's directory by hostExtra (nil: none).
func startOneFlow(b *testing.B, mid string, hostExtra func(dir string) string) *oneFlow {
	dir := b.TempDir()
	extra := ""
	if hostExtra != nil {
		extra = hostExtra(dir)
	}
	seq := fabricSeq.Add(1)
	net := fmt.Sprintf("127.%d.%d.", 100+os.Getpid()%100, seq)
	addr := func(last, port int) string { return fmt.Sprintf("%s%d:%d", net, last, port) }
	var specs []launch.Spec
	var stopRef func() (udpio.ForwardStats, error)
	switch mid {
	case "trimswitch":
		cfg := fmt.Sprintf(`name: sw
metrics: %s
log_level: warn
socket_buffer: %s
defaults: {rate: 0, delay: 0us, data_queue: 4MiB, trim: ndp}
ports:
  - {name: h1, local: %q, neighbor: %q}
  - {name: h2, local: %q, neighbor: %q}
routes:
  - {dst: [1], ports: [h1]}
  - {dst: [2], ports: [h2]}
`, addr(250, 9464), oneFlowSocketBuffer.String(), addr(101, 4793), addr(1, 4793), addr(102, 4793), addr(2, 4793))
		path := filepath.Join(dir, "sw.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			b.Fatal(err)
		}
		specs = append(specs, launch.Spec{Name: "switch", Path: bins["trimswitch"], Args: []string{"--config", path},
			Ready: launch.HTTPReady("http://" + addr(250, 9464) + "/ready")})
	case "plain-forwarder", "plain-gso-forwarder":
		// One socket per host, at the address the host's config names
		// as its switch port: a host takes datagrams only from that
		// address (foreign_source), so each socket receives what its
		// host sends and sends its host what the other host sent.
		ctx, cancel := context.WithCancel(context.Background())
		var ports [3]*udpio.Conn
		for _, h := range []int{1, 2} {
			c, err := udpio.Listen(addr(100+h, 4793), udpio.Options{Offload: mid == "plain-gso-forwarder",
				RecvBuffer: int(oneFlowSocketBuffer), SendBuffer: int(oneFlowSocketBuffer)})
			if err != nil {
				b.Fatal(err)
			}
			if gso, gro := c.Offload(); mid == "plain-gso-forwarder" && (!gso || !gro) {
				b.Fatalf("the %s has no offload on this kernel (GSO %v, GRO %v)", mid, gso, gro)
			}
			ports[h] = c
		}
		type result struct {
			st  udpio.ForwardStats
			err error
		}
		done := make(chan result, 2)
		for _, h := range []int{1, 2} {
			to := netip.MustParseAddrPort(addr(3-h, 4793))
			go func() {
				st, err := udpio.Forward(ctx, ports[h], ports[3-h], to)
				done <- result{st, err}
			}()
		}
		stop := sync.OnceValues(func() (udpio.ForwardStats, error) {
			cancel()
			var sum udpio.ForwardStats
			var errs []error
			for range 2 {
				r := <-done
				sum.Packets += r.st.Packets
				sum.Bytes += r.st.Bytes
				sum.Truncated += r.st.Truncated
				sum.Dropped += r.st.Dropped
				errs = append(errs, r.err)
			}
			ports[1].Close()
			ports[2].Close()
			return sum, errors.Join(errs...)
		})
		stopRef = stop
		b.Cleanup(func() { _, _ = stop() })
	}
	for _, h := range []int{1, 2} {
		cfg := fmt.Sprintf(`host: %d
listen: %q
switch: %q
socket: %q
log_level: warn
line_rate: 20Gbps
cc: none
reliability: {window: 4MiB, rto_low: 5ms, rto_high: 20ms}
forgive: {enabled: false}
%s`, h, addr(h, 4793), addr(100+h, 4793), filepath.Join(dir, fmt.Sprintf("h%d.sock", h)), extra)
		path := filepath.Join(dir, fmt.Sprintf("h%d.yaml", h))
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			b.Fatal(err)
		}
		specs = append(specs, launch.Spec{Name: fmt.Sprintf("host%d", h), Path: bins["forgived"],
			Args: []string{"--config", path}, Ready: launch.HostAPIReady(filepath.Join(dir, fmt.Sprintf("h%d.sock", h)))})
	}
	g, err := launch.Start(context.Background(), specs, 20*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Stop(10 * time.Second) })
	c1, err := hostapi.Dial(filepath.Join(dir, "h1.sock"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c1.Close() })
	c2, err := hostapi.Dial(filepath.Join(dir, "h2.sock"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c2.Close() })
	ctx := context.Background()
	for _, e := range []struct {
		c    *hostapi.Client
		peer hostapi.HostID
	}{{c1, 2}, {c2, 1}} {
		if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 1, Peer: e.peer, Class: hostapi.ClassOther}); err != nil {
			b.Fatal(err)
		}
	}
	src, err := c1.RegisterMemory(ctx, oneFlowSize)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := c2.RegisterMemory(ctx, oneFlowSize)
	if err != nil {
		b.Fatal(err)
	}
	return &oneFlow{b: b, mid: mid, c1: c1, c2: c2, src: src, dst: dst, net: net, stopRef: stopRef}
}

// move moves op i's message and returns how long it took.
func (f *oneFlow) move(i int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	if err := f.c2.PostRecv(ctx, hostapi.RecvReq{Flow: 1, Region: f.dst.ID(), Length: oneFlowSize, WRID: uint64(i)}); err != nil {
		f.b.Fatal(err)
	}
	if err := f.c1.PostSend(ctx, hostapi.SendReq{Flow: 1, Region: f.src.ID(), Length: oneFlowSize, WRID: uint64(i)}); err != nil {
		f.b.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	comp, err := f.c2.Poll(wctx)
	cancel()
	if err != nil || comp.Status != hostapi.StatusOK {
		f.b.Fatalf("transfer %d through %s: %+v %v; %s", i, f.mid, comp, err, fabricState(f.c1, f.c2))
	}
	return time.Since(start)
}

// flow returns the sender's counters of flow 1.
func (f *oneFlow) flow() hostapi.FlowStats {
	ct, err := f.c1.Counters(context.Background())
	if err != nil {
		f.b.Fatal(err)
	}
	for _, fl := range ct.Flows {
		if fl.Flow == 1 {
			return fl.Values
		}
	}
	f.b.Fatal("no counters for flow 1")
	return hostapi.FlowStats{}
}

// socketDrops sums /proc/net/udp's drops column over the fabric's
// sockets: datagrams the kernel dropped at a full receive buffer before a
// daemon, the switch or a reference forwarder read them. It logs which
// sockets dropped.
func (f *oneFlow) socketDrops() int64 {
	per, err := procUDPDrops(f.net)
	if err != nil {
		f.b.Fatal(err)
	}
	var n int64
	for a, d := range per {
		n += d
		f.b.Logf("%s: socket %v (%s) dropped %d datagrams so far", f.mid, a, f.role(a), d)
	}
	return n
}

// role names the fabric's socket at a.
func (f *oneFlow) role(a netip.AddrPort) string {
	switch a.Addr().As4()[3] {
	case 1:
		return "host 1"
	case 2:
		return "host 2"
	case 101:
		return "the middle's port to host 1"
	case 102:
		return "the middle's port to host 2"
	}
	return "?"
}

// procUDPDrops returns the drops of the sockets in /proc/net/udp whose
// local IPv4 address begins with prefix ("127.A.B."), those with drops
// only.
func procUDPDrops(prefix string) (map[netip.AddrPort]int64, error) {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return nil, err
	}
	out := map[netip.AddrPort]int64{}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 13 {
			continue // the header
		}
		hexIP, hexPort, _ := strings.Cut(f[1], ":")
		raw, err := hex.DecodeString(hexIP)
		port, perr := strconv.ParseUint(hexPort, 16, 16)
		if err != nil || perr != nil || len(raw) != 4 {
			return nil, fmt.Errorf("/proc/net/udp: local address %q", f[1])
		}
		// The kernel prints the network-order word in the machine's order.
		var a [4]byte
		binary.NativeEndian.PutUint32(a[:], binary.BigEndian.Uint32(raw))
		if !strings.HasPrefix(netip.AddrFrom4(a).String(), prefix) {
			continue
		}
		d, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/net/udp: drops %q: %w", f[len(f)-1], err)
		}
		if d > 0 {
			out[netip.AddrPortFrom(netip.AddrFrom4(a), uint16(port))] += d
		}
	}
	return out, nil
}

// check fails the benchmark if either daemon refused a datagram of the
// fabric, or a reference forwarder failed, dropped or truncated a datagram
// or forwarded none: a reference that moves data by another path than the
// one measured (refused datagrams, retransmissions after them) measures
// nothing. It stops the reference forwarder, so it comes after the timed
// ops.
func (f *oneFlow) check() {
	for h, c := range map[int]*hostapi.Client{1: f.c1, 2: f.c2} {
		if ct, err := c.Counters(context.Background()); err != nil || ct.Host.ForeignSource != 0 {
			f.b.Fatalf("host %d refused datagrams of the %s as foreign_source (%v): %s", h, f.mid, err, fabricState(f.c1, f.c2))
		}
	}
	if f.stopRef == nil {
		return
	}
	st, err := f.stopRef()
	if err != nil || st.Dropped != 0 || st.Truncated != 0 || st.Packets < oneFlowSize/4096 {
		f.b.Fatalf("the reference (%s) broke: %v; forwarded %d datagrams, dropped %d, truncated %d; %s",
			f.mid, err, st.Packets, st.Dropped, st.Truncated, fabricState(f.c1, f.c2))
	}
}

// fabricState says what the two daemons of a benchmark moved and refused,
// so that a broken fabric fails with its cause.
func fabricState(c1, c2 *hostapi.Client) string {
	out := ""
	for h, c := range []*hostapi.Client{c1, c2} {
		ct, err := c.Counters(context.Background())
		if err != nil {
			out += fmt.Sprintf("host %d: counters: %v; ", h+1, err)
			continue
		}
		v := ct.Host.Map()
		out += fmt.Sprintf("host %d: tx %d rx %d packets, foreign_source %d, malformed %d, wrong_tag %d; ",
			h+1, v["tx_packets"], v["rx_packets"], v["foreign_source"], v["malformed"], v["wrong_tag"])
	}
	return out
}
