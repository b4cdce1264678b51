package main

// flood: hold many loopback TCP connections (both ends) in this process, so a test or
// benchmark can build a large socket table out of several processes, each under its fd
// limit. Not a NATS client; it only shares the binary.

import (
	"flag"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func cmdFlood(args []string) {
	fs := flag.NewFlagSet("natspeer flood", flag.ContinueOnError)
	n := fs.Int("connections", 1000, "connections to hold (2 sockets each)")
	addr := fs.String("listen", "127.0.0.1:0", "listener address")
	if err := fs.Parse(args); err != nil {
		fatal("flags: %v", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fatal("listen: %v", err)
	}
	accepted := make(chan net.Conn, 1024)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	held := make([]net.Conn, 0, 2**n)
	for i := 0; i < *n; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			fatal("connection %d: %v", i, err)
		}
		held = append(held, c, <-accepted)
	}
	event("ready %s", ln.Addr().String())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	_ = held
	os.Exit(0)
}
