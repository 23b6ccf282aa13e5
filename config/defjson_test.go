package config

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeDef reads what JobDef writes, and nothing differently from
// encoding/json.
func TestDecodeDefSameAsJSON(t *testing.T) {
	jobs := []Job{
		{Name: "a", Schedule: "0 * * * * *", Timezone: "UTC", Prefer: "missed", Grace: Duration(30e9), MaxCatchup: 100,
			Stream: "onetick:stream:shared", Payload: "{}"},
		{Name: "b-é", Schedule: "H H * * * *", Timezone: "Europe/Berlin", Prefer: "duplicate", MaxCatchup: 7,
			Stream: "s", MaxLen: 1000, Payload: `{"x":"<y>"}`, Line: 12},
		{Name: "c", Run: &Run{Timeout: Duration(1e9)}},
	}
	fast := 0
	for _, j := range jobs {
		def, err := j.JobDef()
		if err != nil {
			t.Fatal(err)
		}
		want := j
		want.Line = 0
		if checkDef(t, def) {
			fast++
		}
		var got Job
		if err := json.Unmarshal(def, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip: %+v, %v", got, err)
		}
	}
	if fast != 1 {
		t.Fatalf("decodeDef took %d of the definitions, want 1 (the plain one)", fast)
	}
}

// checkDef compares decodeDef with encoding/json on def and reports
// whether decodeDef took it.
func checkDef(t *testing.T, def []byte) bool {
	t.Helper()
	var a, b Job
	if !decodeDef(def, &a) {
		return false
	}
	if err := json.Unmarshal(def, &b); err != nil {
		t.Fatalf("%q: decodeDef took what encoding/json refuses: %v", def, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%q: decodeDef %+v, encoding/json %+v", def, a, b)
	}
	return true
}

func FuzzDecodeDef(f *testing.F) {
	f.Add([]byte(`{"Name":"a","Schedule":"0 * * * * *","Timezone":"UTC","Prefer":"missed","Grace":30000000000,"MaxCatchup":100,"Stream":"s","MaxLen":0,"Payload":"{}","Run":null,"Line":0}`))
	f.Add([]byte(`{"Name":"a","Schedule":"x","Timezone":"","Prefer":"","Grace":-1,"MaxCatchup":01,"Stream":"s","MaxLen":9223372036854775808,"Payload":"","Run":null,"Line":0}`))
	f.Fuzz(func(t *testing.T, def []byte) { checkDef(t, def) })
}
