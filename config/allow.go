package config

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// Jobs applied at run time (`jobs apply`, PUT /api/v1/jobsets) may carry
// a run block only within what the configuration file allows: remote
// code execution is opt-in. The file lists the programs a run-time
// command may start (worker.allow_commands) and the hosts a run-time HTTP
// call may reach (worker.allow_http_hosts); both are empty by default,
// which refuses every run block at run time. The side that applies a set
// checks it against its own file, and every worker checks each definition
// again against its own before it runs anything.

// Allow is the allow-list of run blocks in jobs defined at run time.
type Allow struct {
	// Commands are the programs a command may start: an absolute path
	// ("/usr/local/bin/report"), or a directory ending in '/'
	// ("/opt/hooks/"): the programs directly in it.
	Commands []string `yaml:"allow_commands"`
	// HTTPHosts are the hosts an HTTP call may reach: a host name or IP
	// address ("hooks.internal"), with a port to allow only that port
	// ("hooks.internal:8443"), or "*.example.com" for every name under
	// example.com (not example.com itself).
	HTTPHosts []string `yaml:"allow_http_hosts"`
	// Path is the configuration file, named in refusals.
	Path string `yaml:"-"`
}

// checkAllowEntries reports malformed allow-list entries (for the
// parser: each problem with its field).
func checkAllowEntries(a Allow) (problems [][2]string) {
	for _, c := range a.Commands {
		if !path.IsAbs(c) || path.Clean(c) != strings.TrimSuffix(c, "/") && c != "/" {
			problems = append(problems, [2]string{"worker.allow_commands", fmt.Sprintf("%q: want an absolute, clean path (a directory ends in /)", short(c))})
		}
	}
	for _, h := range a.HTTPHosts {
		host, port := splitHostPort(h)
		bad := checkHostName(strings.TrimPrefix(host, "*.")) != ""
		if n, err := strconv.Atoi(port); port != "" && (err != nil || n < 1 || n > 65535) {
			bad = true
		}
		if bad {
			problems = append(problems, [2]string{"worker.allow_http_hosts", fmt.Sprintf("%q: want a host, host:port or *.domain", short(h))})
		}
	}
	return problems
}

// CheckRun reports, one message per problem, why run block r of job may
// not run as a job defined at run time. Each message names the setting
// that would allow it.
func (a Allow) CheckRun(job string, r *Run) []string {
	if r == nil {
		return nil
	}
	var out []string
	where := "worker.allow_commands"
	if a.Path != "" {
		where += " in " + a.Path
	}
	if c := r.Command; c != nil {
		prog := ""
		if len(c.Argv) > 0 {
			prog = c.Argv[0]
		}
		if !a.commandAllowed(prog) {
			out = append(out, fmt.Sprintf("job %q: run.command %q is not allowed for jobs defined at run time (list it in %s)", job, short(prog), where))
		}
		if len(c.Env) > 0 {
			out = append(out, fmt.Sprintf("job %q: run.command.env is not allowed for jobs defined at run time (the tick's payload is the command's input; set variables in the configuration file)", job))
		}
	}
	if h := r.HTTP; h != nil {
		where := "worker.allow_http_hosts"
		if a.Path != "" {
			where += " in " + a.Path
		}
		u, err := url.Parse(h.URL)
		if err != nil || !a.hostAllowed(u) {
			host := ""
			if err == nil {
				host = u.Host
			}
			out = append(out, fmt.Sprintf("job %q: run.http.url host %q is not allowed for jobs defined at run time (list it in %s)", job, short(host), where))
		}
	}
	return out
}

func (a Allow) commandAllowed(prog string) bool {
	if !path.IsAbs(prog) || path.Clean(prog) != prog {
		return false
	}
	for _, c := range a.Commands {
		if strings.HasSuffix(c, "/") {
			if path.Dir(prog) == path.Clean(c) {
				return true
			}
		} else if prog == c {
			return true
		}
	}
	return false
}

func (a Allow) hostAllowed(u *url.URL) bool {
	if u.Scheme != "http" && u.Scheme != "https" || u.User != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, e := range a.HTTPHosts {
		eh, ep := splitHostPort(strings.ToLower(e))
		if ep != "" && ep != port {
			continue
		}
		if suffix, ok := strings.CutPrefix(eh, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) && net.ParseIP(host) == nil {
				return true
			}
		} else if host == strings.Trim(eh, "[]") {
			return true
		}
	}
	return false
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port".
func splitHostPort(s string) (host, port string) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		return h, p
	}
	return strings.Trim(s, "[]"), ""
}
