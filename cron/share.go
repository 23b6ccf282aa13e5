package cron

import (
	"runtime"
	"sync"
	"weak"
)

// shared holds, for each schedule value in use, a weak pointer to the
// *Schedule that stands for it: a Schedule is immutable, so jobs whose
// expressions parse to equal values can hold one. An entry goes away
// when its schedule is collected; the table never keeps a schedule
// alive.
var shared struct {
	sync.Mutex
	m map[Schedule]weak.Pointer[Schedule]
}

// share returns the *Schedule in use equal to s, or s (from then on the
// one in use). Schedules with day forms (L, W, #) are returned as they
// are: their value holds a pointer, so equal ones would not compare
// equal.
func share(s *Schedule) *Schedule {
	if s.days != nil {
		return s
	}
	k := *s
	shared.Lock()
	defer shared.Unlock()
	if p := shared.m[k].Value(); p != nil {
		return p
	}
	if shared.m == nil {
		shared.m = map[Schedule]weak.Pointer[Schedule]{}
	}
	wp := weak.Make(s)
	shared.m[k] = wp
	runtime.AddCleanup(s, func(k Schedule) {
		shared.Lock()
		defer shared.Unlock()
		if shared.m[k] == wp { // not since replaced by a newer schedule
			delete(shared.m, k)
		}
	}, k)
	return s
}
