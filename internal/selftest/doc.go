// Package selftest runs agora's attack corpus against a target of this home, as real
// dispatches in a throw-away home of its own, and reports what each attack did: blocked or
// allowed, seen by agora's own records and the runner's host-side probes, never by the
// attack's word alone (docs/selftest.md).
//
// An attack is one file in corpus/: a header of "# key: value" lines (its threat class,
// whether it must be blocked or allowed, the control that decides, how the runner observes it
// and why it matters) and the shell program the worker runs, sourced by bundle/run.sh after
// it writes the run's canary.
package selftest
