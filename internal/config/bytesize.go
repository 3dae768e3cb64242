package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes written as a plain number or with a unit (KiB, MiB, GiB, KB, MB,
// GB).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

// UnmarshalText parses "52428800", "50MiB" or "1.5GiB".
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	mult := int64(1)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 0) || f*float64(mult) > 1<<62 { // !(f >= 0) also refuses NaN
		return fmt.Errorf("want a size such as 52428800 or 50MiB, got %q", string(text))
	}
	*b = ByteSize(f * float64(mult))
	return nil
}

func (b ByteSize) String() string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return strconv.FormatInt(int64(b), 10)
}
