package cli

import "testing"

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode and spaces": "plain text, ünïcode and spaces",
		"\x1b[2J\r":                      `\x1b[2J\r`,
		"a\x00b\tc\nd\x7f":               `a\x00b\tc\nd\x7f`,
		"right\u202eto-left":             `right\u202eto-left`,
		"bad \xff utf8":                  `bad \xff utf8`,
		`back\slash`:                     `back\slash`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
