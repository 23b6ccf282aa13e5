package redis

import (
	"bytes"
	"encoding/json"
)

// jsonUnmarshal decodes Lua cjson output, whose numbers may be floats
// (cjson prints up to 14 significant digits).
func jsonUnmarshal(s string, v *termJSON) error {
	var raw struct {
		Epoch  json.Number `json:"epoch"`
		Holder string      `json:"holder"`
		Start  json.Number `json:"start"`
		End    json.Number `json:"end"`
		Reason string      `json:"reason"`
	}
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	if err := d.Decode(&raw); err != nil {
		return err
	}
	num := func(n json.Number) int64 {
		if n == "" {
			return 0
		}
		if i, err := n.Int64(); err == nil {
			return i
		}
		f, _ := n.Float64()
		return int64(f)
	}
	var epoch *int64
	if raw.Epoch != "" {
		e := num(raw.Epoch)
		epoch = &e
	}
	*v = termJSON{Epoch: epoch, Holder: raw.Holder, Start: num(raw.Start), End: num(raw.End), Reason: raw.Reason}
	return nil
}
