// Package k8s holds the Kubernetes manifests of docs/cluster.md and the
// tests that decode them into the Kubernetes API's types and hold them to
// the daemons they run. It is a module of its own, so that k8s.io/api
// stays out of the emulator's.
package k8s

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// Namespace is where every namespaced object lives.
const Namespace = "forgive"

// manifests are every object of every manifest under this directory,
// decoded strictly into its API type: an unknown or duplicate field, a
// value of the wrong type or a kind the tests do not know fails.
type manifests struct {
	namespaces []*corev1.Namespace
	configMaps map[string]*corev1.ConfigMap
	daemonSets []*appsv1.DaemonSet
	deploys    []*appsv1.Deployment
	jobs       map[string]*batchv1.Job
	pods       []*corev1.Pod
	pvcs       map[string]*corev1.PersistentVolumeClaim
	files      map[string]string // object "Kind/name" -> its file
}

// shardLine is lab --dry-run's line naming the shard's runs.
var shardLine = regexp.MustCompile(`shard (\d+)/(\d+), (\d+) of (\d+) runs`)

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func load(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}, jobs: map[string]*batchv1.Job{},
		pvcs: map[string]*corev1.PersistentVolumeClaim{}, files: map[string]string{}}
	var files []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSeparator.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			where := fmt.Sprintf("%s, document %d", f, i+1)
			obj, err := decode([]byte(doc))
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			m.add(t, where, obj)
		}
	}
	return m
}

func stripComments(doc string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// decode reads a document's apiVersion and kind, then the whole document
// strictly into that kind's type.
func decode(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		obj = &corev1.Namespace{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Pod":
		obj = &corev1.Pod{}
	case "v1 PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	case "apps/v1 DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "batch/v1 Job":
		obj = &batchv1.Job{}
	default:
		return nil, fmt.Errorf("apiVersion %q kind %q: not a kind these manifests use", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

func (m *manifests) add(t *testing.T, where string, obj any) {
	t.Helper()
	meta := obj.(metav1.ObjectMetaAccessor).GetObjectMeta()
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	key := kind + "/" + meta.GetName()
	if prev, ok := m.files[key]; ok {
		t.Errorf("%s: %s again (first in %s)", where, key, prev)
	}
	m.files[key] = where
	if meta.GetName() == "" {
		t.Errorf("%s: %s without a name", where, kind)
	}
	if _, ok := obj.(*corev1.Namespace); !ok && meta.GetNamespace() != Namespace {
		t.Errorf("%s: %s in namespace %q, want %q", where, key, meta.GetNamespace(), Namespace)
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		m.namespaces = append(m.namespaces, o)
	case *corev1.ConfigMap:
		m.configMaps[o.Name] = o
	case *corev1.Pod:
		m.pods = append(m.pods, o)
	case *corev1.PersistentVolumeClaim:
		m.pvcs[o.Name] = o
	case *appsv1.DaemonSet:
		m.daemonSets = append(m.daemonSets, o)
	case *appsv1.Deployment:
		m.deploys = append(m.deploys, o)
	case *batchv1.Job:
		m.jobs[o.Name] = o
	}
}

// Every manifest decodes strictly, every object is in the namespace the
// manifests create, and every workload's selector selects its pods.
func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	if len(m.namespaces) != 1 || m.namespaces[0].Name != Namespace {
		t.Errorf("want the one namespace %q, got %d", Namespace, len(m.namespaces))
	}
	if len(m.daemonSets) != 1 || len(m.deploys) == 0 || len(m.jobs) != 2 || len(m.pods) != 1 {
		t.Fatalf("%d DaemonSets, %d Deployments, %d Jobs, %d Pods: want 1, at least 1, 2, 1", len(m.daemonSets), len(m.deploys), len(m.jobs), len(m.pods))
	}
	selects := func(what string, sel *metav1.LabelSelector, labels map[string]string) {
		if sel == nil || len(sel.MatchLabels) == 0 {
			t.Errorf("%s: no selector", what)
			return
		}
		for k, v := range sel.MatchLabels {
			if labels[k] != v {
				t.Errorf("%s: selector %s=%s does not select its pods (%v)", what, k, v, labels)
			}
		}
	}
	for _, d := range m.daemonSets {
		selects("DaemonSet/"+d.Name, d.Spec.Selector, d.Spec.Template.Labels)
	}
	for _, d := range m.deploys {
		selects("Deployment/"+d.Name, d.Spec.Selector, d.Spec.Template.Labels)
	}
	// Unknown fields do fail: the decoder is strict.
	if _, err := decode([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndatta: {}\n")); err == nil || !strings.Contains(err.Error(), "datta") {
		t.Errorf("an unknown field decoded: %v", err)
	}
	if _, err := decode([]byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec: {template: {spec: {hostNetwrk: true}}}\n")); err == nil || !strings.Contains(err.Error(), "hostNetwrk") {
		t.Errorf("an unknown nested field decoded: %v", err)
	}
}

// container returns the pod spec's only container.
func container(t *testing.T, what string, spec *corev1.PodSpec) *corev1.Container {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", what, len(spec.Containers))
	}
	return &spec.Containers[0]
}

// configFile is the file a container's --config names and the ConfigMap
// key and volume behind it; $(NODE_NAME) stays in the name.
func configFile(t *testing.T, m *manifests, what string, spec *corev1.PodSpec, c *corev1.Container) (string, *corev1.ConfigMap) {
	t.Helper()
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("%s: args %q name no --config", what, c.Args)
	}
	file := c.Args[i+1]
	var mount *corev1.VolumeMount
	for j := range c.VolumeMounts {
		if c.VolumeMounts[j].MountPath == path.Dir(file) {
			mount = &c.VolumeMounts[j]
		}
	}
	if mount == nil {
		t.Fatalf("%s: --config %s: no volume mounted at %s", what, file, path.Dir(file))
	}
	for _, v := range spec.Volumes {
		if v.Name == mount.Name {
			if v.ConfigMap == nil {
				t.Fatalf("%s: volume %s is not a ConfigMap", what, v.Name)
			}
			cm := m.configMaps[v.ConfigMap.Name]
			if cm == nil {
				t.Fatalf("%s: ConfigMap %s: not in the manifests", what, v.ConfigMap.Name)
			}
			return path.Base(file), cm
		}
	}
	t.Fatalf("%s: no volume %s", what, mount.Name)
	return "", nil
}

// checkProbesAndPorts: the pod is on the host network; Prometheus is told
// to scrape the metrics port; the readiness probe asks that port for
// /ready and the liveness probe for /healthz; the port is declared as the
// container's (and the host's) TCP port.
func checkProbesAndPorts(t *testing.T, what string, tmpl *corev1.PodTemplateSpec, c *corev1.Container, metrics netip.AddrPort) {
	t.Helper()
	if !tmpl.Spec.HostNetwork {
		t.Errorf("%s: not on the host network", what)
	}
	if metrics.Addr().IsLoopback() || metrics.Addr().IsUnspecified() {
		t.Errorf("%s: metrics on %v: the kubelet's probes and Prometheus reach the node's address", what, metrics)
	}
	a := tmpl.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(int(metrics.Port())) || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("%s: Prometheus annotations %v, want scrape true, port %d, path /metrics", what, a, metrics.Port())
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", what, name)
			return
		}
		if p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromInt32(int32(metrics.Port())) {
			t.Errorf("%s: %s probe %s on port %s, want %s on %d", what, name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path, metrics.Port())
		}
	}
	probe("readiness", c.ReadinessProbe, "/ready")
	probe("liveness", c.LivenessProbe, "/healthz")
	if !declares(c, metrics.Port(), corev1.ProtocolTCP) {
		t.Errorf("%s: metrics port %d/TCP not declared", what, metrics.Port())
	}
}

// declares reports whether the container declares port/proto, on the
// host too (hostNetwork: the same number).
func declares(c *corev1.Container, port uint16, proto corev1.Protocol) bool {
	for _, p := range c.Ports {
		if p.ContainerPort == int32(port) && p.Protocol == proto && (p.HostPort == 0 || p.HostPort == p.ContainerPort) {
			return true
		}
	}
	return false
}

// hostPathMount is the node path behind the container's mount at dir.
func hostPathMount(spec *corev1.PodSpec, c *corev1.Container, dir string) string {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != dir {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == vm.Name && v.HostPath != nil {
				return v.HostPath.Path
			}
		}
	}
	return ""
}

type forgivedFile struct {
	node string
	cfg  *forgivedrv.Config
}

// forgived's DaemonSet reads /etc/forgive/$(NODE_NAME).yaml; every file
// of its ConfigMap parses with forgived's own parser; each names its node
// and has a distinct host id; the metrics port, the probes and the
// Prometheus annotations agree; the fabric port is declared; the host
// API's socket is on the node's /run/forgive, which the training pod
// mounts too, in a group the configuration admits.
func TestForgivedAgreesWithItsConfig(t *testing.T) {
	m := load(t)
	ds := m.daemonSets[0]
	what := "DaemonSet/" + ds.Name
	spec := &ds.Spec.Template.Spec
	c := container(t, what, spec)
	file, cm := configFile(t, m, what, spec, c)
	if file != "$(NODE_NAME).yaml" {
		t.Fatalf("%s: --config names %s, want the node's own file, $(NODE_NAME).yaml", what, file)
	}
	var nodeName bool
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Errorf("%s: NODE_NAME is not the downward API's spec.nodeName", what)
	}
	if len(cm.Data) == 0 {
		t.Fatalf("ConfigMap %s: no files", cm.Name)
	}
	hosts := map[uint16]string{}
	var files []forgivedFile
	for key, text := range cm.Data {
		node, ok := strings.CutSuffix(key, ".yaml")
		if !ok {
			t.Errorf("ConfigMap %s: key %s is no NODE.yaml", cm.Name, key)
			continue
		}
		cfg, err := sealedConfig(spec, c, text, t.TempDir())
		if err != nil {
			t.Errorf("ConfigMap %s, %s: %v", cm.Name, key, err)
			continue
		}
		files = append(files, forgivedFile{node, cfg})
		where := fmt.Sprintf("%s (ConfigMap %s, %s)", what, cm.Name, key)
		if prev, ok := hosts[cfg.Host]; ok {
			t.Errorf("%s: host %d again (first in %s)", where, cfg.Host, prev)
		}
		hosts[cfg.Host] = key
		listen, _, err := cfg.Addresses()
		if err != nil {
			t.Fatal(err)
		}
		metrics, err := netip.ParseAddrPort(cfg.Metrics)
		if err != nil {
			t.Errorf("%s: metrics %q: %v", where, cfg.Metrics, err)
			continue
		}
		if metrics.Addr() != listen.Addr() {
			t.Errorf("%s: metrics on %v, the fabric on %v: one node, one address", where, metrics.Addr(), listen.Addr())
		}
		checkProbesAndPorts(t, where, &ds.Spec.Template, c, metrics)
		if !declares(c, listen.Port(), corev1.ProtocolUDP) {
			t.Errorf("%s: fabric port %d/UDP not declared", where, listen.Port())
		}
		dir := path.Dir(cfg.Socket)
		if hp := hostPathMount(spec, c, dir); hp == "" {
			t.Errorf("%s: socket %s: no hostPath volume mounted at %s", where, cfg.Socket, dir)
		}
		checkClient(t, m, where, cfg, hostPathMount(spec, c, dir))
	}
	if len(files) != len(cm.Data) {
		t.Errorf("ConfigMap %s: %d of %d files parse", cm.Name, len(files), len(cm.Data))
	}
}

// checkClient: the training pod mounts the node directory forgived's
// socket is in, at the same path, runs in a group forgived admits and
// owns the socket with, and declares its job (FORGIVE_JOB).
func checkClient(t *testing.T, m *manifests, where string, cfg *forgivedrv.Config, nodeDir string) {
	t.Helper()
	for _, p := range m.pods {
		what := "Pod/" + p.Name
		c := container(t, what, &p.Spec)
		dir := path.Dir(cfg.Socket)
		if got := hostPathMount(&p.Spec, c, dir); got != nodeDir || got == "" {
			t.Errorf("%s: mounts %q at %s, forgived's socket directory is the node's %q (%s)", what, got, dir, nodeDir, where)
		}
		if i := slices.Index(c.Args, "--socket"); i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != cfg.Socket {
			t.Errorf("%s: args %q, want --socket %s (%s)", what, c.Args, cfg.Socket, where)
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == hostapi.JobEnv && (e.Value != "" || e.ValueFrom != nil && e.ValueFrom.FieldRef != nil)
		}) {
			t.Errorf("%s: no %s: its connections would be its uid's default job, shared with every pod of the uid", what, hostapi.JobEnv)
		}
		sc := p.Spec.SecurityContext
		if sc == nil || sc.RunAsGroup == nil {
			t.Errorf("%s: no runAsGroup: forgived admits by group", what)
			continue
		}
		gid := uint32(*sc.RunAsGroup)
		if !slices.Contains(cfg.AllowedGIDs, gid) || cfg.SocketGroup == nil || *cfg.SocketGroup != gid {
			t.Errorf("%s: runs in group %d; %s admits %v and gives the socket to group %s", what, gid, where, cfg.AllowedGIDs, deref(cfg.SocketGroup))
		}
		mode, err := strconv.ParseUint(cfg.SocketMode, 8, 32)
		if err != nil || mode&0o060 != 0o060 {
			t.Errorf("%s: socket_mode %q: the group needs read and write", where, cfg.SocketMode)
		}
	}
}

// Every trimswitch Deployment reads a file of its ConfigMap that
// trimswitch's own parser accepts; its metrics port, probes and
// annotations agree; every port's UDP socket is declared; it is pinned
// to one node, one replica, replaced by Recreate (the new pod binds the
// same node ports). Every forgived configuration is cabled to a switch
// port whose neighbour is that host's listen address, and the switch
// routes the host's id out of that port.
func TestSwitchCablesTheHosts(t *testing.T) {
	m := load(t)
	ports := map[netip.AddrPort]string{}             // a switch port's local address -> "deployment port"
	neighbors := map[netip.AddrPort]netip.AddrPort{} // ... -> its neighbour
	routes := map[netip.AddrPort][]uint16{}          // ... -> the hosts routed out of it
	for _, d := range m.deploys {
		what := "Deployment/" + d.Name
		spec := &d.Spec.Template.Spec
		c := container(t, what, spec)
		file, cm := configFile(t, m, what, spec, c)
		text, ok := cm.Data[file]
		if !ok {
			t.Errorf("%s: --config %s: no such key in ConfigMap %s", what, file, cm.Name)
			continue
		}
		cfg, err := trimswitchdrv.ParseConfig([]byte(text))
		if err != nil {
			t.Errorf("%s: ConfigMap %s, %s: trimswitch refuses it: %v", what, cm.Name, file, err)
			continue
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("%s: want 1 replica replaced by Recreate, got %s, %s", what, deref(d.Spec.Replicas), d.Spec.Strategy.Type)
		}
		if spec.NodeSelector["kubernetes.io/hostname"] == "" {
			t.Errorf("%s: not pinned to a node (kubernetes.io/hostname)", what)
		}
		metrics, err := netip.ParseAddrPort(cfg.Metrics)
		if err != nil {
			t.Errorf("%s: metrics %q: %v", what, cfg.Metrics, err)
			continue
		}
		checkProbesAndPorts(t, what, &d.Spec.Template, c, metrics)
		for _, p := range cfg.Ports {
			local, err1 := netip.ParseAddrPort(p.Local)
			nb, err2 := netip.ParseAddrPort(p.Neighbor)
			if err1 != nil || err2 != nil {
				t.Errorf("%s: port %s: %v %v", what, p.Name, err1, err2)
				continue
			}
			if !declares(c, local.Port(), corev1.ProtocolUDP) {
				t.Errorf("%s: port %s's %d/UDP not declared", what, p.Name, local.Port())
			}
			if local.Addr() != metrics.Addr() {
				t.Errorf("%s: port %s on %v, metrics on %v: one node, one address", what, p.Name, local.Addr(), metrics.Addr())
			}
			ports[local], neighbors[local] = what+" port "+p.Name, nb
			for _, r := range cfg.Routes {
				if slices.Contains(r.Ports, p.Name) {
					routes[local] = append(routes[local], r.Dst...)
				}
			}
		}
	}
	cm := m.configMaps["forgived-config"]
	if cm == nil {
		t.Fatal("no ConfigMap forgived-config")
	}
	dsSpec := &m.daemonSets[0].Spec.Template.Spec
	dsC := container(t, "DaemonSet/"+m.daemonSets[0].Name, dsSpec)
	for key, text := range cm.Data {
		cfg, err := sealedConfig(dsSpec, dsC, text, t.TempDir())
		if err != nil {
			continue // TestForgivedAgreesWithItsConfig names it
		}
		listen, sw, err := cfg.Addresses()
		if err != nil {
			t.Fatal(err)
		}
		port, ok := ports[sw]
		switch {
		case !ok:
			t.Errorf("forgived %s: switch %v is no switch port of the manifests", key, sw)
		case neighbors[sw] != listen:
			t.Errorf("forgived %s listens on %v, but %s sends to %v", key, listen, port, neighbors[sw])
		case !slices.Contains(routes[sw], cfg.Host):
			t.Errorf("forgived %s is host %d, but %s routes only %v", key, cfg.Host, port, routes[sw])
		}
	}
}

// The sweep's Indexed Job: completions, parallelism and --shard's N
// agree, the index comes from JOB_COMPLETION_INDEX with
// --shard-from-zero, each index writes a directory of its own on the
// shared volume, and every index's flags pass forgivectl lab --dry-run
// (the binary built from this repository). The merge Job names exactly
// those directories, on the same volume.
func TestSweepJobsShardAndMerge(t *testing.T) {
	m := load(t)
	job := m.jobs["forgive-sweep"]
	merge := m.jobs["forgive-sweep-merge"]
	if job == nil || merge == nil {
		t.Fatal("want the Jobs forgive-sweep and forgive-sweep-merge")
	}
	if job.Spec.CompletionMode == nil || *job.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("Job/%s: not Indexed", job.Name)
	}
	if job.Spec.Completions == nil || job.Spec.Parallelism == nil || *job.Spec.Parallelism != *job.Spec.Completions {
		t.Fatalf("Job/%s: completions %s, parallelism %s: want both N", job.Name, deref(job.Spec.Completions), deref(job.Spec.Parallelism))
	}
	n := int(*job.Spec.Completions)
	c := container(t, "Job/"+job.Name, &job.Spec.Template.Spec)
	args := c.Args
	if len(args) == 0 || args[0] != "lab" {
		t.Fatalf("Job/%s: args %q, want lab ...", job.Name, args)
	}
	if i := slices.Index(args, "--shard"); i < 0 || args[i+1] != fmt.Sprintf("$(JOB_COMPLETION_INDEX)/%d", n) || !slices.Contains(args, "--shard-from-zero") {
		t.Errorf("Job/%s: args %q, want --shard $(JOB_COMPLETION_INDEX)/%d --shard-from-zero", job.Name, args, n)
	}
	var index bool
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			index = true
		}
	}
	if !index {
		t.Errorf("Job/%s: JOB_COMPLETION_INDEX is not in the container's env from the completion index annotation", job.Name)
	}
	out := args[slices.Index(args, "--out")+1]
	if !strings.Contains(out, "$(JOB_COMPLETION_INDEX)") {
		t.Errorf("Job/%s: --out %s is not per index", job.Name, out)
	}
	volume := func(what string, spec *corev1.PodSpec, c *corev1.Container, dir string) string {
		for _, vm := range c.VolumeMounts {
			if strings.HasPrefix(dir, vm.MountPath+"/") {
				for _, v := range spec.Volumes {
					if v.Name == vm.Name && v.PersistentVolumeClaim != nil {
						claim := m.pvcs[v.PersistentVolumeClaim.ClaimName]
						if claim == nil || !slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteMany) {
							t.Errorf("%s: %s is on claim %s, which the manifests do not make ReadWriteMany", what, dir, v.PersistentVolumeClaim.ClaimName)
						}
						return v.PersistentVolumeClaim.ClaimName
					}
				}
			}
		}
		t.Errorf("%s: %s is on no persistent volume claim", what, dir)
		return ""
	}
	claim := volume("Job/"+job.Name, &job.Spec.Template.Spec, c, out)

	// Every index's arguments, as the kubelet expands them, through the
	// real forgivectl's checks; together they are the sweep once.
	bin := filepath.Join(t.TempDir(), "forgivectl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/forgivectl")
	build.Dir = "../.."
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/forgivectl: %v\n%s", err, b)
	}
	var dirs []string
	ran, total := 0, -1
	for k := 0; k < n; k++ {
		expanded := make([]string, len(args))
		for i, a := range args {
			expanded[i] = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(k))
		}
		dirs = append(dirs, expanded[slices.Index(expanded, "--out")+1])
		cmd := exec.Command(bin, append([]string{"--dry-run"}, expanded...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("index %d: forgivectl --dry-run %s: %v\n%s", k, strings.Join(expanded, " "), err, b)
			continue
		}
		sm := shardLine.FindSubmatch(b)
		if sm == nil || string(sm[1]) != strconv.Itoa(k+1) || string(sm[2]) != strconv.Itoa(n) {
			t.Errorf("index %d: the dry run names no shard %d/%d:\n%s", k, k+1, n, b)
			continue
		}
		runs, _ := strconv.Atoi(string(sm[3]))
		of, _ := strconv.Atoi(string(sm[4]))
		if total >= 0 && of != total {
			t.Errorf("index %d: a sweep of %d runs, index 0's has %d", k, of, total)
		}
		ran, total = ran+runs, of
	}
	if ran != total {
		t.Errorf("the %d indices run %d runs of the sweep's %d", n, ran, total)
	}

	mc := container(t, "Job/"+merge.Name, &merge.Spec.Template.Spec)
	if len(mc.Args) < 4 || mc.Args[0] != "report" || mc.Args[1] != "merge" || mc.Args[2] != "--out" {
		t.Fatalf("Job/%s: args %q, want report merge --out DIR SHARD...", merge.Name, mc.Args)
	}
	if got := mc.Args[4:]; !slices.Equal(got, dirs) {
		t.Errorf("Job/%s merges %q, the sweep's shards write %q", merge.Name, got, dirs)
	}
	if mc2 := volume("Job/"+merge.Name, &merge.Spec.Template.Spec, mc, mc.Args[3]); mc2 != claim {
		t.Errorf("Job/%s writes on claim %s, the shards on %s", merge.Name, mc2, claim)
	}
	for _, d := range dirs {
		if volume("Job/"+merge.Name, &merge.Spec.Template.Spec, mc, d) != claim {
			t.Errorf("Job/%s reads %s from another volume than the shards wrote it on", merge.Name, d)
		}
	}
}

// deref prints a pointer's value, or "unset".
func deref[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
