package redisserver

import "syscall"

// dieWithParent makes the child die with this process even when this one
// is killed (a test timeout, ^C) before it can stop its children. The
// signal follows the OS thread that forked, not the process; the Go
// runtime retires a thread only when a goroutine exits while locked to
// it, which this package never does.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
