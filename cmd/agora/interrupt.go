package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interrupts turns a Ctrl-C (or SIGTERM) into the cancel of ctx, and answers exactly, when the
// watch ends, whether one came: signal.NotifyContext cannot, since a signal it has taken but
// whose goroutine has not yet cancelled its context reads as none, and the front would then
// exec the whole program, which never sees that signal, and run the dispatch (review 33).
type interrupts struct {
	ctx    context.Context
	cancel context.CancelFunc
	sigs   chan os.Signal
	quit   chan struct{}
	exited chan struct{}
	once   sync.Once
	came   bool
}

func watchInterrupts() *interrupts {
	in := &interrupts{sigs: make(chan os.Signal, 1), quit: make(chan struct{}), exited: make(chan struct{})}
	in.ctx, in.cancel = context.WithCancel(context.Background())
	signal.Notify(in.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer close(in.exited)
		select {
		case <-in.sigs:
			in.cancel()
		case <-in.quit:
		}
	}()
	return in
}

// stop ends the watch and reports whether an interrupt came, one delivered but not yet seen
// included: signal.Stop returns only once no delivery to sigs is under way, and the watcher
// has exited, so a signal is either behind the cancel or still in sigs. Safe to call twice.
func (in *interrupts) stop() bool {
	in.once.Do(func() {
		signal.Stop(in.sigs)
		close(in.quit)
		<-in.exited
		select {
		case <-in.sigs:
			in.came = true
		default:
			in.came = in.ctx.Err() != nil
		}
		in.cancel()
	})
	return in.came
}
