package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/lab/launch"
)

// The loopback fabric of docs/life-of-a-packet.md runs as the page runs
// it: its three files, moved to this test's own /24 and directory, start;
// the file the page sends goes from host 2 to host 1 with forgivectl and
// arrives verified; and the switch trimmed and marked packets on port h1,
// as the page says a transfer through its 100 Mb/s egress behind 1 Gb/s
// hosts does (stages 7 and 8).
func TestLifeOfAPacketFabric(t *testing.T) {
	const pageDir, pageNet, pageSock = "../docs/life-of-a-packet/", "127.0.9.", "/tmp/forgive-host"
	page, err := os.ReadFile("../docs/life-of-a-packet.md")
	if err != nil {
		t.Fatal(err)
	}
	net := fmt.Sprintf("127.%d.%d.", 100+os.Getpid()%100, fabricSeq.Add(1))
	dir := t.TempDir()
	paths := map[string]string{}
	for _, name := range []string{"switch", "host1", "host2"} {
		b, err := os.ReadFile(pageDir + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(page, []byte("--config docs/life-of-a-packet/"+name+".yaml")) {
			t.Errorf("the page starts no daemon with %s.yaml", name)
		}
		if !bytes.Contains(b, []byte(pageNet)) {
			t.Fatalf("%s.yaml has no address in %s0/24: the test no longer moves it", name, pageNet)
		}
		b = bytes.ReplaceAll(b, []byte(pageNet), []byte(net))
		b = bytes.ReplaceAll(b, []byte(pageSock), []byte(filepath.Join(dir, "host")))
		paths[name] = filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(paths[name], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := func(h int) string { return filepath.Join(dir, fmt.Sprintf("host%d.sock", h)) }
	metrics := "http://" + net + "100:9464"
	logTo := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	specs := []launch.Spec{{Name: "switch", Path: bins["trimswitch"], Args: []string{"--config", paths["switch"]},
		Log: logTo("switch"), Ready: launch.HTTPReady(metrics + "/ready")}}
	for h := 1; h <= 2; h++ {
		name := fmt.Sprintf("host%d", h)
		specs = append(specs, launch.Spec{Name: name, Path: bins["forgived"], Args: []string{"--config", paths[name]},
			Log: logTo(name), Ready: launch.HostAPIReady(sock(h))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := launch.Start(ctx, specs, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping the fabric: %v", err)
		}
	})

	const file = "docs/results/two-jobs/sim-8/results.json" // the page's, from the repository's root
	if !bytes.Contains(page, []byte("send "+file+" --peer 1")) {
		t.Fatalf("the page does not send %s", file)
	}
	out := filepath.Join(dir, "received")
	var recvOut bytes.Buffer
	recv := exec.Command(bins["forgivectl"], "--socket", sock(1), "recv", "--peer", "2", "--out", out, "--wait", "1m")
	recv.Stdout, recv.Stderr = &recvOut, &recvOut
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = recv.Process.Kill(); _ = recv.Wait() })
	send := exec.Command(bins["forgivectl"], "--socket", sock(2), "send", "../"+file, "--peer", "1", "--wait", "1m")
	if b, err := send.CombinedOutput(); err != nil {
		t.Fatalf("send: %v\n%s", err, b)
	}
	if err := recv.Wait(); err != nil || !strings.Contains(recvOut.String(), "SHA-256 verified") {
		t.Fatalf("recv: %v\n%s", err, recvOut.String())
	}
	want, err := os.ReadFile("../" + file)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the received file is not the one sent (%v)", err)
	}
	trimmed := metric(t, metrics+"/metrics", "trimswitch_trimmed_packets_total", `port="h1"`)
	marked := metric(t, metrics+"/metrics", "trimswitch_marked_packets_total", `port="h1"`)
	if trimmed == 0 || marked == 0 {
		t.Errorf("port h1 trimmed %v and marked %v packets of a %d-byte transfer; want both, as the page says", trimmed, marked, len(want))
	}
	t.Logf("%d bytes; port h1 trimmed %v packets, marked %v", len(want), trimmed, marked)
}
