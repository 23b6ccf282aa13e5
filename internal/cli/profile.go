package cli

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// profiles are the diagnosis flags of `onetick run`: a CPU profile of the
// whole run and a heap profile at exit, for `go tool pprof`.
type profiles struct{ cpu, mem *string }

func addProfileFlags(fs *flag.FlagSet) profiles {
	return profiles{
		cpu: fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (diagnosis; read with go tool pprof)"),
		mem: fs.String("memprofile", "", "write a heap profile to this file on exit (diagnosis; read with go tool pprof)"),
	}
}

// start starts the CPU profile; the returned func stops it and writes the
// heap profile.
func (p profiles) start() (stop func(), err error) {
	var cpu *os.File
	if *p.cpu != "" {
		if cpu, err = os.Create(*p.cpu); err != nil {
			return nil, fmt.Errorf("-cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("-cpuprofile: %v", err)
		}
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		if *p.mem != "" {
			if f, err := os.Create(*p.mem); err == nil {
				runtime.GC()
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
	}, nil
}
