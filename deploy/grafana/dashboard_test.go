// Package grafana holds the Grafana dashboard of docs/cluster.md and the
// test that holds its queries to what the daemons export. It is a module
// of its own, so that the Prometheus server's PromQL parser stays out of
// the emulator's module.
package grafana

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// dashboard is the part of Grafana's dashboard model the checks read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// query is one target's expression, where it is.
type query struct {
	where string
	expr  string
}

func load(t *testing.T) (*dashboard, []query) {
	t.Helper()
	b, err := os.ReadFile("forgive.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("forgive.json: %v", err)
	}
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				qs = append(qs, query{fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID), tg.Expr})
			}
		}
	}
	walk(d.Panels)
	return &d, qs
}

// The dashboard is one Grafana can import: a uid, a title, a schema
// version, panels with distinct ids on the 24-column grid, each query
// panel on the Prometheus data source its template variable names, each
// target with an id of its own and an expression.
func TestDashboardIsWellFormed(t *testing.T) {
	d, qs := load(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion <= 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	var dsVar string
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatal("no Prometheus data source variable")
	}
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if ids[p.ID] || p.ID == 0 {
				t.Errorf("panel %q: id %d again or unset", p.Title, p.ID)
			}
			ids[p.ID] = true
			if g := p.GridPos; g.W < 1 || g.X < 0 || g.X+g.W > 24 || g.H < 1 {
				t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, g)
			}
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != dsVar {
				t.Errorf("panel %q: data source %+v, want prometheus %s", p.Title, p.Datasource, dsVar)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if refs[tg.RefID] || tg.RefID == "" || strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q: target %q repeated, unnamed or empty", p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q: no query", p.Title)
			}
		}
	}
	walk(d.Panels)
	if len(qs) < 20 {
		t.Errorf("%d queries: the walk lost some", len(qs))
	}
}

// grafanaMacros are the variables Grafana replaces in a query before
// Prometheus sees it, with a value of the same kind.
var grafanaMacros = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h")

// selectors parses expr with the Prometheus server's PromQL parser and
// returns its vector selectors' matchers.
func selectors(expr string) ([][]*labels.Matcher, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaMacros.Replace(expr))
	if err != nil {
		return nil, err
	}
	return parser.ExtractSelectors(e), nil
}

// series are a scrape's samples, by family.
type series map[string][]sample

// sample is one series' labels (with __name__) and value.
type sample struct {
	labels labels.Labels
	value  float64
}

func scrape(t *testing.T, url string, into series) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	for name, f := range fams {
		for _, m := range f.Metric {
			v := m.GetUntyped().GetValue() + m.GetCounter().GetValue() + m.GetGauge().GetValue()
			into[name] = append(into[name], sample{seriesLabels(name, m), v})
		}
	}
}

func seriesLabels(name string, m *dto.Metric) labels.Labels {
	b := labels.NewScratchBuilder(len(m.Label) + 1)
	b.Add(model.MetricNameLabel, name)
	for _, l := range m.Label {
		b.Add(l.GetName(), l.GetValue())
	}
	b.Sort()
	return b.Labels()
}

// scrapeLabels are the labels Prometheus adds to every series it scrapes:
// a query may group or select by them, the daemons do not export them.
var scrapeLabels = []string{"instance", "job"}

// alternation matches a regexp that is only words joined by |.
var alternation = regexp.MustCompile(`^[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*$`)

// check returns what is wrong with a query against the scraped series: a
// parse error; a selector no series matches (naming the metric name or
// label value that is missing); an alternative of a =~ word list that no
// series has. used collects the metric names the query selects.
func check(expr string, s series, used map[string]bool) []string {
	sels, err := selectors(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	if len(sels) == 0 {
		return []string{"selects no series"}
	}
	var problems []string
	for _, ms := range sels {
		var name string
		var rest []*labels.Matcher
		for _, m := range ms {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			} else if !slices.Contains(scrapeLabels, m.Name) {
				rest = append(rest, m)
			}
		}
		if name == "" {
			problems = append(problems, fmt.Sprintf("selector %v names no metric", ms))
			continue
		}
		used[name] = true
		fam, ok := s[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("metric %s: no daemon exports it", name))
			continue
		}
		matches := func(ls labels.Labels, ms []*labels.Matcher) bool {
			for _, m := range ms {
				if !m.Matches(ls.Get(m.Name)) {
					return false
				}
			}
			return true
		}
		if !slices.ContainsFunc(fam, func(s sample) bool { return matches(s.labels, rest) }) {
			problems = append(problems, fmt.Sprintf("%s%v: no series of %s matches (values of its labels: %s)", name, rest, name, labelValues(fam, rest)))
			continue
		}
		for _, m := range rest {
			if m.Type != labels.MatchRegexp || !alternation.MatchString(m.Value) {
				continue
			}
			for _, alt := range strings.Split(m.Value, "|") {
				eq := labels.MustNewMatcher(labels.MatchEqual, m.Name, alt)
				if !slices.ContainsFunc(fam, func(s sample) bool { return matches(s.labels, []*labels.Matcher{eq}) }) {
					problems = append(problems, fmt.Sprintf("%s{%s=%q}: no such series (of %s=~%q)", name, m.Name, alt, m.Name, m.Value))
				}
			}
		}
	}
	return problems
}

func labelValues(fam []sample, ms []*labels.Matcher) string {
	var out []string
	for _, m := range ms {
		vals := map[string]bool{}
		for _, s := range fam {
			vals[s.labels.Get(m.Name)] = true
		}
		var vs []string
		for v := range vals {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		out = append(out, m.Name+"="+strings.Join(vs, ","))
	}
	return strings.Join(out, "; ")
}

// The checker reports what it should: a misspelt metric, a label value
// no series has, an alternative of a word list no series has, a query
// that does not parse; and passes a query that agrees with the series.
func TestCheckCatchesDisagreement(t *testing.T) {
	s := series{
		"forgived_host":               {{labels.FromStrings(model.MetricNameLabel, "forgived_host", "counter", "tx_bytes", "host", "h1"), 1}},
		"trimswitch_sent_bytes_total": {{labels.FromStrings(model.MetricNameLabel, "trimswitch_sent_bytes_total", "port", "h1"), 1}},
	}
	for expr, want := range map[string]string{
		`rate(trimswitch_sent_byte_total[$__rate_interval])`:                       "metric trimswitch_sent_byte_total: no daemon exports it",
		`rate(forgived_host{counter="tx_byte"}[1m])`:                               "no series of forgived_host matches",
		`sum by (counter) (forgived_host{counter=~"tx_bytes|rx_bytes"})`:           `forgived_host{counter="rx_bytes"}: no such series`,
		`sum by (instance) (rate(trimswitch_sent_bytes_total[$__rate_interval])`:   "does not parse",
		`sum(rate(trimswitch_sent_bytes_total{port="h1",instance="a:1"}[5m])) > 0`: "",
	} {
		got := strings.Join(check(expr, s, map[string]bool{}), "\n")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
}

// A fabric in this process: trimswitch with two ports and two forgived,
// on addresses of their own in 127.0.0.0/8, each serving /metrics on a
// port of its own; host 1 has a flow of every class to host 2 and a
// gradient step through the switch, so the per-flow and per-step series
// exist. Returns the metrics URLs.
func fabric(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var runs []chan error
	t.Cleanup(func() {
		cancel()
		for _, r := range runs {
			if err := <-r; err != nil {
				t.Errorf("daemon: %v", err)
			}
		}
	})
	net := fmt.Sprintf("127.%d.252", 100+os.Getpid()%100)
	swCfg, err := trimswitchdrv.ParseConfig([]byte(fmt.Sprintf(`name: sw
metrics: %[1]s.10:0
defaults: {rate: 1Gbps, delay: 100us, data_queue: 64KiB, ecn: {kmin: 8KB, kmax: 32KB, pmax: 0.2}, trim: ndp}
ports:
  - {name: h1, local: "%[1]s.10:4793", neighbor: "%[1]s.11:4793", host: 1}
  - {name: h2, local: "%[1]s.10:4794", neighbor: "%[1]s.12:4793", host: 2}
routes:
  - {dst: [1], ports: [h1]}
  - {dst: [2], ports: [h2]}
`, net)))
	if err != nil {
		t.Fatal(err)
	}
	sw, err := trimswitchdrv.Open(swCfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	r := make(chan error, 1)
	runs = append(runs, r)
	go func() { r <- sw.Run(ctx) }()
	dir := t.TempDir()
	var hosts []*forgivedrv.Daemon
	for h := 1; h <= 2; h++ {
		cfg, err := forgivedrv.ParseConfig([]byte(fmt.Sprintf("host: %d\nname: host%d\nlisten: %s.1%d:4793\nswitch: %s.10:%d\nsocket: %s\nmetrics: %s.1%d:0\nline_rate: 1Gbps\nseed: %d\n",
			h, h, net, h, net, 4792+h, filepath.Join(dir, fmt.Sprintf("h%d.sock", h)), net, h, h)))
		if err != nil {
			t.Fatal(err)
		}
		d, err := forgivedrv.New(cfg, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		r := make(chan error, 1)
		runs = append(runs, r)
		go func() { r <- d.Run(ctx) }()
		hosts = append(hosts, d)
	}
	// A bound on the wait, not an assertion on time.
	deadline := time.Now().Add(30 * time.Second)
	for !(sw.Ready() && hosts[0].Ready() && hosts[1].Ready()) {
		if time.Now().After(deadline) {
			t.Fatal("the fabric did not become ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	traffic(t, filepath.Join(dir, "h1.sock"), filepath.Join(dir, "h2.sock"))
	return []string{"http://" + sw.MetricsAddr() + "/metrics", "http://" + hosts[0].MetricsAddr() + "/metrics", "http://" + hosts[1].MetricsAddr() + "/metrics"}
}

// traffic makes a flow of every class from host 1 to host 2 and sends
// one gradient step's 64 KiB over the gradient flow.
func traffic(t *testing.T, sock1, sock2 string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var clients []*hostapi.Client
	var regions []*hostapi.Region
	const size = 64 << 10
	for i, sock := range []string{sock1, sock2} {
		c, err := hostapi.Dial(sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
		r, err := c.RegisterMemory(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		regions = append(regions, r)
		for f, class := range []hostapi.Class{hostapi.ClassGradient, hostapi.ClassTensor, hostapi.ClassPipeline, hostapi.ClassOther} {
			if err := c.CreateFlow(ctx, hostapi.FlowSpec{Flow: hostapi.FlowID(f + 1), Peer: hostapi.HostID(2 - i), Class: class}); err != nil {
				t.Fatal(err)
			}
		}
		critical := false // a non-critical step: the budget is P_high's
		if err := c.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: &critical, ExpectedGradientBytes: size}); err != nil {
			t.Fatal(err)
		}
	}
	if err := clients[1].PostRecv(ctx, hostapi.RecvReq{Flow: 1, Region: regions[1].ID(), Length: size, WRID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := clients[0].PostSend(ctx, hostapi.SendReq{Flow: 1, Region: regions[0].ID(), Length: size, WRID: 1}); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		comp, err := c.Poll(ctx)
		if err != nil || comp.Status != hostapi.StatusOK {
			t.Fatalf("host %d: completion %+v, %v", i+1, comp, err)
		}
	}
}

// Every query of the dashboard parses with Prometheus's own PromQL
// parser, and every selector in it matches a series that a running
// trimswitch or forgived exports: its metric name, and every label value
// it asks for (each word of a =~ list too). Every family the daemons
// export under their own prefix has a panel.
func TestQueriesMatchTheDaemonsMetrics(t *testing.T) {
	_, qs := load(t)
	s := series{}
	for _, u := range fabric(t) {
		scrape(t, u, s)
	}
	used := map[string]bool{}
	for _, q := range qs {
		for _, p := range check(q.expr, s, used) {
			t.Errorf("%s: %s\n  %s", q.where, p, q.expr)
		}
	}
	var exported []string
	for name := range s {
		if strings.HasPrefix(name, "trimswitch_") || strings.HasPrefix(name, "forgived_") {
			exported = append(exported, name)
			if !used[name] {
				t.Errorf("%s: exported, but no panel shows it", name)
			}
		}
	}
	sort.Strings(exported)
	if len(exported) < 20 || !slices.Contains(exported, "forgived_step") || !slices.Contains(exported, "forgived_flow") {
		t.Errorf("the daemons exported only %v: the fabric's traffic did not happen", exported)
	}
	// FORGIVE's invariants on the step the fabric ran, as the NICs
	// export them: forgiven <= budget, forgiven <= p/(1-p) x received, and
	// the ledger's own verdict (which also covers no range charged twice).
	steps := map[string]map[string]float64{} // host/step -> field -> value
	for _, smp := range s["forgived_step"] {
		k := smp.labels.Get("host") + " step " + smp.labels.Get("step")
		if steps[k] == nil {
			steps[k] = map[string]float64{}
		}
		steps[k][smp.labels.Get("field")] = smp.value
	}
	if len(steps) != 2 {
		t.Errorf("step records %v, want step 1 at both hosts", steps)
	}
	for k, f := range steps {
		if f["invariant_held"] != 1 || f["forgiven"] > f["budget"] || (f["p"] < 1 && f["forgiven"] > f["p"]/(1-f["p"])*f["received"]) {
			t.Errorf("%s: a FORGIVE invariant broke: %v", k, f)
		}
	}
}
