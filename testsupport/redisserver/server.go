package redisserver

import (
	"fmt"
	"os"
	"strconv"
)

// Server is a standalone redis-server without persistence on a free
// loopback port, in a temporary directory of its own.
type Server struct {
	Port int
	// Dir is the server's working directory; Stop removes it.
	Dir string
	p   *Process
}

// startAttempts is how many free ports Start tries: another process may
// take a port between its choice and the server's bind.
const startAttempts = 5

// Start starts a server with BaseArgs and then args, and waits until it
// accepts connections. The caller must Stop it.
func Start(args ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "onetick-redis-")
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		s, err := start(bin, dir, args)
		if err == nil {
			return s, nil
		}
		if attempt == startAttempts-1 {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

func start(bin, dir string, args []string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	argv := append(BaseArgs(dir), "--port", strconv.Itoa(port))
	p, err := Launch(Command{Bin: bin, Args: append(argv, args...), Dir: dir})
	if err == nil {
		err = p.Wait(0)
	}
	if err != nil {
		return nil, fmt.Errorf("redis-server on port %d: %w", port, err)
	}
	return &Server{Port: port, Dir: dir, p: p}, nil
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop kills the server, waits until it has exited and removes its
// directory. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.p != nil {
		s.p.Kill()
		s.p = nil
	}
	_ = os.RemoveAll(s.Dir)
}
