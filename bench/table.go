package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// cell is one figure; vals, when set, are the numbers the ratio against
// onetick is computed from (same order as onetick's vals).
type cell struct {
	text string
	vals []float64
}

type row struct {
	metric string
	cells  map[string]cell
	note   string
}

type table struct {
	cols  []string // system keys, onetick first
	title map[string]string
	rows  []*row
}

func (t *table) add(metric, note string) *row {
	r := &row{metric: metric, cells: map[string]cell{}, note: note}
	t.rows = append(t.rows, r)
	return r
}

func (r *row) set(col string, c cell) { r.cells[col] = c }

func (r *row) text(col, format string, args ...any) {
	r.cells[col] = cell{text: fmt.Sprintf(format, args...)}
}

// ratio formats baseline / onetick for each value.
func ratio(b, o []float64) string {
	if len(b) == 0 || len(b) != len(o) {
		return ""
	}
	parts := make([]string, len(b))
	any := false
	for i := range b {
		switch {
		case math.IsNaN(b[i]) || math.IsNaN(o[i]):
			parts[i] = "–"
		case o[i] == 0 && b[i] == 0:
			parts[i] = "="
			any = true
		case o[i] == 0:
			parts[i] = "∞"
			any = true
		default:
			parts[i] = "×" + fmtRatio(b[i]/o[i])
			any = true
		}
	}
	if !any {
		return ""
	}
	return " (" + strings.Join(parts, " / ") + ")"
}

func fmtRatio(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func esc(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func (t *table) markdown() string {
	var b strings.Builder
	b.WriteString("| metric |")
	for _, c := range t.cols {
		b.WriteString(" " + esc(t.title[c]) + " |")
	}
	b.WriteString(" how measured |\n|---|")
	for range t.cols {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	for _, r := range t.rows {
		b.WriteString("| " + esc(r.metric) + " |")
		o := r.cells[t.cols[0]]
		for i, c := range t.cols {
			x, ok := r.cells[c]
			s := x.text
			if !ok {
				s = "–"
			}
			if i > 0 && ok {
				s += ratio(x.vals, o.vals)
			}
			b.WriteString(" " + esc(s) + " |")
		}
		b.WriteString(" " + esc(r.note) + " |\n")
	}
	return b.String()
}

// fmtDur prints a duration with three significant figures.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func fmtBytes(x float64) string {
	switch {
	case x >= 1<<20:
		return fmt.Sprintf("%.1f MiB", x/(1<<20))
	case x >= 10*1024:
		return fmt.Sprintf("%.1f KiB", x/1024)
	default:
		return fmt.Sprintf("%.0f B", x)
	}
}
