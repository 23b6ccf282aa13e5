package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/cli"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/relay/natsrelay"
	"github.com/onetick/onetick/worker"
)

// exported returns every series name a replica can serve on /metrics:
// the daemon's registry with a scheduler of one job that has its own
// series (the delivery-error series too, which appears with the first
// error). Histograms are stored as _bucket, _sum and _count, summaries as
// the name and its _sum and _count.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := cli.MetricsRegistry()
	sched, err := cron.Parse("@every 1m", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := onetick.New(onetick.Config{Backend: memory.New(memory.Options{}), Registerer: reg,
		Jobs: []onetick.Job{{Name: "a", Schedule: sched},
			// A relayed job: the relay series exist once a job uses one.
			{Name: "r", Schedule: sched, Relay: &onetick.Relay{Kind: onetick.RelayAsynq}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Metrics().JobDeliveryErrors.WithLabelValues("a")
	// A replica that works registers the worker's series too.
	if _, err := worker.New(worker.Config{Store: memory.New(memory.Options{}).WorkerStore(""), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	// And, with a NATS relay job, the relay consumer's.
	if _, err := natsrelay.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		// By the type's name: the client_model package stays an indirect
		// dependency.
		switch mf.GetType().String() {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			have[name+"_bucket"], have[name+"_sum"], have[name+"_count"] = true, true, true
		case "SUMMARY":
			have[name], have[name+"_sum"], have[name+"_count"] = true, true, true
		default:
			have[name] = true
		}
	}
	return have
}

// query is one PromQL expression of a shipped file and where it is.
type query struct{ where, expr string }

// unknownMetrics lists the problems of qs: metrics that have queries but
// that no replica exports, and queries that cannot be checked.
func unknownMetrics(qs []query, have map[string]bool) []string {
	var problems []string
	for _, q := range qs {
		names, err := promqlNames(q.expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v in %q", q.where, err, q.expr))
			continue
		}
		if len(names) == 0 {
			problems = append(problems, fmt.Sprintf("%s: no metric in %q", q.where, q.expr))
		}
		for _, n := range names {
			if !have[n] {
				problems = append(problems, fmt.Sprintf("%s: %s is not a metric onetick exports (in %q)", q.where, n, q.expr))
			}
		}
	}
	return problems
}

const dashboardFile = "grafana/onetick.json"

type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
}

type panel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *struct{ UID string }    `json:"datasource"`
	GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
	Targets    []struct {
		RefID      string                `json:"refId"`
		Expr       string                `json:"expr"`
		Datasource *struct{ UID string } `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func loadDashboard(t *testing.T, data []byte) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)

// dashboardQueries returns every query of d: the panels' targets and the
// template variables' label_values selectors.
func dashboardQueries(t *testing.T, d dashboard) []query {
	t.Helper()
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				qs = append(qs, query{fmt.Sprintf("panel %q, target %s", p.Title, tg.RefID), tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var text string
		var obj struct{ Query string }
		if json.Unmarshal(v.Query, &text) != nil {
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("variable %s: query is neither a string nor an object: %s", v.Name, v.Query)
			}
			text = obj.Query
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(text))
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, text)
		}
		qs = append(qs, query{"variable " + v.Name, m[1]})
	}
	return qs
}

// Every metric the dashboard's queries name is one a replica serves.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	qs := dashboardQueries(t, loadDashboard(t, data))
	for _, p := range unknownMetrics(qs, exported(t)) {
		t.Error(p)
	}
	if len(qs) < 15 {
		t.Errorf("%d queries found: the walk misses some", len(qs))
	}
}

// The check fails on a query naming a metric onetick does not export, and
// on one that would escape it.
func TestDashboardCheckRejects(t *testing.T) {
	data := []byte(`{"panels": [{"id": 1, "title": "typo", "targets": [
		{"refId": "A", "expr": "sum(rate(scheduler_tick_enqueued_total{job=\"$job\"}[$__rate_interval]))"},
		{"refId": "B", "expr": "histogram_quantile(0.9, sum by (le) (rate(scheduler_tick_delay_seconds[5m])))"},
		{"refId": "C", "expr": "{__name__=~\"scheduler_.*\"}"}]},
		{"type": "row", "panels": [{"id": 2, "title": "nested", "targets": [{"refId": "A", "expr": "scheduler_nope"}]}]}],
		"templating": {"list": [{"name": "job", "type": "query", "query": "label_values(scheduler_is_leaderr, job)"}]}}`)
	got := strings.Join(unknownMetrics(dashboardQueries(t, loadDashboard(t, data)), exported(t)), "\n")
	for _, want := range []string{
		"scheduler_tick_enqueued_total is not a metric",
		"scheduler_tick_delay_seconds is not a metric", // a histogram is queried by its _bucket series
		"target C: a selector without a metric name",
		`panel "nested", target A: scheduler_nope is not a metric`,
		"variable job: scheduler_is_leaderr is not a metric",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems do not say %q:\n%s", want, got)
		}
	}
}

// The dashboard shows what an operator needs (the list), and is
// well formed: unique panel ids, every target on the chosen data source.
func TestDashboardContents(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d := loadDashboard(t, data)
	if d.Title == "" || d.UID == "" || d.SchemaVersion == 0 {
		t.Errorf("title %q, uid %q, schemaVersion %d: want all set", d.Title, d.UID, d.SchemaVersion)
	}
	named := map[string]bool{}
	for _, q := range dashboardQueries(t, d) {
		names, _ := promqlNames(q.expr)
		for _, n := range names {
			named[n] = true
		}
	}
	for _, want := range []string{
		"scheduler_is_leader",                      // leader
		"scheduler_leadership_changes_total",       // leadership changes
		"scheduler_ticks_enqueued_total",           // ticks per second
		"scheduler_missed_ticks_total",             // missed ticks
		"scheduler_duplicate_ticks_total",          // duplicate ticks
		"scheduler_renewal_latency_seconds_bucket", // renewal latency ...
		"scheduler_lease_ttl_seconds",              // ... against TTL/3
		"scheduler_tick_delay_seconds_bucket",      // tick delay
		"scheduler_store_clock_offset_seconds",     // clock offset
		"scheduler_store_damaged",                  // damaged store state
		"scheduler_broken_jobs",                    // broken jobs
	} {
		if !named[want] {
			t.Errorf("no panel queries %s", want)
		}
	}
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, other)
			}
			ids[p.ID] = p.Title
			if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("panel %q: refId %q missing or repeated", p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q, target %s: not on the ${datasource} variable", p.Title, tg.RefID)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
}

// Every metric the alert rules name is one a replica serves (promtool's
// tests feed the rules made-up series and cannot tell).
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	data, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	var qs []query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{"alert " + r.Alert + r.Record, r.Expr})
		}
	}
	if len(qs) < 14 {
		t.Fatalf("%d rules read, want the 14 shipped", len(qs))
	}
	for _, p := range unknownMetrics(qs, exported(t)) {
		t.Error(p)
	}
}

func TestPromQLNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
		err  string
	}{
		{`scheduler_is_leader`, []string{"scheduler_is_leader"}, ""},
		{`sum by (le, instance) (rate(a_bucket{job="$job", x=~"a}b"}[$__rate_interval]))`, []string{"a_bucket"}, ""},
		{`histogram_quantile(0.99, sum without (instance) (rate(h_bucket[5m:1m] offset 1h)))`, []string{"h_bucket"}, ""},
		{`max(ttl) / 3 >= bool on (instance) group_left (x) other unless third`, []string{"ttl", "other", "third"}, ""},
		{`topk(20, sum by (job_name) (increase(c_total{prefer="missed"}[1h]))) > 0`, []string{"c_total"}, ""},
		{`label_replace(m, "dst", "$1", "src", "(.*)") * 1e3 + .5`, []string{"m"}, ""},
		{`count(up == 1) or vector(0)`, []string{"up"}, ""},
		{`{job="x"}`, nil, "without a metric name"},
		{`x{__name__="y"}`, nil, "__name__"},
		{`rate(x{a="b}[5m])`, nil, "unclosed"},
	} {
		got, err := promqlNames(tc.expr)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.expr, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%s: %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
}
