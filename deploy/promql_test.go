package deploy_test

import (
	"errors"
	"fmt"
	"strings"
)

// promqlNames returns the metric names a PromQL expression selects. It
// knows enough of PromQL for the queries onetick ships: strings, label
// matchers, ranges and subqueries, functions, aggregations with their
// label lists, binary operators and their modifiers, and Grafana's
// $variables. A selector without a metric name, or naming it through
// __name__, is an error: such a query would escape the check.
func promqlNames(expr string) ([]string, error) {
	var names []string
	n := len(expr)
	skipSpace := func(j int) int {
		for j < n && isSpace(expr[j]) {
			j++
		}
		return j
	}
	for i := 0; i < n; {
		c := expr[i]
		switch {
		case isSpace(c):
			i++
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '{':
			b := i - 1
			for b >= 0 && isSpace(expr[b]) {
				b--
			}
			if b < 0 || !isIdent(expr[b]) {
				return nil, fmt.Errorf("a selector without a metric name at offset %d", i)
			}
			j, err := skipMatchers(expr, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return nil, errors.New("unclosed [")
			}
			i += j + 1
		case c == '$': // a Grafana variable: $name or ${name}
			i++
			if i < n && expr[i] == '{' {
				j := strings.IndexByte(expr[i:], '}')
				if j < 0 {
					return nil, errors.New("unclosed ${")
				}
				i += j + 1
			}
			for i < n && isIdent(expr[i]) {
				i++
			}
		case isDigit(c) || c == '.' && i+1 < n && isDigit(expr[i+1]): // numbers and durations
			for i < n && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < n && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := skipSpace(j)
			switch {
			case labelLists[word]:
				i = j
				if k < n && expr[k] == '(' {
					e := strings.IndexByte(expr[k:], ')')
					if e < 0 {
						return nil, fmt.Errorf("unclosed label list after %s", word)
					}
					i = k + e + 1
				}
			case keywords[word] || aggregators[word]:
				i = j
			case k < n && expr[k] == '(': // a function
				i = j
			default:
				names = append(names, word)
				i = j
			}
		default:
			i++
		}
	}
	return names, nil
}

var (
	labelLists  = set("by", "without", "on", "ignoring", "group_left", "group_right")
	keywords    = set("bool", "and", "or", "unless", "offset", "atan2", "inf", "nan", "start", "end")
	aggregators = set("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio")
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }

// skipString returns the offset after the string literal at i.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at offset %d", i)
}

// skipMatchers returns the offset after the label matchers at i ({...}).
func skipMatchers(s string, i int) (int, error) {
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"' || c == '\'' || c == '`':
			e, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = e - 1
		case c == '}':
			if strings.Contains(s[i:j], "__name__") {
				return 0, errors.New("a metric named through __name__: name it before the braces")
			}
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed { at offset %d", i)
}
