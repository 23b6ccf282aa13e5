package config

import (
	"strings"
	"testing"
)

func TestAllowRun(t *testing.T) {
	a := Allow{Commands: []string{"/usr/local/bin/report", "/opt/hooks/"},
		HTTPHosts: []string{"hooks.internal", "api.example.com:8443", "*.tenants.example.com", "[::1]"}, Path: "onetick.yaml"}
	cmd := func(argv ...string) *Run { return &Run{Command: &CommandRun{Argv: argv}} }
	hook := func(u string) *Run { return &Run{HTTP: &HTTPRun{URL: u}} }
	for _, tc := range []struct {
		run  *Run
		want string // "" = allowed, else a substring of the refusal
	}{
		{cmd("/usr/local/bin/report", "--x"), ""},
		{cmd("/opt/hooks/a"), ""},
		{cmd("/opt/hooks/sub/a"), "worker.allow_commands in onetick.yaml"},
		{cmd("/opt/hooks/../../bin/sh"), "is not allowed"},
		{cmd("/usr/local/bin/report2"), "is not allowed"},
		{cmd("report"), "is not allowed"},
		{cmd("/bin/sh", "-c", "x"), "is not allowed"},
		{&Run{Command: &CommandRun{Argv: []string{"/opt/hooks/a"}, Env: map[string]string{"LD_PRELOAD": "/tmp/x.so"}}}, "run.command.env"},
		{hook("https://hooks.internal/x"), ""},
		{hook("https://HOOKS.internal:443/x"), ""},
		{hook("http://hooks.internal/x"), ""},
		{hook("https://hooks.internal:8443/x"), ""},
		{hook("https://api.example.com:8443/x"), ""},
		{hook("https://api.example.com/x"), "worker.allow_http_hosts in onetick.yaml"},
		{hook("https://a.tenants.example.com/x"), ""},
		{hook("https://tenants.example.com/x"), "is not allowed"},
		{hook("https://evil.com/?h=hooks.internal"), "is not allowed"},
		{hook("https://hooks.internal@evil.com/"), "is not allowed"},
		{hook("https://user@hooks.internal/"), "is not allowed"},
		{hook("https://169.254.169.254/latest"), "is not allowed"},
		{hook("http://[::1]:80/"), ""},
		{hook("ftp://hooks.internal/"), "is not allowed"},
	} {
		got := strings.Join(a.CheckRun("j", tc.run), "; ")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			what := ""
			if tc.run.Command != nil {
				what = strings.Join(tc.run.Command.Argv, " ")
			} else {
				what = tc.run.HTTP.URL
			}
			t.Errorf("%s: %q, want %q", what, got, tc.want)
		}
	}
	if got := (Allow{}).CheckRun("j", cmd("/usr/local/bin/report")); len(got) != 1 {
		t.Errorf("empty allow-list: %v, want a refusal", got)
	}
	if p := checkAllowEntries(Allow{Commands: []string{"bin/x", "/a/../b", "/ok/", "/"}, HTTPHosts: []string{"a/b", "h:99999", "*.x.*", "ok:80"}}); len(p) != 5 {
		t.Errorf("malformed entries: %v, want 5 problems", p)
	}
}
