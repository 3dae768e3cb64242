package cmdread

import "strings"

// optSpec is the option grammar of a program agora reads (a wrapper, a shell, an
// interpreter), as getopt reads it: short options one letter each, several in one word
// ("-iu NAME" is "-i -u NAME"), long options spelt whole or by a prefix only one of them
// starts with ("--ignore" is "--ignore-environment"), as GNU getopt_long accepts.
//
// A word the grammar does not know makes the Reading fail: the call is then held (agora
// cannot tell what it runs), never read as if the word were an argument.
type optSpec struct {
	flags string // short options without an argument
	args  string // short options with an argument (the rest of the word, or the next word)
	stuck string // short options with an optional argument, only the rest of the word ("-i.bak")
	code  string // short options whose argument is code the program runs (python -c, perl -e)
	// stop are short options with an argument after which the words are the program's own
	// operands (python -m MODULE ARGS...); code options stop too.
	stop    string
	long    []string
	longArg []string // long options with an argument (--name=V, or --name V)
	longOpt []string // long options with an optional argument, only as --name=V
	// longCode are long options whose argument is code the program runs (--eval).
	longCode []string
	// numeric: "-N" (digits) is an option ("nice -10", old style).
	numeric bool
	// permute: options may follow operands (GNU getopt without "+"), so every word before
	// "--" is read as an option when it starts with "-".
	permute bool
}

// optResult is what [optSpec.parse] read.
type optResult struct {
	opts     map[string][]string // option (its long name or its letter) -> values given ("" when none)
	operands []string            // the words that are not options, in order
	code     []string            // arguments of code options (longCode, code)
}

// parse reads argv (without the program) with the grammar. It stops at the first operand
// unless s.permute, and at "--". It returns false when a word is not in the grammar.
func (s optSpec) parse(argv []string) (optResult, bool) {
	r := optResult{opts: map[string][]string{}}
	for i := 0; i < len(argv); i++ {
		w := argv[i]
		switch {
		case w == "--":
			r.operands = append(r.operands, argv[i+1:]...)
			return r, true
		case strings.HasPrefix(w, "--"):
			n, ok := s.parseLong(argv, i, &r)
			if !ok {
				return r, false
			}
			i = n
		case len(w) > 1 && w[0] == '-':
			if s.numeric && allDigits(w[1:]) {
				r.opts["-N"] = append(r.opts["-N"], w[1:])
				continue
			}
			n, stop, ok := s.parseShort(argv, i, &r)
			if !ok {
				return r, false
			}
			i = n
			if stop {
				r.operands = append(r.operands, argv[i+1:]...)
				return r, true
			}
		default:
			if !s.permute {
				r.operands = append(r.operands, argv[i:]...)
				return r, true
			}
			r.operands = append(r.operands, w)
		}
	}
	return r, true
}

// parseLong reads the long option argv[i]; it returns the index of the last word it used.
func (s optSpec) parseLong(argv []string, i int, r *optResult) (int, bool) {
	name, val, hasVal := strings.Cut(argv[i][2:], "=")
	kind, full := s.lookupLong(name)
	switch kind {
	case longFlag:
		if hasVal {
			return i, false
		}
		r.opts[full] = append(r.opts[full], "")
	case longOptional:
		r.opts[full] = append(r.opts[full], val)
	case longWithArg, longWithCode:
		if !hasVal {
			if i+1 >= len(argv) {
				return i, false
			}
			i++
			val = argv[i]
		}
		r.opts[full] = append(r.opts[full], val)
		if kind == longWithCode {
			r.code = append(r.code, val)
		}
	default:
		return i, false
	}
	return i, true
}

// parseShort reads the cluster of short options argv[i]; it returns the index of the last
// word it used, and whether the options end there (s.stop, s.code).
func (s optSpec) parseShort(argv []string, i int, r *optResult) (last int, stop, ok bool) {
	w := argv[i]
	for j := 1; j < len(w); j++ {
		c := string(w[j])
		switch {
		case strings.Contains(s.flags, c):
			r.opts[c] = append(r.opts[c], "")
		case strings.Contains(s.stuck, c):
			r.opts[c] = append(r.opts[c], w[j+1:])
			return i, false, true
		case strings.Contains(s.args, c) || strings.Contains(s.code, c) || strings.Contains(s.stop, c):
			val := w[j+1:]
			if val == "" {
				if i+1 >= len(argv) {
					return i, false, false
				}
				i++
				val = argv[i]
			}
			r.opts[c] = append(r.opts[c], val)
			isCode := strings.Contains(s.code, c)
			if isCode {
				r.code = append(r.code, val)
			}
			return i, isCode || strings.Contains(s.stop, c), true
		default:
			return i, false, false
		}
	}
	return i, false, true
}

// Kinds of long options.
const (
	longUnknown = iota
	longFlag
	longWithArg
	longOptional
	longWithCode
)

// lookupLong finds the long option name stands for: itself, or the only one it is a prefix
// of (an ambiguous or unknown name is longUnknown).
func (s optSpec) lookupLong(name string) (int, string) {
	if name == "" {
		return longUnknown, ""
	}
	kinds := []struct {
		names []string
		kind  int
	}{{s.long, longFlag}, {s.longArg, longWithArg}, {s.longOpt, longOptional}, {s.longCode, longWithCode}}
	var (
		found     int
		full      string
		prefixHit int
	)
	for _, k := range kinds {
		for _, n := range k.names {
			if n == name {
				return k.kind, n
			}
			if strings.HasPrefix(n, name) {
				prefixHit++
				found, full = k.kind, n
			}
		}
	}
	if prefixHit != 1 {
		return longUnknown, ""
	}
	return found, full
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
